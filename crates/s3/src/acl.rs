//! Access control lists as S3 keeps them on buckets and objects: grants of READ, WRITE,
//! READ_ACP, WRITE_ACP or FULL_CONTROL to a user (by canonical id) or to a group (everyone,
//! every signed-in user); canned ACLs and `x-amz-grant-*` headers turned into grants.

use serde::{Deserialize, Serialize};

/// S3's group URIs.
pub const ALL_USERS: &str = "http://acs.amazonaws.com/groups/global/AllUsers";
pub const AUTHENTICATED_USERS: &str = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";
pub const LOG_DELIVERY: &str = "http://acs.amazonaws.com/groups/s3/LogDelivery";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Permission {
    Read,
    Write,
    ReadAcp,
    WriteAcp,
    FullControl,
}

impl Permission {
    pub fn parse(s: &str) -> Option<Permission> {
        Some(match s {
            "READ" => Permission::Read,
            "WRITE" => Permission::Write,
            "READ_ACP" => Permission::ReadAcp,
            "WRITE_ACP" => Permission::WriteAcp,
            "FULL_CONTROL" => Permission::FullControl,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Read => "READ",
            Permission::Write => "WRITE",
            Permission::ReadAcp => "READ_ACP",
            Permission::WriteAcp => "WRITE_ACP",
            Permission::FullControl => "FULL_CONTROL",
        }
    }

    /// Whether a grant of `self` gives `wanted`.
    pub fn covers(self, wanted: Permission) -> bool {
        self == Permission::FullControl || self == wanted
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Grantee {
    /// A user or the administrators, by canonical id.
    User(String),
    AllUsers,
    AuthenticatedUsers,
    /// S3's log delivery group: kept and shown, grants nobody here anything.
    LogDelivery,
}

impl Grantee {
    pub fn is_public(&self) -> bool {
        matches!(self, Grantee::AllUsers | Grantee::AuthenticatedUsers)
    }

    pub fn from_uri(uri: &str) -> Option<Grantee> {
        match uri {
            ALL_USERS => Some(Grantee::AllUsers),
            AUTHENTICATED_USERS => Some(Grantee::AuthenticatedUsers),
            LOG_DELIVERY => Some(Grantee::LogDelivery),
            _ => None,
        }
    }

    pub fn uri(&self) -> Option<&'static str> {
        match self {
            Grantee::User(_) => None,
            Grantee::AllUsers => Some(ALL_USERS),
            Grantee::AuthenticatedUsers => Some(AUTHENTICATED_USERS),
            Grantee::LogDelivery => Some(LOG_DELIVERY),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub grantee: Grantee,
    pub permission: Permission,
}

/// The grants of a bucket or an object (its owner is kept beside them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acl {
    pub grants: Vec<Grant>,
}

/// Grants an ACL holds at most, as in S3.
pub const MAX_GRANTS: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    #[error("an ACL holds at most {MAX_GRANTS} grants, not {0}")]
    TooMany(usize),
    #[error("unknown canned ACL {0}")]
    UnknownCanned(String),
    #[error("grants by e-mail address cannot be resolved here: grant by id or group uri")]
    ByEmail,
    #[error("malformed grant {0:?}: expected id=\"...\" or uri=\"...\"")]
    Malformed(String),
    #[error("unknown group {0}")]
    UnknownGroup(String),
    #[error("unknown user id {0}")]
    UnknownUser(String),
    #[error("unknown permission {0}")]
    UnknownPermission(String),
}

/// Who the canned ACLs name besides the owner.
pub struct Parties<'a> {
    pub owner: &'a str,
    /// The bucket's owner (for an object's `bucket-owner-*` ACLs).
    pub bucket_owner: &'a str,
}

impl Acl {
    /// A canned ACL (`x-amz-acl`) as grants.
    pub fn canned(name: &str, parties: &Parties<'_>) -> Result<Acl, AclError> {
        let owner = Grant { grantee: Grantee::User(parties.owner.to_owned()), permission: Permission::FullControl };
        let mut grants = vec![owner];
        let mut add = |grantee: Grantee, permission| grants.push(Grant { grantee, permission });
        match name {
            "private" | "aws-exec-read" => {}
            "public-read" => add(Grantee::AllUsers, Permission::Read),
            "public-read-write" => {
                add(Grantee::AllUsers, Permission::Read);
                add(Grantee::AllUsers, Permission::Write);
            }
            "authenticated-read" => add(Grantee::AuthenticatedUsers, Permission::Read),
            "bucket-owner-read" if parties.bucket_owner != parties.owner => add(Grantee::User(parties.bucket_owner.to_owned()), Permission::Read),
            "bucket-owner-full-control" if parties.bucket_owner != parties.owner => add(Grantee::User(parties.bucket_owner.to_owned()), Permission::FullControl),
            "bucket-owner-read" | "bucket-owner-full-control" => {}
            "log-delivery-write" => {
                add(Grantee::LogDelivery, Permission::Write);
                add(Grantee::LogDelivery, Permission::ReadAcp);
            }
            other => return Err(AclError::UnknownCanned(other.to_owned())),
        }
        Ok(Acl { grants })
    }

    /// Grants from `x-amz-grant-*` headers: (permission, header value) pairs, each value a
    /// comma-separated list of `id="..."`, `uri="..."` or `emailAddress="..."`.
    pub fn from_grant_headers(headers: &[(Permission, &str)], known_user: impl Fn(&str) -> bool) -> Result<Option<Acl>, AclError> {
        let mut grants = Vec::new();
        for (permission, value) in headers {
            for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let (kind, quoted) = item.split_once('=').ok_or_else(|| AclError::Malformed(item.to_owned()))?;
                let v = quoted.trim().trim_matches('"');
                let grantee = match kind.trim().to_ascii_lowercase().as_str() {
                    "id" if known_user(v) => Grantee::User(v.to_owned()),
                    "id" => return Err(AclError::UnknownUser(v.to_owned())),
                    "uri" => Grantee::from_uri(v).ok_or_else(|| AclError::UnknownGroup(v.to_owned()))?,
                    "emailaddress" => return Err(AclError::ByEmail),
                    _ => return Err(AclError::Malformed(item.to_owned())),
                };
                grants.push(Grant { grantee, permission: *permission });
            }
        }
        if grants.is_empty() {
            return Ok(None);
        }
        Acl::limited(grants).map(Some)
    }

    /// An ACL of `grants`, refused past [`MAX_GRANTS`].
    pub fn limited(grants: Vec<Grant>) -> Result<Acl, AclError> {
        if grants.len() > MAX_GRANTS {
            return Err(AclError::TooMany(grants.len()));
        }
        Ok(Acl { grants })
    }

    pub fn is_public(&self) -> bool {
        self.grants.iter().any(|g| g.grantee.is_public())
    }

    /// Whether the grants give `wanted` to a requester who is `user` (None: anonymous);
    /// `ignore_public` drops the group grants (a public access block's IgnorePublicAcls).
    pub fn allows(&self, user: Option<&str>, wanted: Permission, ignore_public: bool) -> bool {
        self.grants.iter().any(|g| {
            let to_requester = match &g.grantee {
                Grantee::User(id) => user == Some(id.as_str()),
                Grantee::AllUsers => !ignore_public,
                Grantee::AuthenticatedUsers => !ignore_public && user.is_some(),
                Grantee::LogDelivery => false,
            };
            to_requester && g.permission.covers(wanted)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Parties<'static> = Parties { owner: "o", bucket_owner: "b" };

    #[test]
    fn canned_acls_grant_what_s3_says() {
        let private = Acl::canned("private", &P).unwrap();
        assert!(private.allows(Some("o"), Permission::WriteAcp, false));
        assert!(!private.allows(Some("x"), Permission::Read, false));
        assert!(!private.allows(None, Permission::Read, false));
        let public = Acl::canned("public-read", &P).unwrap();
        assert!(public.allows(None, Permission::Read, false) && public.is_public());
        assert!(!public.allows(None, Permission::Write, false));
        assert!(!public.allows(None, Permission::Read, true), "IgnorePublicAcls");
        let rw = Acl::canned("public-read-write", &P).unwrap();
        assert!(rw.allows(None, Permission::Write, false));
        let auth = Acl::canned("authenticated-read", &P).unwrap();
        assert!(auth.allows(Some("x"), Permission::Read, false) && !auth.allows(None, Permission::Read, false));
        let bofc = Acl::canned("bucket-owner-full-control", &P).unwrap();
        assert!(bofc.allows(Some("b"), Permission::ReadAcp, false));
        assert!(Acl::canned("bucket-owner-read", &P).unwrap().allows(Some("b"), Permission::Read, false));
        assert_eq!(Acl::canned("nope", &P), Err(AclError::UnknownCanned("nope".into())));
    }

    #[test]
    fn grant_headers_name_users_and_groups() {
        let known = |id: &str| id == "u1";
        let acl = Acl::from_grant_headers(&[(Permission::Read, "id=\"u1\", uri=\"http://acs.amazonaws.com/groups/global/AllUsers\""), (Permission::WriteAcp, "id=u1")], known).unwrap().unwrap();
        assert!(acl.allows(Some("u1"), Permission::WriteAcp, false));
        assert!(acl.allows(None, Permission::Read, false));
        assert_eq!(Acl::from_grant_headers(&[], known).unwrap(), None);
        assert_eq!(Acl::from_grant_headers(&[(Permission::Read, "emailAddress=\"a@b\"")], known), Err(AclError::ByEmail));
        assert!(matches!(Acl::from_grant_headers(&[(Permission::Read, "id=\"nobody\"")], known), Err(AclError::UnknownUser(_))));
        assert!(matches!(Acl::from_grant_headers(&[(Permission::Read, "junk")], known), Err(AclError::Malformed(_))));
        assert!(matches!(Acl::from_grant_headers(&[(Permission::Read, "uri=\"http://x\"")], known), Err(AclError::UnknownGroup(_))));
        let many = vec!["id=u1"; MAX_GRANTS + 1].join(",");
        assert_eq!(Acl::from_grant_headers(&[(Permission::Read, &many)], known), Err(AclError::TooMany(MAX_GRANTS + 1)));
        let most = vec!["id=u1"; MAX_GRANTS].join(",");
        assert!(Acl::from_grant_headers(&[(Permission::Read, &most)], known).is_ok());
    }
}
