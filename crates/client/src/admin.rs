//! Administration: ACLs, PINs, PIN operations, cluster version, power levels. The drive
//! accepts SECURITY and PIN operations only over TLS (connect with `ClientConfig::tls_trust`).

use bytes::Bytes;
use spindle_proto::pb::command::pin_operation::PinOpType;
use spindle_proto::pb::command::security::acl::{Permission, Scope as ScopeProto};
use spindle_proto::pb::command::security::{Acl, SecurityOpType};
use spindle_proto::pb::command::setup::SetupOpType;
use spindle_proto::pb::command::{Body, PinOperation, PowerLevel, PowerManagement, Security, Setup};
use spindle_proto::MessageType;

use crate::{Client, ClientError};

/// One identity of an ACL.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct AclEntry {
    pub identity: i64,
    /// The HMAC key (UTF-8, as the reference clients use keys).
    pub key: String,
    pub scopes: Vec<AclScope>,
    /// Highest request priority allowed (1..=9), if limited.
    #[serde(default)]
    pub max_priority: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct AclScope {
    #[serde(default)]
    pub offset: i64,
    /// Bytes the key must hold at `offset` (UTF-8); empty: every key.
    #[serde(default)]
    pub value: String,
    /// Permission names: READ, WRITE, DELETE, RANGE, SETUP, P2POP, GETLOG, SECURITY,
    /// POWER_MANAGEMENT.
    pub permissions: Vec<String>,
    #[serde(default)]
    pub tls_required: bool,
}

impl AclEntry {
    /// The protocol message; unknown permission names are an error.
    pub fn to_proto(&self) -> Result<Acl, String> {
        let mut scopes = Vec::new();
        for s in &self.scopes {
            let mut permission = Vec::new();
            for p in &s.permissions {
                permission.push(Permission::from_str_name(&p.to_uppercase()).ok_or_else(|| format!("unknown permission {p:?}"))? as i32);
            }
            scopes.push(ScopeProto { offset: Some(s.offset), value: Some(Bytes::from(s.value.clone())), permission, tls_required: Some(s.tls_required) });
        }
        Ok(Acl {
            identity: Some(self.identity),
            key: Some(Bytes::from(self.key.clone())),
            hmac_algorithm: Some(1),
            scope: scopes,
            max_priority: self.max_priority,
        })
    }
}

impl Client {
    /// Replaces the drive's whole ACL.
    pub async fn set_acl(&self, acl: Vec<Acl>) -> Result<(), ClientError> {
        let security = Security { acl, security_op_type: Some(SecurityOpType::AclSecurityop as i32), ..Security::default() };
        self.call(MessageType::Security, Body { security: Some(Box::new(security)), ..Body::default() }, Bytes::new()).await.map(drop)
    }

    /// Sets the lock PIN (`old` must match the current one, if any; empty `new` clears it).
    pub async fn set_lock_pin(&self, old: &[u8], new: &[u8]) -> Result<(), ClientError> {
        let security = Security {
            old_lock_pin: Some(Bytes::copy_from_slice(old)),
            new_lock_pin: Some(Bytes::copy_from_slice(new)),
            security_op_type: Some(SecurityOpType::LockPinSecurityop as i32),
            ..Security::default()
        };
        self.call(MessageType::Security, Body { security: Some(Box::new(security)), ..Body::default() }, Bytes::new()).await.map(drop)
    }

    /// Sets the erase PIN (`old` must match the current one, if any).
    pub async fn set_erase_pin(&self, old: &[u8], new: &[u8]) -> Result<(), ClientError> {
        let security = Security {
            old_erase_pin: Some(Bytes::copy_from_slice(old)),
            new_erase_pin: Some(Bytes::copy_from_slice(new)),
            security_op_type: Some(SecurityOpType::ErasePinSecurityop as i32),
            ..Security::default()
        };
        self.call(MessageType::Security, Body { security: Some(Box::new(security)), ..Body::default() }, Bytes::new()).await.map(drop)
    }

    /// LOCK, UNLOCK, ERASE or SECURE_ERASE with a PIN.
    pub async fn pin_operation(&self, op: PinOpType, pin: &[u8]) -> Result<(), ClientError> {
        let body = Body { pin_op: Some(PinOperation { pin_op_type: Some(op as i32) }), ..Body::default() };
        self.pin_request(pin, body).await?.into_result().map(drop)
    }

    /// Sets the drive's cluster version (this client must send the current one).
    pub async fn set_cluster_version(&self, version: i64) -> Result<(), ClientError> {
        let setup = Setup { new_cluster_version: Some(version), setup_op_type: Some(SetupOpType::ClusterVersionSetupop as i32), ..Setup::default() };
        self.call(MessageType::Setup, Body { setup: Some(Box::new(setup)), ..Body::default() }, Bytes::new()).await.map(drop)
    }

    pub async fn set_power_level(&self, level: PowerLevel) -> Result<(), ClientError> {
        let body = Body { power: Some(PowerManagement { level: Some(level as i32) }), ..Body::default() };
        self.call(MessageType::SetPowerLevel, body, Bytes::new()).await.map(drop)
    }
}
