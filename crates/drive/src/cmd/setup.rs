//! SETUP: a new cluster version (stored before it takes effect); firmware downloads refused.

use std::sync::atomic::Ordering;

use spindle_proto::pb::command::setup::SetupOpType;
use spindle_proto::pb::command::Setup;

use super::save_settings;
use crate::reply::{invalid, Reply};
use crate::state::DriveState;

/// SETUP: a new cluster version (persisted), or a firmware download (refused).
pub fn run(state: &DriveState, request: Setup) -> Reply {
    let firmware = request.firmware_download.unwrap_or(false) || request.setup_op_type == Some(SetupOpType::FirmwareSetupop as i32);
    if firmware {
        return invalid("firmware downloads are not supported: a Spindle drive is upgraded by installing a new spindle binary");
    }
    let Some(version) = request.new_cluster_version else {
        return invalid("SETUP needs newClusterVersion");
    };
    let _admin = state.admin.lock();
    let mut settings = state.stored_settings();
    settings.cluster_version = Some(version);
    if let Err(r) = save_settings(state, &settings) {
        return r;
    }
    state.cluster_version.store(version, Ordering::Release);
    state.event(format!("cluster version set to {version}"));
    Reply::ok(None)
}
