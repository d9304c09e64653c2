//! GETLOG: the drive describing itself with real figures.

use bytes::Bytes;
use spindle_proto::pb::command::get_log::{self, Type};
use spindle_proto::pb::command;
use spindle_proto::{StatusCode, PROTOCOL_VERSION};

use crate::reply::Reply;
use crate::security::{Caller, Permission};
use crate::state::DriveState;

/// Vendor-specific device logs served under GETLOG DEVICE.
pub const DEVICE_LOG_ENGINE: &str = "com.spindle:engine";
/// The ACL in force, HMAC keys left out; needs the SECURITY permission as well as GETLOG.
pub const DEVICE_LOG_ACL: &str = "com.spindle:acl";

/// Name reported when the machine exposes no temperature sensor.
pub const NO_TEMPERATURE_SENSOR: &str = "none: this machine exposes no temperature sensor";

/// GETLOG: the requested log types, within the limits the drive advertises.
pub fn run(state: &DriveState, caller: &Caller, requested: &command::GetLog) -> Reply {
    let mut out = command::GetLog::default();
    let (status, message, value) = fill(state, caller, requested, &mut out);
    let body = command::Body { get_log: Some(Box::new(out)), ..command::Body::default() };
    within_limits(state, Reply { status, message, body: Some(Box::new(body)), value })
}

/// The configuration block (also part of the sign-on message).
pub fn configuration(state: &DriveState) -> get_log::Configuration {
    let listen = state.config.listen;
    let (v4, v6) = match listen {
        std::net::IpAddr::V4(a) => (Some(Bytes::copy_from_slice(&a.octets())), None),
        std::net::IpAddr::V6(a) => (None, Some(Bytes::copy_from_slice(&a.octets()))),
    };
    get_log::Configuration {
        vendor: Some("Spindle".into()),
        model: Some("spindle-drive".into()),
        serial_number: Some(state.serial_number.clone()),
        world_wide_name: Some(state.world_wide_name.clone()),
        version: Some(env!("CARGO_PKG_VERSION").into()),
        compilation_date: Some(env!("SPINDLE_BUILD_DATE").into()),
        source_hash: Some(env!("SPINDLE_SOURCE_HASH").into()),
        protocol_version: Some(PROTOCOL_VERSION.into()),
        protocol_compilation_date: Some(env!("SPINDLE_BUILD_DATE").into()),
        protocol_source_hash: Some(env!("SPINDLE_SOURCE_HASH").into()),
        interface: vec![get_log::configuration::Interface {
            name: Some(listen.to_string()),
            mac: None,
            ipv4_address: v4,
            ipv6_address: v6,
        }],
        port: Some(state.port as i32),
        tls_port: Some(state.tls_port as i32),
        current_power_level: Some(state.power_level()),
    }
}

/// Fills a GETLOG response for the requested types. Returns the status, its message and the
/// value section (DEVICE logs travel there).
fn fill(state: &DriveState, caller: &Caller, requested: &command::GetLog, out: &mut command::GetLog) -> (StatusCode, String, Bytes) {
    let mut message = String::new();
    let mut value = Bytes::new();
    // Each type is answered once, however often it is asked for: a request repeating one
    // type must not buy an answer many times its size.
    let mut seen = 0u32;
    out.types = Vec::new();
    for &t in &requested.types {
        let kind = Type::try_from(t);
        // Only the types answered are deduplicated: INVALID_TYPE (-1) and unknown values fall
        // through to the INVALID_REQUEST below, wherever they come in the list.
        if let Some(k) = kind.as_ref().ok().filter(|k| (0..32).contains(&(**k as i32))) {
            let bit = 1u32 << (*k as i32 as u32);
            if seen & bit != 0 {
                continue;
            }
            seen |= bit;
            out.types.push(t);
        }
        match kind {
            Ok(Type::Utilizations) => {
                out.utilizations = state
                    .sampler
                    .utilizations()
                    .into_iter()
                    .map(|u| get_log::Utilization { name: Some(u.name.into()), value: Some(u.value) })
                    .collect();
            }
            Ok(Type::Temperatures) => {
                let temps = crate::sysinfo::temperatures();
                out.temperatures = if temps.is_empty() {
                    message.push_str("no temperature sensor exposed by this machine; ");
                    // One entry with no readings at all: the reference client refuses an empty
                    // list ("temperature list is null or empty"), and NaN readings fail the
                    // checks of clients that expect readings of at least 0. Absent fields say
                    // "not measured"; a client that reads them as 0 sees a plausible figure.
                    vec![get_log::Temperature {
                        name: Some(NO_TEMPERATURE_SENSOR.into()),
                        current: None,
                        minimum: None,
                        maximum: None,
                        target: None,
                    }]
                } else {
                    temps
                        .into_iter()
                        .map(|t| get_log::Temperature {
                            name: Some(t.name),
                            current: Some(t.celsius),
                            minimum: Some(5.0),
                            maximum: Some(100.0),
                            target: Some(25.0),
                        })
                        .collect()
                };
            }
            Ok(Type::Capacities) => {
                let r = state.capacity.report(|| state.engine_disk_usage());
                out.capacity = Some(get_log::Capacity {
                    nominal_capacity_in_bytes: Some(r.nominal_bytes),
                    portion_full: Some(r.portion_full),
                });
            }
            Ok(Type::Configuration) => out.configuration = Some(configuration(state)),
            Ok(Type::Statistics) => {
                out.statistics = state
                    .stats
                    .snapshot()
                    .into_iter()
                    .map(|(t, count, bytes)| get_log::Statistics {
                        message_type: Some(t as i32),
                        count: Some(count),
                        bytes: Some(bytes),
                    })
                    .collect();
            }
            Ok(Type::Messages) => out.messages = Some(state.event_log().into()),
            Ok(Type::Limits) => out.limits = Some(state.config.limits.to_proto()),
            Ok(Type::Device) => {
                let name = requested.device.as_ref().and_then(|d| d.name.clone()).unwrap_or_default();
                if name == DEVICE_LOG_ACL.as_bytes() && !caller.may(Permission::Security, None) {
                    let refusal = caller.refusal(Permission::Security);
                    return (refusal.status, refusal.message, Bytes::new());
                }
                match device_log(state, &name) {
                    Some(log) => {
                        out.device = Some(get_log::Device { name: Some(name) });
                        value = log;
                    }
                    None => {
                        let shown = String::from_utf8_lossy(&name).into_owned();
                        return (StatusCode::NotFound, format!("no device log named {shown:?}"), Bytes::new());
                    }
                }
            }
            Ok(Type::InvalidType) | Err(_) => {
                return (StatusCode::InvalidRequest, format!("unknown GETLOG type {t}"), Bytes::new());
            }
        }
    }
    (StatusCode::Success, message.trim_end_matches("; ").to_string(), value)
}

/// Room left in an answer's message for its header, status and signature.
const ANSWER_HEADROOM: usize = 4096;

/// Refuses a GETLOG answer that would exceed the limits the drive advertises (maxMessageSize
/// for the message, maxValueSize for a DEVICE log): a client sized its buffers by them.
fn within_limits(state: &DriveState, reply: Reply) -> Reply {
    use prost::Message as _;
    let limits = &state.config.limits;
    let message_len = reply.body.as_ref().map_or(0, |b| b.encoded_len()) + reply.message.len() + ANSWER_HEADROOM;
    if message_len > limits.max_message_size as usize || reply.value.len() > limits.max_value_size as usize {
        return Reply::error(
            StatusCode::InvalidRequest,
            format!("the answer would exceed maxMessageSize ({}) or maxValueSize ({}); ask for fewer log types", limits.max_message_size, limits.max_value_size),
        );
    }
    reply
}

fn device_log(state: &DriveState, name: &[u8]) -> Option<Bytes> {
    if name == DEVICE_LOG_ACL.as_bytes() {
        return Some(Bytes::from(acl_document(state).to_string()));
    }
    if name != DEVICE_LOG_ENGINE.as_bytes() {
        return None;
    }
    let doc = serde_json::json!({
        "engine": format!("{:?}", state.config.engine).to_lowercase(),
        "data_dir": state.config.data_dir.display().to_string(),
        "disk_usage_bytes": state.engine.disk_usage(),
        "approximate_entries": state.engine.approximate_len(),
        "uptime_seconds": state.started.elapsed().as_secs_f64(),
        "open_connections": state.open_connections.load(std::sync::atomic::Ordering::Relaxed),
        "reads_on_disk": state.reads_on_disk.load(std::sync::atomic::Ordering::Relaxed),
        "open_batches": state.batch_slots.open(),
        "batched_operations": state.batch_slots.buffered_operations(),
        "value_log": state.engine.value_log().map(|log| serde_json::json!({
            "segments": log.segments,
            "disk_bytes": log.disk_bytes,
            "live_bytes": log.live_bytes,
            // Bytes on disk per live byte (1.0: no garbage); null while the log is empty.
            "space_amplification": (log.live_bytes > 0).then(|| log.disk_bytes as f64 / log.live_bytes as f64),
            "gc_bytes_copied": log.gc_bytes_copied,
            "gc_segments_deleted": log.gc_segments_deleted,
        })),
    });
    Some(Bytes::from(doc.to_string()))
}

/// The ACL as JSON, without the HMAC keys.
fn acl_document(state: &DriveState) -> serde_json::Value {
    use spindle_proto::pb::command::security::acl::Permission as P;
    let security = state.security.read();
    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
    let identities: Vec<serde_json::Value> = if security.acl.is_empty() {
        vec![serde_json::json!({"identity": spindle_proto::DEFAULT_IDENTITY, "factory": true, "scopes": [{"offset": 0, "value": "", "permissions": ["all"], "tls_required": false}]})]
    } else {
        security
            .acl
            .iter()
            .map(|a| {
                let scopes: Vec<serde_json::Value> = a
                    .scope
                    .iter()
                    .map(|s| {
                        let perms: Vec<&str> = s.permission.iter().filter_map(|p| P::try_from(*p).ok()).map(|p| p.as_str_name()).collect();
                        serde_json::json!({"offset": s.offset(), "value": text(&s.value.clone().unwrap_or_default()), "permissions": perms, "tls_required": s.tls_required()})
                    })
                    .collect();
                serde_json::json!({"identity": a.identity(), "scopes": scopes, "max_priority": a.max_priority})
            })
            .collect()
    };
    serde_json::json!({
        "identities": identities,
        "lock_pin_set": !security.lock_pin.is_empty(),
        "erase_pin_set": !security.erase_pin.is_empty(),
        "locked": state.locked.load(std::sync::atomic::Ordering::Acquire),
        "cluster_version": state.cluster_version(),
    })
}
