//! Connections to drives at an epoch: the drive's cluster version as its sign-on states it,
//! and fencing (SETUP of the cluster version) so that a drive refuses requests of an older map.

use spindle_client::{Client, ClientConfig};
use tracing::info;

/// The cluster version the drive announced when the connection signed on.
pub(crate) fn drive_version(c: &Client) -> i64 {
    c.sign_on().header.as_ref().and_then(|h| h.cluster_version).unwrap_or(0)
}

/// A connection at `epoch`: it adopts the drive's cluster version from the sign-on, then
/// fences the drive to `epoch` if that differs.
pub(crate) async fn fenced_client(addr: &str, epoch: i64, config: &ClientConfig) -> Option<Client> {
    let c = tokio::time::timeout(config.timeout, Client::connect(addr, config.clone())).await.ok()?.ok()?;
    c.set_request_cluster_version(drive_version(&c));
    fence(&c, epoch).await.ok()?;
    tracing::trace!(addr, conn = c.connection_id(), "connected");
    Some(c)
}

/// Sets the drive's cluster version to `epoch` (SETUP, sent at the version the connection
/// knows) unless it is there already; the connection then talks at `epoch`.
/// Never backwards: a drive already at a newer epoch was fenced by a newer leader, and this
/// one's map is stale.
pub(crate) async fn fence(c: &Client, epoch: i64) -> Result<(), spindle_client::ClientError> {
    if c.cluster_version() > epoch {
        return Err(spindle_client::ClientError::Status {
            code: spindle_client::StatusCode::VersionFailure,
            message: format!("the drive is at epoch {}, newer than {epoch}", c.cluster_version()),
        });
    }
    if c.cluster_version() != epoch {
        c.set_cluster_version(epoch).await?;
        c.set_request_cluster_version(epoch);
        info!("drive fenced to epoch {epoch}");
    }
    Ok(())
}
