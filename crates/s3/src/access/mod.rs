//! Who may make a request. Every request is decided here before the operation runs
//! (`S3Access::check`): its requester (an administrator, a user, or anonymous), the
//! operation's action and scope (`ops`), and the bucket's owner, policy (`policy`), ACL
//! (`acl`), public access block and object ownership. An explicit Deny in the policy refuses;
//! the bucket's owner, a policy's Allow or the ACL's grant permit; nothing else does. Where
//! the object's own ACL decides (reads of an object by someone other than the bucket's
//! owner), the decision travels with the request (`Granted`) and the operation checks the
//! object it reads (`Granted::object`). docs/design/s3-access.md says more.

mod decide;
mod ops;
pub mod policy;
mod presign;

use std::net::IpAddr;
use std::sync::Arc;

use s3s::access::{S3Access, S3AccessContext};
use s3s::path::S3Path;
use s3s::dto::PostObjectInput;
use s3s::{s3_error, S3Request, S3Result};

pub use crate::acl::{Acl, Grant, Grantee, Permission};
pub use decide::{private as private_acl, BucketView, Decision, Granted};
pub use presign::MAX_PRESIGNED_SECS;

use crate::auth::Keys;
use crate::layout;
use crate::objects::Core;
use crate::records::{self, BucketRecord, ADMIN_ID};
use crate::users::{Directory, UserId};

/// The requester.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// One of the gateway's own keys: may do everything.
    Admin,
    User(Arc<UserId>),
    Anonymous,
}

impl Principal {
    /// The canonical id owners and grants name; none for anonymous.
    pub fn id(&self) -> Option<&str> {
        match self {
            Principal::Admin => Some(ADMIN_ID),
            Principal::User(u) => Some(&u.id),
            Principal::Anonymous => None,
        }
    }

    pub fn display_name(&self) -> &str {
        match self {
            Principal::Admin => "spindle",
            Principal::User(u) => &u.name,
            Principal::Anonymous => "anonymous",
        }
    }
}

/// How the request arrived: put on each request by the server, read by policies
/// (aws:SecureTransport, aws:SourceIp).
#[derive(Debug, Clone, Copy)]
pub struct Transport {
    pub secure: bool,
    pub peer: IpAddr,
}

/// Set by `check` once s3s verified the request's signature (it does before access is
/// decided): only then does the server count the connection as a signed-in client's.
#[derive(Debug, Clone, Default)]
pub struct Verified(pub Arc<std::sync::atomic::AtomicBool>);

pub struct Access {
    pub core: Arc<Core>,
    pub admins: Arc<Keys>,
    pub users: Option<Arc<Directory>>,
}

impl Access {
    pub fn principal(&self, access_key: Option<&str>) -> Principal {
        match access_key {
            None => Principal::Anonymous,
            Some(k) if self.admins.contains(k) => Principal::Admin,
            // A signature s3s checked with this key's secret: the directory knows it.
            Some(k) => match self.users.as_ref().and_then(|d| d.user_of(k)) {
                Some(u) => Principal::User(u),
                None => Principal::Anonymous,
            },
        }
    }

    async fn bucket(&self, name: &str) -> S3Result<Option<BucketRecord>> {
        match self.core.kv.get(&layout::bucket(name)).await? {
            Some(s) => Ok(Some(records::decode("bucket", &s.value)?)),
            None => Ok(None),
        }
    }
}

#[async_trait::async_trait]
impl S3Access for Access {
    async fn post_object(&self, req: &mut S3Request<PostObjectInput>) -> S3Result<()> {
        self.decide_form(req).await
    }

    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        presign::presigned_within_a_week(cx.uri().query())?;
        if cx.credentials().is_some() {
            if let Some(v) = cx.extensions_mut().get::<Verified>() {
                v.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        // A form upload names its key and ACL in the form: `post_object` decides it.
        if cx.s3_op().name() == "PostObject" {
            return Ok(());
        }
        let principal = self.principal(cx.credentials().map(|c| c.access_key.as_str()));
        let transport = cx.extensions_mut().get::<Transport>().copied();
        let op = cx.s3_op().name();
        let (action, scope) = ops::of(op);
        let names_version = cx.uri().query().is_some_and(|q| q.split('&').any(|p| p.split('=').next() == Some("versionId")));
        let action = if names_version { ops::of_version(action) } else { action };
        let (bucket, key) = match cx.s3_path() {
            S3Path::Root => (None, None),
            S3Path::Bucket { bucket } => (Some(bucket.to_string()), None),
            S3Path::Object { bucket, key } => (Some(bucket.to_string()), Some(key.to_string())),
        };
        let facts = decide::Facts::of(cx.uri().query(), cx.headers(), transport);
        let view = match &bucket {
            Some(b) if principal != Principal::Admin => self.bucket(b).await?.map(|r| Arc::new(BucketView::new(b.clone(), r))),
            _ => None,
        };
        let mut granted = decide::decide(&principal, op, action, scope, bucket.as_deref(), key.as_deref(), view.as_deref(), &facts)?;
        // A copy reads its source: that needs s3:GetObject there too.
        let source = match cx.headers().get("x-amz-copy-source").and_then(|v| v.to_str().ok()) {
            Some(src) if principal != Principal::Admin && (op == "CopyObject" || op == "UploadPartCopy") => {
                let (sb, sk) = decide::copy_source(src)?;
                let source = self.bucket(&sb).await?.map(|r| BucketView::new(sb.clone(), r));
                let (action, scope) = ops::of("GetObject");
                Some(decide::decide(&principal, "GetObject", action, scope, Some(&sb), Some(&sk), source.as_ref(), &facts)?)
            }
            _ => None,
        };
        granted.source = source.map(|s| Box::new(s.object));
        if op == "DeleteObjects" && view.as_ref().is_some_and(|v| v.has_policy()) {
            granted.per_key = Some(Arc::new(facts));
        }
        granted.bucket = view;
        tracing::debug!(op, principal = principal.display_name(), ?bucket, "access granted");
        cx.extensions_mut().insert(granted);
        Ok(())
    }
}

impl Access {
    /// A form upload (POST object), decided as the PutObject of the key its form names, with
    /// the form's ACL as `s3:x-amz-acl` (s3s has checked the form's signature and policy).
    async fn decide_form(&self, req: &mut S3Request<PostObjectInput>) -> S3Result<()> {
        let bucket = req.input.bucket.clone();
        let principal = self.principal(req.credentials.as_ref().map(|c| c.access_key.as_str()));
        let transport = req.extensions.get::<Transport>().copied();
        let mut facts = decide::Facts::of(req.uri.query(), &req.headers, transport);
        if let Some(acl) = &req.input.acl {
            facts = facts.with_acl(acl.as_str());
        }
        let view = match principal {
            Principal::Admin => None,
            _ => self.bucket(&bucket).await?.map(|r| Arc::new(BucketView::new(bucket.clone(), r))),
        };
        let (action, scope) = ops::of("PutObject");
        let mut granted = decide::decide(&principal, "PutObject", action, scope, Some(&bucket), Some(&req.input.key), view.as_deref(), &facts)?;
        granted.bucket = view;
        req.extensions.insert(granted);
        Ok(())
    }
}

/// The decision `check` made for a request, which every operation that reads an object under
/// an ACL check must have: a request that reached an operation without one is refused.
pub fn granted(extensions: &http::Extensions) -> S3Result<&Granted> {
    extensions.get::<Granted>().ok_or_else(|| s3_error!(AccessDenied, "no access decision for this request"))
}
