use spindle_proto::StatusCode;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The drive answered with a status other than SUCCESS.
    #[error("drive answered {}: {message}", code.as_str_name())]
    Status { code: StatusCode, message: String },
    #[error("connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("protocol violation by the drive: {0}")]
    Protocol(String),
    #[error("response HMAC does not verify with our key")]
    BadResponseHmac,
    #[error("the drive closed the connection: {0}")]
    Terminated(String),
    #[error("no response within {0:?}")]
    Timeout(std::time::Duration),
    /// END_BATCH did not commit; nothing of the batch was applied.
    #[error("batch not committed ({}): {message}", code.as_str_name())]
    BatchFailed {
        code: StatusCode,
        message: String,
        /// Position (in the order they were added) of the operation that failed, if one did.
        failed_index: Option<usize>,
    },
}

impl ClientError {
    /// The Kinetic status, when the drive sent one.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Status { code, .. } | ClientError::BatchFailed { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(StatusCode::NotFound)
    }

    pub fn is_version_mismatch(&self) -> bool {
        self.status() == Some(StatusCode::VersionMismatch)
    }

    /// The drive refused a write for want of space (NO_SPACE).
    pub fn is_no_space(&self) -> bool {
        self.status() == Some(StatusCode::NoSpace)
    }
}
