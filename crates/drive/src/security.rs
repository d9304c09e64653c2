//! Who may do what: identities with their HMAC keys and scoped permissions (the ACL), and the
//! lock and erase PINs.
//!
//! A factory-fresh (or erased) drive knows exactly the identity every reference client uses by
//! default: 1, key "asdfasdf", every permission on every key. A SECURITY command replaces the
//! whole list (the protocol's semantics). The reference simulator merges instead, and a drive
//! started with `merge_acls` does as it does ([`Security::with_merged_acl`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use spindle_proto::pb::command::security::acl::{self, HmacAlgorithm};
use spindle_proto::pb::command::security::Acl;
use spindle_proto::{StatusCode, DEFAULT_HMAC_KEY, DEFAULT_IDENTITY};

/// The protocol's permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Read,
    Write,
    Delete,
    Range,
    Setup,
    P2pop,
    Getlog,
    Security,
    PowerManagement,
}

impl Permission {
    const ALL: [Permission; 9] = [
        Permission::Read,
        Permission::Write,
        Permission::Delete,
        Permission::Range,
        Permission::Setup,
        Permission::P2pop,
        Permission::Getlog,
        Permission::Security,
        Permission::PowerManagement,
    ];

    fn bit(self) -> u16 {
        1 << (self as u16)
    }

    fn to_proto(self) -> acl::Permission {
        use acl::Permission as P;
        match self {
            Permission::Read => P::Read,
            Permission::Write => P::Write,
            Permission::Delete => P::Delete,
            Permission::Range => P::Range,
            Permission::Setup => P::Setup,
            Permission::P2pop => P::P2pop,
            Permission::Getlog => P::Getlog,
            Permission::Security => P::Security,
            Permission::PowerManagement => P::PowerManagement,
        }
    }

    fn from_proto(p: i32) -> Option<Permission> {
        use acl::Permission as P;
        Some(match P::try_from(p).ok()? {
            P::Read => Permission::Read,
            P::Write => Permission::Write,
            P::Delete => Permission::Delete,
            P::Range => Permission::Range,
            P::Setup => Permission::Setup,
            P::P2pop => Permission::P2pop,
            P::Getlog => Permission::Getlog,
            P::Security => Permission::Security,
            P::PowerManagement => Permission::PowerManagement,
            P::InvalidPermission => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Permission::Read => "READ",
            Permission::Write => "WRITE",
            Permission::Delete => "DELETE",
            Permission::Range => "RANGE",
            Permission::Setup => "SETUP",
            Permission::P2pop => "P2POP",
            Permission::Getlog => "GETLOG",
            Permission::Security => "SECURITY",
            Permission::PowerManagement => "POWER_MANAGEMENT",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Scope {
    pub offset: usize,
    /// Must appear in the key at `offset`; empty matches every key.
    pub value: Bytes,
    permissions: u16,
    /// The scope applies only to requests that arrived over TLS.
    pub tls_required: bool,
}

impl Scope {
    fn matches(&self, key: &[u8]) -> bool {
        self.value.is_empty() || key.get(self.offset..self.offset + self.value.len()).is_some_and(|k| k == &self.value[..])
    }
}

#[derive(Debug, Clone)]
pub struct Identity {
    pub id: i64,
    pub hmac_key: Bytes,
    /// `hmac_key` prepared for signing and verifying.
    pub mac: spindle_proto::hmac::HmacKey,
    pub scopes: Vec<Scope>,
    /// Highest request priority this identity may use (None: any).
    pub max_priority: Option<i32>,
}

impl Identity {
    /// Whether the identity holds `permission`, for `key` when the permission is about keys.
    pub fn allows(&self, permission: Permission, key: Option<&[u8]>, tls: bool) -> bool {
        self.granting(permission, tls).any(|s| key.is_none_or(|k| s.matches(k)))
    }

    /// The scopes that grant `permission` over the transport (`tls` or not).
    fn granting(&self, permission: Permission, tls: bool) -> impl Iterator<Item = &Scope> {
        self.scopes.iter().filter(move |s| (tls || !s.tls_required) && s.permissions & permission.bit() != 0)
    }
}

/// A SECURITY request that cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Rejected {
    pub status: StatusCode,
    pub message: String,
}

fn rejected(status: StatusCode, message: impl Into<String>) -> Rejected {
    Rejected { status, message: message.into() }
}

#[derive(Debug, Clone)]
pub struct Security {
    identities: HashMap<i64, Arc<Identity>>,
    /// The ACL as last set (persisted); empty while the factory identity is in force.
    pub acl: Vec<Acl>,
    pub lock_pin: Bytes,
    pub erase_pin: Bytes,
}

impl Default for Security {
    fn default() -> Self {
        let factory = Identity {
            id: DEFAULT_IDENTITY,
            hmac_key: Bytes::from_static(DEFAULT_HMAC_KEY),
            mac: spindle_proto::hmac::HmacKey::new(DEFAULT_HMAC_KEY),
            scopes: vec![Scope {
                offset: 0,
                value: Bytes::new(),
                permissions: Permission::ALL.iter().fold(0, |m, p| m | p.bit()),
                tls_required: false,
            }],
            max_priority: None,
        };
        Security { identities: HashMap::from([(factory.id, Arc::new(factory))]), acl: Vec::new(), lock_pin: Bytes::new(), erase_pin: Bytes::new() }
    }
}

impl Security {
    pub fn identity(&self, id: i64) -> Option<Arc<Identity>> {
        self.identities.get(&id).cloned()
    }

    /// A security state with `acl` in force (validated), PINs kept.
    pub fn with_acl(&self, acl: Vec<Acl>, max_identities: u32) -> Result<Security, Rejected> {
        let identities = validate(&acl, max_identities)?;
        Ok(Security { identities, acl, lock_pin: self.lock_pin.clone(), erase_pin: self.erase_pin.clone() })
    }

    /// A security state with `incoming` merged into the ACL in force, as the reference
    /// simulator merges: each incoming entry replaces the whole entry of its identity (key,
    /// algorithm, scopes, maxPriority), identities it does not name stay as they were, and
    /// new ones are added. While the factory identity is in force it is the list merged into,
    /// as the simulator's default list is, so it stays usable. `incoming` is validated on its
    /// own (an identity twice in one message is refused, where the simulator keeps the last)
    /// and the merged list is validated again as a replacement would be (maxIdentityCount
    /// counts it whole). PINs are kept.
    pub fn with_merged_acl(&self, incoming: Vec<Acl>, max_identities: u32) -> Result<Security, Rejected> {
        validate(&incoming, max_identities)?;
        let mut merged = if self.acl.is_empty() { vec![factory_acl()] } else { self.acl.clone() };
        for entry in incoming {
            match merged.iter_mut().find(|m| m.identity == entry.identity) {
                Some(slot) => *slot = entry,
                None => merged.push(entry),
            }
        }
        self.with_acl(merged, max_identities)
    }

    /// Rebuilds the state read back from disk (validated again: a damaged file is refused).
    pub fn restore(acl: Vec<Acl>, lock_pin: Bytes, erase_pin: Bytes, max_identities: u32) -> Result<Security, Rejected> {
        let mut s = if acl.is_empty() { Security::default() } else { Security::default().with_acl(acl, max_identities)? };
        s.lock_pin = lock_pin;
        s.erase_pin = erase_pin;
        Ok(s)
    }
}

/// The factory identity as an ACL entry: the list a merge starts from on a drive whose ACL
/// was never set (or was erased), the same identity `Security::default` holds.
fn factory_acl() -> Acl {
    Acl {
        identity: Some(DEFAULT_IDENTITY),
        key: Some(Bytes::from_static(DEFAULT_HMAC_KEY)),
        hmac_algorithm: Some(HmacAlgorithm::HmacSha1 as i32),
        scope: vec![acl::Scope {
            offset: None,
            value: None,
            permission: Permission::ALL.iter().map(|p| p.to_proto() as i32).collect(),
            tls_required: None,
        }],
        max_priority: None,
    }
}

fn validate(acl: &[Acl], max_identities: u32) -> Result<HashMap<i64, Arc<Identity>>, Rejected> {
    if acl.is_empty() {
        return Err(rejected(StatusCode::InvalidRequest, "an ACL needs at least one identity"));
    }
    if acl.len() > max_identities as usize {
        return Err(rejected(StatusCode::InvalidRequest, format!("{} identities exceed maxIdentityCount {max_identities}", acl.len())));
    }
    let mut seen = HashSet::new();
    let mut identities = HashMap::new();
    for a in acl {
        let id = a.identity.ok_or_else(|| rejected(StatusCode::InvalidRequest, "every ACL entry needs an identity"))?;
        if !seen.insert(id) {
            return Err(rejected(StatusCode::InvalidRequest, format!("identity {id} appears twice")));
        }
        let key = a.key.clone().unwrap_or_default();
        if key.is_empty() {
            return Err(rejected(StatusCode::InvalidRequest, format!("identity {id} has an empty HMAC key")));
        }
        match a.hmac_algorithm.map(HmacAlgorithm::try_from) {
            None | Some(Ok(HmacAlgorithm::HmacSha1)) => {}
            Some(_) => return Err(rejected(StatusCode::NoSuchHmacAlgorithm, format!("identity {id}: unsupported HMAC algorithm"))),
        }
        if a.scope.is_empty() {
            return Err(rejected(StatusCode::InvalidRequest, format!("identity {id} has no scope")));
        }
        let mut scopes = Vec::new();
        for s in &a.scope {
            let offset = s.offset.unwrap_or(0);
            if offset < 0 || offset > u16::MAX as i64 {
                return Err(rejected(StatusCode::InvalidRequest, format!("identity {id}: invalid scope offset {offset}")));
            }
            if s.permission.is_empty() {
                return Err(rejected(StatusCode::InvalidRequest, format!("identity {id}: a scope without permissions")));
            }
            let mut permissions = 0;
            for p in &s.permission {
                let p = Permission::from_proto(*p).ok_or_else(|| rejected(StatusCode::InvalidRequest, format!("identity {id}: unknown permission {p}")))?;
                permissions |= p.bit();
            }
            scopes.push(Scope { offset: offset as usize, value: s.value.clone().unwrap_or_default(), permissions, tls_required: s.tls_required.unwrap_or(false) });
        }
        let mac = spindle_proto::hmac::HmacKey::new(&key);
        identities.insert(id, Arc::new(Identity { id, hmac_key: key, mac, scopes, max_priority: a.max_priority }));
    }
    Ok(identities)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spindle_proto::pb::command::security::acl::Scope as ScopeProto;

    fn acl(id: i64, scopes: Vec<ScopeProto>) -> Acl {
        Acl { identity: Some(id), key: Some(Bytes::from_static(b"k")), hmac_algorithm: Some(1), scope: scopes, max_priority: None }
    }

    fn scope(offset: i64, value: &str, perms: &[acl::Permission], tls: bool) -> ScopeProto {
        ScopeProto {
            offset: Some(offset),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            permission: perms.iter().map(|p| *p as i32).collect(),
            tls_required: Some(tls),
        }
    }

    #[test]
    fn scopes_match_at_their_offset_and_respect_tls() {
        use acl::Permission as P;
        let s = Security::default().with_acl(vec![acl(2, vec![scope(3, "ab", &[P::Read], false), scope(0, "", &[P::Write], true)])], 10).unwrap();
        let id = s.identity(2).unwrap();
        assert!(id.allows(Permission::Read, Some(b"xyzab"), false));
        assert!(id.allows(Permission::Read, Some(b"xyzabc"), false));
        assert!(!id.allows(Permission::Read, Some(b"abxyz"), false));
        assert!(!id.allows(Permission::Read, Some(b"xyza"), false), "a key shorter than offset + value does not match");
        assert!(!id.allows(Permission::Write, Some(b"any"), false), "TLS-only scope over plain TCP");
        assert!(id.allows(Permission::Write, Some(b"any"), true));
        assert!(!id.allows(Permission::Getlog, None, true));
        assert!(s.identity(1).is_none(), "the factory identity is replaced, not merged");
    }

    #[test]
    fn bad_acls_are_refused_with_the_right_status() {
        use acl::Permission as P;
        let ok = || acl(2, vec![scope(0, "", &[P::Read], false)]);
        let d = Security::default();
        assert_eq!(d.with_acl(vec![ok(), ok()], 10).unwrap_err().status, StatusCode::InvalidRequest);
        let mut empty_key = ok();
        empty_key.key = Some(Bytes::new());
        assert_eq!(d.with_acl(vec![empty_key], 10).unwrap_err().status, StatusCode::InvalidRequest);
        let mut algo = ok();
        algo.hmac_algorithm = Some(-1);
        assert_eq!(d.with_acl(vec![algo], 10).unwrap_err().status, StatusCode::NoSuchHmacAlgorithm);
        assert_eq!(d.with_acl(vec![acl(2, vec![scope(0, "", &[], false)])], 10).unwrap_err().status, StatusCode::InvalidRequest);
        assert_eq!(d.with_acl(vec![acl(2, vec![scope(-1, "", &[P::Read], false)])], 10).unwrap_err().status, StatusCode::InvalidRequest);
        let many: Vec<_> = (0..3).map(|i| acl(i, vec![scope(0, "", &[P::Read], false)])).collect();
        assert_eq!(d.with_acl(many, 2).unwrap_err().status, StatusCode::InvalidRequest);
        assert_eq!(d.with_acl(vec![], 2).unwrap_err().status, StatusCode::InvalidRequest);
    }

    /// Merging (the simulator's way) keeps the identities a message does not name, the
    /// factory one included, replaces the entries of those it names, and still counts the
    /// merged list against maxIdentityCount.
    #[test]
    fn a_merge_keeps_unnamed_identities_and_replaces_named_ones() {
        use acl::Permission as P;
        let s = Security::default().with_merged_acl(vec![acl(2, vec![scope(0, "", &[P::Read], false)])], 10).unwrap();
        let factory = s.identity(DEFAULT_IDENTITY).expect("the factory identity survives a merge");
        assert_eq!(factory.hmac_key, Bytes::from_static(DEFAULT_HMAC_KEY));
        assert!(Permission::ALL.iter().all(|p| factory.allows(*p, Some(b"any"), false)));
        assert!(s.identity(2).unwrap().allows(Permission::Read, Some(b"x"), false));

        let mut rekeyed = acl(2, vec![scope(0, "w/", &[P::Write], false)]);
        rekeyed.key = Some(Bytes::from_static(b"new"));
        let s = s.with_merged_acl(vec![rekeyed], 10).unwrap();
        let two = s.identity(2).unwrap();
        assert_eq!(two.hmac_key, Bytes::from_static(b"new"));
        assert!(!two.allows(Permission::Read, Some(b"x"), false), "the old entry's scopes are gone");
        assert!(two.allows(Permission::Write, Some(b"w/1"), false));
        assert_eq!(s.acl.len(), 2);

        assert_eq!(s.with_merged_acl(vec![acl(3, vec![scope(0, "", &[P::Read], false)])], 2).unwrap_err().status, StatusCode::InvalidRequest);
        let dup = || acl(3, vec![scope(0, "", &[P::Read], false)]);
        assert_eq!(s.with_merged_acl(vec![dup(), dup()], 10).unwrap_err().status, StatusCode::InvalidRequest);
    }
}

/// Who is asking, and over which transport.
#[derive(Debug, Clone)]
pub struct Caller {
    pub identity: Arc<Identity>,
    pub tls: bool,
}

impl Caller {
    pub fn may(&self, permission: Permission, key: Option<&[u8]>) -> bool {
        self.identity.allows(permission, key, self.tls)
    }

    /// The scopes that grant this caller `permission` (over its transport).
    pub fn scopes_for(&self, permission: Permission) -> Vec<&Scope> {
        self.identity.granting(permission, self.tls).collect()
    }

    /// The NOT_AUTHORIZED answer for a refused permission.
    pub fn refusal(&self, permission: Permission) -> crate::reply::Reply {
        crate::reply::Reply::error(
            StatusCode::NotAuthorized,
            // "permission denied" is the reference drive's wording; clients may look for it.
            format!("permission denied: identity {} lacks {} for this request", self.identity.id, permission.name()),
        )
    }
}
