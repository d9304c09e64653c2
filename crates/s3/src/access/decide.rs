//! The decision for one request, from what `check` gathered (no I/O here): the rules in the
//! module's order, each a plain function of the requester, the operation and the bucket.

use std::net::IpAddr;
use std::sync::Arc;

use http::HeaderMap;
use s3s::dto::CopySource;
use s3s::{s3_error, S3Result};

use crate::acl::{Acl, Parties, Permission};
use super::ops::Scope;
use super::policy::{Policy, Request, Verdict};
use super::{Principal, Transport};
use crate::records::{BucketRecord, Manifest, Ownership};

/// What a request may do, found by `check` and carried to the operation.
#[derive(Debug, Clone)]
pub struct Granted {
    pub principal: Principal,
    /// For the object the request names.
    pub object: Decision,
    /// For a copy's source object.
    pub source: Option<Box<Decision>>,
    /// The bucket as the decision read it (none for the administrators, whose requests are
    /// not decided by it): the operation takes its record from here rather than reading it
    /// again.
    pub bucket: Option<Arc<BucketView>>,
    /// Where a request names its keys in its body (DeleteObjects), the facts to decide each
    /// key by: set when the bucket has a policy, which may name keys.
    pub per_key: Option<Arc<Facts>>,
}

impl Granted {
    /// Whether `op` may be done on `key` of the request's bucket.
    pub fn key_allowed(&self, key: &str, op: &str, version: bool) -> S3Result<()> {
        let (Some(facts), Some(view)) = (&self.per_key, &self.bucket) else { return Ok(()) };
        let (action, scope) = super::ops::of(op);
        let action = if version { super::ops::of_version(action) } else { action };
        decide(&self.principal, op, action, scope, Some(&view.name), Some(key), Some(view), facts).map(|_| ())
    }

    /// The record of `bucket` if the decision read it.
    pub fn record_of(&self, bucket: &str) -> Option<&BucketRecord> {
        self.bucket.as_deref().filter(|v| v.name == bucket).map(|v| &v.record)
    }
}

/// A bucket as decisions read it: its record, and its policy parsed once.
#[derive(Debug)]
pub struct BucketView {
    pub name: String,
    pub record: BucketRecord,
    /// Err: a stored policy that no longer parses (it was checked when it was put).
    policy: Option<Result<Policy, ()>>,
}

impl BucketView {
    pub fn new(name: String, record: BucketRecord) -> BucketView {
        let policy = record.policy.as_deref().map(|text| Policy::parse(text, &name).map_err(|_| ()));
        BucketView { name, record, policy }
    }

    pub fn has_policy(&self) -> bool {
        self.policy.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// Allowed where the object's owner is the requester or its ACL grants `wanted`.
    ByObjectAcl {
        wanted: Permission,
        requester: Option<String>,
        ignore_public: bool,
        bucket_owner: String,
        /// May the requester learn that an object is missing (it may list the bucket)?
        may_list: bool,
    },
}

fn denied() -> s3s::S3Error {
    s3_error!(AccessDenied, "Access Denied")
}

impl Decision {
    /// Checks the object the operation found (None: there is none).
    pub fn object(&self, manifest: Option<&Manifest>) -> S3Result<()> {
        let Decision::ByObjectAcl { wanted, requester, ignore_public, bucket_owner, may_list } = self else { return Ok(()) };
        let Some(m) = manifest else { return if *may_list { Ok(()) } else { Err(denied()) } };
        let owner = m.owner.as_deref().unwrap_or(bucket_owner);
        if requester.as_deref() == Some(owner) {
            return Ok(());
        }
        let allowed = match &m.acl {
            Some(acl) => acl.allows(requester.as_deref(), *wanted, *ignore_public),
            None => false,
        };
        if allowed {
            Ok(())
        } else {
            Err(denied())
        }
    }
}

/// What policies' conditions may ask of the request.
#[derive(Debug)]
pub struct Facts {
    secure: bool,
    peer: Option<IpAddr>,
    keys: Vec<(&'static str, String)>,
}

impl Facts {
    pub fn of(query: Option<&str>, headers: &HeaderMap, transport: Option<Transport>) -> Facts {
        let mut keys = Vec::new();
        for pair in query.unwrap_or("").split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = urlencoding_decode(v);
            match k {
                "prefix" => keys.push(("s3:prefix", v)),
                "delimiter" => keys.push(("s3:delimiter", v)),
                _ => {}
            }
        }
        if let Some(acl) = headers.get("x-amz-acl").and_then(|v| v.to_str().ok()) {
            keys.push(("s3:x-amz-acl", acl.to_owned()));
        }
        Facts { secure: transport.is_some_and(|t| t.secure), peer: transport.map(|t| t.peer), keys }
    }

    /// The canned ACL a request asks for where it is not a header (a form upload's field).
    pub fn with_acl(mut self, acl: &str) -> Facts {
        self.keys.retain(|(k, _)| *k != "s3:x-amz-acl");
        self.keys.push(("s3:x-amz-acl", acl.to_owned()));
        self
    }
}

/// A query value as the client meant it (`+` is a space in a query).
fn urlencoding_decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    urlencoding::decode(&spaced).map(|c| c.into_owned()).unwrap_or(spaced)
}

/// The default ACL of a bucket or object: its owner has full control (shown by GetBucketAcl and
/// GetObjectAcl; decisions read a missing ACL as "nobody but the owner").
pub fn private(owner: &str) -> Acl {
    Acl::canned("private", &Parties { owner, bucket_owner: owner }).unwrap_or_default()
}

#[allow(clippy::too_many_arguments, reason = "the facts of one request, each a plain value: a struct would only rename them")]
pub fn decide(principal: &Principal, op: &str, action: &str, scope: Scope, bucket: Option<&str>, key: Option<&str>, view: Option<&BucketView>, facts: &Facts) -> S3Result<Granted> {
    let granted = |object| Ok(Granted { principal: principal.clone(), object, source: None, bucket: None, per_key: None });
    if *principal == Principal::Admin {
        return granted(Decision::Allowed);
    }
    let me = principal.id();
    let (Some(bucket), false) = (bucket, scope == Scope::Service) else {
        return if me.is_some() { granted(Decision::Allowed) } else { Err(denied()) };
    };
    let Some(view) = view else { return Err(s3_error!(NoSuchBucket, "The specified bucket does not exist: {bucket}")) };
    let record = &view.record;
    let owner = record.owner_id();
    let is_owner = me == Some(owner);
    let block = record.block();
    let enforced = record.ownership() == Ownership::BucketOwnerEnforced;

    let resource = match key {
        Some(k) => format!("arn:aws:s3:::{bucket}/{k}"),
        None => format!("arn:aws:s3:::{bucket}"),
    };
    let user = match principal {
        Principal::User(u) => Some((u.name.as_str(), u.id.as_str())),
        _ => None,
    };
    let keys: Vec<(&str, &str)> = facts.keys.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let req = Request { user, action, resource: &resource, secure: facts.secure, source_ip: facts.peer, keys: &keys };
    let verdict = match &view.policy {
        Some(Ok(p)) => p.verdict(&req, block.restrict_public_buckets && p.is_public()),
        // Checked when it was put: one that no longer reads refuses everyone but the owner.
        Some(Err(())) => Verdict::Deny,
        None => Verdict::Silent,
    };
    // The owner can always mend the policy that denies it.
    let manages_policy = matches!(op, "GetBucketPolicy" | "PutBucketPolicy" | "DeleteBucketPolicy");
    if verdict == Verdict::Deny && !(is_owner && manages_policy) {
        return Err(denied());
    }
    let by_object = |wanted, may_list| Decision::ByObjectAcl { wanted, requester: me.map(str::to_owned), ignore_public: block.ignore_public_acls, bucket_owner: owner.to_owned(), may_list };
    if is_owner {
        return match scope {
            Scope::Object(wanted) if !enforced => granted(by_object(wanted, true)),
            _ => granted(Decision::Allowed),
        };
    }
    if verdict == Verdict::Allow {
        return granted(Decision::Allowed);
    }
    // No ACL: private, which grants nobody but the owner (who is not asking here).
    let bucket_acl = |wanted| !enforced && record.acl.as_ref().is_some_and(|a| a.allows(me, wanted, block.ignore_public_acls));
    match scope {
        Scope::Bucket(wanted) if bucket_acl(wanted) => granted(Decision::Allowed),
        Scope::Object(wanted) if !enforced => granted(by_object(wanted, bucket_acl(Permission::Read))),
        _ => Err(denied()),
    }
}

/// The bucket and key of an `x-amz-copy-source` header.
pub fn copy_source(header: &str) -> S3Result<(String, String)> {
    match CopySource::parse(header) {
        Ok(CopySource::Bucket { bucket, key, .. }) => Ok((bucket.into(), key.into())),
        _ => Err(s3_error!(InvalidArgument, "x-amz-copy-source must be BUCKET/KEY")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{PublicAccessBlock, ADMIN_ID};
    use crate::users::UserId;

    fn user(name: &str) -> Principal {
        Principal::User(Arc::new(UserId { name: name.into(), id: format!("id-{name}") }))
    }

    fn facts() -> Facts {
        Facts { secure: true, peer: None, keys: Vec::new() }
    }

    fn ask(p: &Principal, op: &str, record: &BucketRecord, key: Option<&str>) -> S3Result<Granted> {
        let (action, scope) = super::super::ops::of(op);
        decide(p, op, action, scope, Some("b"), key, Some(&BucketView::new("b".into(), record.clone())), &facts())
    }

    fn owned_by(name: &str) -> BucketRecord {
        BucketRecord { owner: Some(format!("id-{name}")), ..BucketRecord::default() }
    }

    fn manifest(owner: Option<&str>, acl: Option<Acl>) -> Manifest {
        Manifest { owner: owner.map(str::to_owned), acl, ..Manifest::default() }
    }

    #[test]
    fn users_are_kept_apart() {
        let (ann, bob) = (user("ann"), user("bob"));
        let b = owned_by("ann");
        assert!(ask(&ann, "ListObjectsV2", &b, None).is_ok());
        assert!(ask(&ann, "PutBucketPolicy", &b, None).is_ok());
        for op in ["ListObjectsV2", "PutObject", "DeleteObject", "GetBucketAcl", "PutBucketPolicy", "DeleteBucket"] {
            assert_eq!(*ask(&bob, op, &b, Some("k")).unwrap_err().code(), s3s::S3ErrorCode::AccessDenied, "{op}");
        }
        // A read of an object is decided by the object: bob may not learn it is missing.
        let g = ask(&bob, "GetObject", &b, Some("k")).unwrap();
        assert!(g.object.object(Some(&manifest(None, None))).is_err());
        assert!(g.object.object(None).is_err());
        assert!(ask(&Principal::Anonymous, "ListObjectsV2", &b, None).is_err());
        assert!(ask(&Principal::Anonymous, "ListBuckets", &b, None).is_err());
        assert!(ask(&bob, "ListBuckets", &b, None).is_ok());
        assert!(ask(&Principal::Admin, "DeleteBucket", &b, None).is_ok());
        let old = BucketRecord::default();
        assert_eq!(old.owner_id(), ADMIN_ID);
        assert!(ask(&ann, "GetObject", &old, Some("k")).unwrap().object.object(Some(&manifest(None, None))).is_err());
    }

    #[test]
    fn public_objects_and_buckets() {
        let b = owned_by("ann");
        let public = Acl::canned("public-read", &Parties { owner: "id-ann", bucket_owner: "id-ann" }).unwrap();
        let g = ask(&Principal::Anonymous, "GetObject", &b, Some("k")).unwrap();
        assert!(g.object.object(Some(&manifest(None, Some(public.clone())))).is_ok());
        assert!(g.object.object(Some(&manifest(None, None))).is_err());
        let blocked = BucketRecord { public_access_block: Some(PublicAccessBlock { ignore_public_acls: true, ..Default::default() }), ..b.clone() };
        assert!(ask(&Principal::Anonymous, "GetObject", &blocked, Some("k")).unwrap().object.object(Some(&manifest(None, Some(public.clone())))).is_err());
        let enforced = BucketRecord { ownership: Some(Ownership::BucketOwnerEnforced), ..b.clone() };
        assert!(ask(&Principal::Anonymous, "GetObject", &enforced, Some("k")).is_err(), "ACLs off");
        let listed = BucketRecord { acl: Some(public), ..b.clone() };
        assert!(ask(&Principal::Anonymous, "ListObjects", &listed, None).is_ok());
        assert!(ask(&Principal::Anonymous, "PutObject", &listed, Some("k")).is_err());
        // An object another user wrote into ann's bucket is theirs.
        let g = ask(&user("ann"), "GetObject", &b, Some("k")).unwrap();
        assert!(g.object.object(Some(&manifest(Some("id-bob"), None))).is_err());
        assert!(g.object.object(Some(&manifest(Some("id-ann"), None))).is_ok());
        assert!(g.object.object(None).is_ok(), "the owner may learn it is missing");
    }

    #[test]
    fn policies_allow_and_deny() {
        let policy = r#"{"Statement":[
            {"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::1:user/bob"},"Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]},
            {"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/secret/*"}]}"#;
        let b = BucketRecord { policy: Some(policy.into()), ..owned_by("ann") };
        let bob = user("bob");
        assert_eq!(ask(&bob, "GetObject", &b, Some("k")).unwrap().object, Decision::Allowed);
        assert!(ask(&bob, "ListObjects", &b, None).is_ok());
        assert!(ask(&bob, "PutObject", &b, Some("k")).is_err());
        assert!(ask(&bob, "GetObject", &b, Some("secret/x")).is_err());
        assert!(ask(&user("ann"), "GetObject", &b, Some("secret/x")).is_err(), "a Deny binds the owner too");
        assert!(ask(&user("ann"), "DeleteBucketPolicy", &b, None).is_ok(), "but not from mending the policy");
    }

    #[test]
    fn a_stored_policy_that_no_longer_reads_refuses_all_but_its_mending() {
        let b = BucketRecord { policy: Some("{garbled".into()), acl: Some(Acl::canned("public-read", &Parties { owner: "id-ann", bucket_owner: "id-ann" }).unwrap()), ..owned_by("ann") };
        assert!(ask(&Principal::Anonymous, "ListObjects", &b, None).is_err(), "not even the public ACL");
        assert!(ask(&user("ann"), "GetObject", &b, Some("k")).is_err());
        assert!(ask(&user("ann"), "PutBucketPolicy", &b, None).is_ok());
        assert!(ask(&user("bob"), "PutBucketPolicy", &b, None).is_err());
        assert!(ask(&Principal::Admin, "GetObject", &b, Some("k")).is_ok());
    }

    #[test]
    fn deletes_named_in_a_body_are_decided_key_by_key() {
        let policy = r#"{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/keep/*"},
            {"Effect":"Deny","Principal":"*","Action":"s3:DeleteObjectVersion","Resource":"arn:aws:s3:::b/old/*"}]}"#;
        let view = Arc::new(BucketView::new("b".into(), BucketRecord { policy: Some(policy.into()), ..owned_by("ann") }));
        let mut g = ask(&user("ann"), "DeleteObjects", &view.record, None).unwrap();
        assert!(g.key_allowed("keep/x", "DeleteObject", false).is_ok(), "without the facts nothing is asked again");
        g.bucket = Some(view);
        g.per_key = Some(Arc::new(facts()));
        assert!(g.key_allowed("keep/x", "DeleteObject", false).is_err());
        assert!(g.key_allowed("other", "DeleteObject", false).is_ok());
        // A version named in the body asks s3:DeleteObjectVersion.
        assert!(g.key_allowed("old/x", "DeleteObject", true).is_err());
        assert!(g.key_allowed("old/x", "DeleteObject", false).is_ok());
        assert!(g.key_allowed("keep/x", "DeleteObject", true).is_ok());
        assert_eq!(g.record_of("b").map(|r| r.owner_id()), Some("id-ann"));
        assert!(g.record_of("elsewhere").is_none());
    }

    #[test]
    fn copy_sources() {
        assert_eq!(copy_source("/bkt/a%20k").unwrap(), ("bkt".into(), "a k".into()));
        assert!(copy_source("nokey").is_err());
        assert_eq!(urlencoding_decode("home%2Fann+x%"), "home/ann x%");
    }
}
