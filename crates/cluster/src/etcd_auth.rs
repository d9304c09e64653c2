//! A cluster's own etcd user: `root` (which etcd requires before it enforces users) and a
//! user whose one role may read and write only the cluster's prefix, then authentication
//! enabled. From then on a client without a user, or with another cluster's, is refused by
//! etcd; and over `https://` endpoints only members whose certificate chains to the given CA
//! are believed.

use etcd_client::{Client, Permission};

use crate::ClusterError;

/// How long `secure` gives etcd to take its connection.
const SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The names etcd knows a cluster's access by.
pub fn user_of(cluster: &str) -> String {
    format!("spindle-{cluster}")
}

fn already(e: &etcd_client::Error) -> bool {
    e.to_string().contains("already exists")
}

/// Makes `cluster`'s user (`password`) with its role, and `root` (`root_password`) if etcd
/// has none, then enables authentication. On an etcd that enforces users already, `root`
/// signs in with `root_password`.
pub async fn secure(endpoints: &str, ca_pem: Option<String>, cluster: &str, password: &str, root_password: &str) -> Result<(), ClusterError> {
    let list: Vec<String> = endpoints.split(',').map(|e| e.trim().to_string()).filter(|e| !e.is_empty()).collect();
    let plain = EtcdAccess { ca_pem: ca_pem.clone(), user: None };
    let mut client = Client::connect(list.clone(), Some(plain.options(SETUP_TIMEOUT))).await?;
    let enforcing = match client.user_list().await {
        Ok(_) => false,
        Err(e) if e.to_string().to_lowercase().contains("user name") || e.to_string().to_lowercase().contains("permission denied") || e.to_string().to_lowercase().contains("invalid auth token") => true,
        Err(e) => return Err(e.into()),
    };
    if enforcing {
        let root = EtcdAccess { ca_pem, user: Some(("root".into(), root_password.into())) };
        client = Client::connect(list, Some(root.options(SETUP_TIMEOUT))).await?;
    } else {
        for step in [client.user_add("root", root_password, None).await.map(drop), client.role_add("root").await.map(drop)] {
            match step {
                Err(e) if !already(&e) => return Err(e.into()),
                _ => {}
            }
        }
        client.user_grant_role("root", "root").await?;
    }
    let (user, prefix) = (user_of(cluster), format!("/spindle/{cluster}/"));
    for step in [client.role_add(user.as_str()).await.map(drop), client.user_add(user.as_str(), password, None).await.map(drop)] {
        match step {
            Err(e) if !already(&e) => return Err(e.into()),
            _ => {}
        }
    }
    client.role_grant_permission(user.as_str(), Permission::read_write(prefix).with_prefix()).await?;
    client.user_grant_role(user.as_str(), user.as_str()).await?;
    if !enforcing {
        client.auth_enable().await?;
    }
    Ok(())
}

/// How to reach a secured etcd: the CA its members' certificates chain to (for `https://`
/// endpoints) and the user to authenticate as.
#[derive(Clone, Default)]
pub struct EtcdAccess {
    pub ca_pem: Option<String>,
    pub user: Option<(String, String)>,
}

impl std::fmt::Debug for EtcdAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password is never printed.
        f.debug_struct("EtcdAccess").field("tls", &self.ca_pem.is_some()).field("user", &self.user.as_ref().map(|(u, _)| u)).finish()
    }
}

impl EtcdAccess {
    /// The client options: a member gets `connect` to take the connection.
    pub(crate) fn options(&self, connect: std::time::Duration) -> etcd_client::ConnectOptions {
        let mut options = etcd_client::ConnectOptions::new().with_connect_timeout(connect).with_timeout(std::time::Duration::from_secs(5));
        if let Some((user, password)) = &self.user {
            options = options.with_user(user.clone(), password.clone());
        }
        if let Some(ca) = &self.ca_pem {
            options = options.with_tls(etcd_client::TlsOptions::new().ca_certificate(etcd_client::Certificate::from_pem(ca.as_bytes())));
        }
        options
    }
}

