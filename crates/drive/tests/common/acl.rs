//! ACL entries for tests that set one. The one copy: `crates/cli/tests/common/mod.rs`
//! includes this file too.

use spindle_client::{AclEntry, AclScope, Client, ClientError};

/// Every permission there is.
pub const ALL_PERMISSIONS: [&str; 9] = ["READ", "WRITE", "DELETE", "RANGE", "SETUP", "P2POP", "GETLOG", "SECURITY", "POWER_MANAGEMENT"];

pub fn entry(identity: i64, key: &str, scopes: Vec<AclScope>) -> AclEntry {
    AclEntry { identity, key: key.into(), scopes, max_priority: None }
}

pub fn scope(offset: i64, value: &str, perms: &[&str], tls_required: bool) -> AclScope {
    AclScope { offset, value: value.into(), permissions: perms.iter().map(|p| p.to_string()).collect(), tls_required }
}

/// The factory identity 1, its published key, every permission.
pub fn admin_entry() -> AclEntry {
    entry(1, "asdfasdf", vec![scope(0, "", &ALL_PERMISSIONS, false)])
}

pub async fn set_acl(admin: &Client, entries: Vec<AclEntry>) -> Result<(), ClientError> {
    admin.set_acl(entries.iter().map(|e| e.to_proto().unwrap()).collect()).await
}
