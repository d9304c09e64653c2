//! Answers before they are addressed, signed and framed: the reply a command builds, the
//! status it carries, and the mapping of engine errors to Kinetic statuses. The ground floor
//! of the drive: every command and the connection build answers here, and it imports nothing
//! of the drive.

use bytes::Bytes;
use spindle_engine::Error as EngineError;
use spindle_proto::pb::command::{self, Body};
use spindle_proto::StatusCode;

/// A response before it is addressed, signed and framed.
pub struct Reply {
    pub status: StatusCode,
    pub message: String,
    /// Boxed: a Body is large, and replies move around by value.
    pub body: Option<Box<Body>>,
    pub value: Bytes,
}

impl Reply {
    pub fn ok(body: Option<Body>) -> Self {
        Reply { status: StatusCode::Success, message: String::new(), body: body.map(Box::new), value: Bytes::new() }
    }

    pub fn error(status: StatusCode, message: impl Into<String>) -> Self {
        Reply { status, message: message.into(), body: None, value: Bytes::new() }
    }

    /// The status part alone (for statuses nested inside other messages).
    pub fn into_status(self) -> Option<command::Status> {
        Some(status(self.status, self.message))
    }
}

/// A read's answer, or [`NeedsDisk`] when it was refused under `CachedReadsOnly`.
pub type ReadResult = Result<Reply, NeedsDisk>;

/// A read run under [`spindle_engine::CachedReadsOnly`] needed the disk: nothing was answered;
/// the connection runs it again where blocking is allowed.
#[derive(Debug)]
pub struct NeedsDisk;

/// A read's engine error: the disk it needs ([`NeedsDisk`]), or the error's answer.
pub fn read_error(e: EngineError) -> ReadResult {
    match e {
        EngineError::WouldBlock => Err(NeedsDisk),
        e => Ok(engine_error(e)),
    }
}

pub fn invalid(message: impl Into<String>) -> Reply {
    Reply::error(StatusCode::InvalidRequest, message)
}

pub fn engine_error(e: EngineError) -> Reply {
    match e {
        EngineError::NotFound => Reply::error(StatusCode::NotFound, "key not found"),
        EngineError::VersionMismatch => Reply::error(StatusCode::VersionMismatch, "stored version differs from dbVersion"),
        EngineError::NoSpace => Reply::error(StatusCode::NoSpace, "the drive is full"),
        EngineError::Corrupt { detail, .. } => Reply::error(StatusCode::PermDataError, detail),
        e @ (EngineError::Io(_) | EngineError::Storage(_) | EngineError::Stopped(_) | EngineError::Internal(_)) => {
            Reply::error(StatusCode::InternalError, e.to_string())
        }
        EngineError::Invalid(m) => Reply::error(StatusCode::InvalidRequest, m),
        EngineError::Unavailable(m) => Reply::error(StatusCode::ServiceBusy, m),
        // Reads under CachedReadsOnly are retried where they may block; never a client's answer
        // unless that retry is skipped.
        EngineError::WouldBlock => Reply::error(StatusCode::ServiceBusy, "the read needs the disk; retry"),
        e @ EngineError::BatchFailed { .. } => Reply::error(StatusCode::InvalidBatch, e.to_string()),
    }
}


/// A status as the protocol carries it (no message when there is none to say).
pub fn status(code: StatusCode, message: String) -> command::Status {
    command::Status { code: Some(code as i32), status_message: (!message.is_empty()).then_some(message), ..command::Status::default() }
}

/// The `batch` body of an END_BATCH answer.
pub fn batch_body(sequences: Vec<i64>, failed_sequence: Option<i64>) -> Body {
    Body {
        batch: Some(command::Batch { count: Some(sequences.len() as i32), sequence: sequences, failed_sequence }),
        ..Body::default()
    }
}
