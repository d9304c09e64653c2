//! Who may talk to the drive: identities and their HMAC keys.
//!
//! A factory-fresh drive knows exactly the identity every reference client uses by default
//! (1, key "asdfasdf"). Full ACLs (scopes, permissions, TLS-only identities) replace this table
//! through the SECURITY command; the lookup below is the single place requests are
//! authenticated, so permission checks attach here.

use std::collections::HashMap;

use bytes::Bytes;
use spindle_proto::{DEFAULT_HMAC_KEY, DEFAULT_IDENTITY};

#[derive(Debug, Clone)]
pub struct Identity {
    pub id: i64,
    pub hmac_key: Bytes,
}

#[derive(Debug, Clone)]
pub struct Security {
    identities: HashMap<i64, Identity>,
}

impl Default for Security {
    fn default() -> Self {
        let factory = Identity { id: DEFAULT_IDENTITY, hmac_key: Bytes::from_static(DEFAULT_HMAC_KEY) };
        Security { identities: HashMap::from([(factory.id, factory)]) }
    }
}

impl Security {
    pub fn identity(&self, id: i64) -> Option<&Identity> {
        self.identities.get(&id)
    }
}
