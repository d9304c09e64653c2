//! Owners and ACLs as operations set and show them: the owner and grants of a new bucket or
//! object (canned `x-amz-acl`, `x-amz-grant-*` headers, or an AccessControlPolicy body),
//! within what the bucket's object ownership and public access block allow; and the ACL
//! operations themselves.

use s3s::dto::{self, AccessControlPolicy};
use s3s::{s3_error, S3Request, S3Response, S3Result};

use super::lookup::Gateway;
use crate::acl::{AclError, Parties};
use crate::access::{self, Acl, Grant, Grantee, Permission, Principal};
use crate::kv::{Cond, Durability, KvError};
use crate::layout;
use crate::records::{self, BucketRecord, Ownership, ADMIN_ID};

/// What a request says of the ACL it wants.
pub(super) struct Asked<'a> {
    pub canned: Option<&'a str>,
    pub grants: Vec<(Permission, &'a str)>,
    pub policy: Option<&'a AccessControlPolicy>,
}

impl<'a> Asked<'a> {
    pub fn headers(canned: Option<&'a str>, read: Option<&'a String>, write: Option<&'a String>, read_acp: Option<&'a String>, write_acp: Option<&'a String>, full: Option<&'a String>) -> Asked<'a> {
        let grants = [(Permission::Read, read), (Permission::Write, write), (Permission::ReadAcp, read_acp), (Permission::WriteAcp, write_acp), (Permission::FullControl, full)]
            .into_iter()
            .filter_map(|(p, v)| v.map(|v| (p, v.as_str())))
            .collect();
        Asked { canned, grants, policy: None }
    }

    fn is_empty(&self) -> bool {
        self.canned.is_none() && self.grants.is_empty() && self.policy.is_none()
    }
}

fn acl_error(e: AclError) -> s3s::S3Error {
    match e {
        AclError::ByEmail => s3_error!(UnresolvableGrantByEmailAddress, "{e}"),
        AclError::TooMany(_) => s3_error!(MalformedACLError, "{e}"),
        _ => s3_error!(InvalidArgument, "{e}"),
    }
}

/// A canonical id as grants name users: 64 hex digits.
fn is_canonical_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The grants asked for (None: the default, private), for an owner `owner` in a bucket owned
/// by `bucket_owner`.
fn grants_of(asked: &Asked<'_>, owner: &str, bucket_owner: &str) -> S3Result<Option<Acl>> {
    let parties = Parties { owner, bucket_owner };
    let set = [asked.canned.is_some(), !asked.grants.is_empty(), asked.policy.is_some()].iter().filter(|b| **b).count();
    if set > 1 {
        return Err(s3_error!(InvalidRequest, "Specifying more than one of a canned ACL, grant headers and an ACL body is not allowed"));
    }
    if let Some(canned) = asked.canned {
        let acl = Acl::canned(canned, &parties).map_err(acl_error)?;
        return Ok((acl != access::private_acl(owner)).then_some(acl));
    }
    if !asked.grants.is_empty() {
        return Acl::from_grant_headers(&asked.grants, is_canonical_id).map_err(acl_error);
    }
    if let Some(policy) = asked.policy {
        let mut grants = Vec::new();
        for g in policy.grants.iter().flatten() {
            let permission = g.permission.as_ref().and_then(|p| Permission::parse(p.as_str())).ok_or_else(|| s3_error!(MalformedACLError, "a grant without a known permission"))?;
            let Some(who) = &g.grantee else { return Err(s3_error!(MalformedACLError, "a grant without a grantee")) };
            let grantee = match (who.type_.as_str(), &who.id, &who.uri) {
                (dto::Type::CANONICAL_USER, Some(id), _) if is_canonical_id(id) => Grantee::User(id.clone()),
                (dto::Type::CANONICAL_USER, Some(id), _) => return Err(s3_error!(InvalidArgument, "Invalid id {id}")),
                (dto::Type::GROUP, _, Some(uri)) => Grantee::from_uri(uri).ok_or_else(|| s3_error!(InvalidArgument, "Invalid group uri {uri}"))?,
                (dto::Type::AMAZON_CUSTOMER_BY_EMAIL, _, _) => return Err(acl_error(AclError::ByEmail)),
                _ => return Err(s3_error!(MalformedACLError, "The XML you provided was not well-formed or did not validate against our published schema")),
            };
            grants.push(Grant { grantee, permission });
        }
        return Acl::limited(grants).map(Some).map_err(acl_error);
    }
    Ok(None)
}

/// The owner (None: the bucket's) and ACL of an object `principal` writes into `bucket`.
pub(super) fn for_new_object(principal: &Principal, bucket: &BucketRecord, asked: &Asked<'_>) -> S3Result<(Option<String>, Option<Acl>)> {
    let writer = principal.id().unwrap_or(ADMIN_ID);
    let bucket_owner = bucket.owner_id();
    match bucket.ownership() {
        Ownership::BucketOwnerEnforced => {
            let fine = asked.is_empty() || (asked.canned == Some("bucket-owner-full-control") && asked.grants.is_empty());
            if !fine {
                return Err(s3_error!(AccessControlListNotSupported, "The bucket does not allow ACLs"));
            }
            Ok((None, None))
        }
        ownership => {
            let acl = grants_of(asked, writer, bucket_owner)?;
            check_not_blocked(bucket, acl.as_ref())?;
            let to_bucket_owner = writer == bucket_owner || (ownership == Ownership::BucketOwnerPreferred && asked.canned == Some("bucket-owner-full-control"));
            Ok(((!to_bucket_owner).then(|| writer.to_owned()), acl))
        }
    }
}

fn check_not_blocked(bucket: &BucketRecord, acl: Option<&Acl>) -> S3Result<()> {
    if bucket.block().block_public_acls && acl.is_some_and(Acl::is_public) {
        return Err(s3_error!(AccessDenied, "public ACLs are blocked on this bucket (BlockPublicAcls)"));
    }
    Ok(())
}

/// The owner and ACL of a bucket `principal` creates.
pub(super) fn for_new_bucket(principal: &Principal, asked: &Asked<'_>, ownership: Option<&str>) -> S3Result<BucketRecord> {
    let owner = principal.id().unwrap_or(ADMIN_ID);
    let ownership = match ownership {
        None => None,
        Some(s) => Some(Ownership::parse(s).ok_or_else(|| s3_error!(InvalidArgument, "unknown object ownership {s}"))?),
    };
    let mut record = BucketRecord { created_ms: records::now_ms(), owner: (owner != ADMIN_ID).then(|| owner.to_owned()), ownership, ..BucketRecord::default() };
    if ownership == Some(Ownership::BucketOwnerEnforced) && !asked.is_empty() && asked.canned != Some("private") {
        return Err(s3_error!(InvalidBucketAclWithObjectOwnership, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"));
    }
    record.acl = grants_of(asked, owner, owner)?;
    Ok(record)
}

fn grants_dto(owner: &str, acl: Option<&Acl>) -> dto::Grants {
    let private;
    let acl = match acl {
        Some(a) => a,
        None => {
            private = access::private_acl(owner);
            &private
        }
    };
    acl.grants
        .iter()
        .map(|g| {
            let grantee = match &g.grantee {
                Grantee::User(id) => dto::Grantee { id: Some(id.clone()), display_name: None, email_address: None, type_: dto::Type::from_static(dto::Type::CANONICAL_USER), uri: None },
                group => dto::Grantee { id: None, display_name: None, email_address: None, type_: dto::Type::from_static(dto::Type::GROUP), uri: group.uri().map(str::to_owned) },
            };
            dto::Grant { grantee: Some(grantee), permission: Some(dto::Permission::from(g.permission.as_str().to_owned())) }
        })
        .collect()
}

/// How many times a read-modify-write of a record is tried when others write it meanwhile.
const RETRIES: usize = 5;

impl Gateway {
    /// Changes the bucket's record with `change`, as a compare-and-swap on its version.
    pub(super) async fn update_bucket(&self, bucket: &str, change: impl Fn(&mut BucketRecord) -> S3Result<()>) -> S3Result<BucketRecord> {
        for _ in 0..RETRIES {
            let (mut record, version) = self.bucket_record_versioned(bucket).await?;
            change(&mut record)?;
            match self.core.kv.put(&layout::bucket(bucket), records::encode(&record), Cond::Version(version), Durability::Through).await {
                Ok(_) => return Ok(record),
                Err(KvError::Mismatch) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(s3_error!(OperationAborted, "A conflicting conditional operation is currently in progress against this resource. Please try again."))
    }

    pub(super) async fn get_bucket_acl_in(&self, req: S3Request<dto::GetBucketAclInput>) -> S3Result<S3Response<dto::GetBucketAclOutput>> {
        let record = self.bucket_record(access::granted(&req.extensions)?, &req.input.bucket).await?;
        let owner = record.owner_id();
        Ok(S3Response::new(dto::GetBucketAclOutput { grants: Some(grants_dto(owner, record.acl.as_ref())), owner: Some(super::convert::owner(owner)) }))
    }

    pub(super) async fn put_bucket_acl_in(&self, req: S3Request<dto::PutBucketAclInput>) -> S3Result<S3Response<dto::PutBucketAclOutput>> {
        let i = &req.input;
        let mut asked = Asked::headers(i.acl.as_ref().map(|a| a.as_str()), i.grant_read.as_ref(), i.grant_write.as_ref(), i.grant_read_acp.as_ref(), i.grant_write_acp.as_ref(), i.grant_full_control.as_ref());
        asked.policy = i.access_control_policy.as_ref();
        self.update_bucket(&i.bucket, |record| {
            if record.ownership() == Ownership::BucketOwnerEnforced && !(asked.canned == Some("private") || asked.is_empty()) {
                return Err(s3_error!(AccessControlListNotSupported, "The bucket does not allow ACLs"));
            }
            let owner = record.owner_id().to_owned();
            let acl = grants_of(&asked, &owner, &owner)?;
            check_not_blocked(record, acl.as_ref())?;
            record.acl = acl;
            Ok(())
        })
        .await?;
        Ok(S3Response::new(dto::PutBucketAclOutput {}))
    }

    pub(super) async fn get_object_acl_in(&self, req: S3Request<dto::GetObjectAclInput>) -> S3Result<S3Response<dto::GetObjectAclOutput>> {
        let granted = access::granted(&req.extensions)?;
        let i = &req.input;
        let record = self.bucket_record(granted, &i.bucket).await?;
        let m = self.readable_body(&granted.object, &i.bucket, &i.key, i.version_id.as_deref()).await?;
        let owner = m.owner.as_deref().unwrap_or(record.owner_id());
        Ok(S3Response::new(dto::GetObjectAclOutput { grants: Some(grants_dto(owner, m.acl.as_ref())), owner: Some(super::convert::owner(owner)), ..Default::default() }))
    }

    pub(super) async fn put_object_acl_in(&self, req: S3Request<dto::PutObjectAclInput>) -> S3Result<S3Response<dto::PutObjectAclOutput>> {
        let granted = access::granted(&req.extensions)?;
        let i = &req.input;
        let mut asked = Asked::headers(i.acl.as_ref().map(|a| a.as_str()), i.grant_read.as_ref(), i.grant_write.as_ref(), i.grant_read_acp.as_ref(), i.grant_write_acp.as_ref(), i.grant_full_control.as_ref());
        asked.policy = i.access_control_policy.as_ref();
        let record = self.bucket_record(granted, &i.bucket).await?;
        if record.ownership() == Ownership::BucketOwnerEnforced && !(asked.canned == Some("bucket-owner-full-control") || asked.canned == Some("private") || asked.is_empty()) {
            return Err(s3_error!(AccessControlListNotSupported, "The bucket does not allow ACLs"));
        }
        self.update_object(&i.bucket, &i.key, i.version_id.as_deref(), &granted.object, |m| {
            let owner = m.owner.clone().unwrap_or_else(|| record.owner_id().to_owned());
            let acl = grants_of(&asked, &owner, record.owner_id())?;
            check_not_blocked(&record, acl.as_ref())?;
            m.acl = acl;
            Ok(())
        })
        .await?;
        Ok(S3Response::new(dto::PutObjectAclOutput::default()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::records::PublicAccessBlock;
    use crate::users::UserId;

    fn bob() -> Principal {
        Principal::User(Arc::new(UserId { name: "bob".into(), id: "b".repeat(64) }))
    }

    #[test]
    fn new_objects_take_owner_and_acl_as_the_bucket_allows() {
        let ann = "a".repeat(64);
        let bucket = BucketRecord { owner: Some(ann.clone()), ..BucketRecord::default() };
        let none = Asked { canned: None, grants: vec![], policy: None };
        assert_eq!(for_new_object(&bob(), &bucket, &none).unwrap(), (Some("b".repeat(64)), None));
        let public = Asked { canned: Some("public-read"), grants: vec![], policy: None };
        let (_, acl) = for_new_object(&bob(), &bucket, &public).unwrap();
        assert!(acl.unwrap().is_public());
        let blocked = BucketRecord { public_access_block: Some(PublicAccessBlock { block_public_acls: true, ..Default::default() }), ..bucket.clone() };
        assert!(for_new_object(&bob(), &blocked, &public).is_err());
        let enforced = BucketRecord { ownership: Some(Ownership::BucketOwnerEnforced), ..bucket.clone() };
        assert_eq!(for_new_object(&bob(), &enforced, &none).unwrap(), (None, None));
        assert!(for_new_object(&bob(), &enforced, &public).is_err());
        let preferred = BucketRecord { ownership: Some(Ownership::BucketOwnerPreferred), ..bucket.clone() };
        let bofc = Asked { canned: Some("bucket-owner-full-control"), grants: vec![], policy: None };
        assert_eq!(for_new_object(&bob(), &preferred, &bofc).unwrap().0, None);
        let both = Asked { canned: Some("private"), grants: vec![(Permission::Read, "id=\"x\"")], policy: None };
        assert!(for_new_object(&bob(), &bucket, &both).is_err());
        assert!(for_new_object(&bob(), &bucket, &Asked { canned: Some("bogus"), grants: vec![], policy: None }).is_err());
    }
}
