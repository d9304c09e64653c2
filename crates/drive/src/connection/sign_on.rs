//! The drive's first message on a connection: the sign-on a client waits for before its
//! first request, or the refusal of a connection the drive has no room for.

use bytes::{Bytes, BytesMut};
use spindle_proto::pb::command::{Body, GetLog, Header};
use spindle_proto::pb::Command;
use spindle_proto::StatusCode;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::answers::{Auth, Outgoing};
use super::writer::encode_outgoing;
use crate::cmd;
use crate::reply;
use crate::state::DriveState;

/// The unsolicited status a client waits for before its first request.
pub(super) fn sign_on(state: &DriveState, connection_id: i64) -> Command {
    Command {
        header: Some(Header {
            connection_id: Some(connection_id),
            cluster_version: Some(state.cluster_version()),
            ..Header::default()
        }),
        body: Some(Body {
            get_log: Some(Box::new(GetLog {
                configuration: Some(cmd::get_log::configuration(state)),
                limits: Some(state.config.limits.to_proto()),
                ..GetLog::default()
            })),
            ..Body::default()
        }),
        status: Some(reply::status(StatusCode::Success, String::new())),
    }
}

/// Sent to a connection refused because the drive already has maxConnections.
pub async fn refuse<S: AsyncWrite + Unpin>(mut stream: S, state: &DriveState, reason: &str) {
    let mut command = sign_on(state, state.new_connection_id());
    command.body = None;
    command.status = Some(reply::status(StatusCode::ConnectionTerminated, reason.into()));
    let mut buf = BytesMut::new();
    encode_outgoing(&Outgoing { auth: Auth::Unsolicited, command, value: Bytes::new(), _permit: None, charged: 0, received: None }, &mut Vec::new(), &mut buf);
    let _ = stream.write_all(&buf).await;
    let _ = stream.shutdown().await;
}
