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
}

impl ClientError {
    /// The Kinetic status, when the drive sent one.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(StatusCode::NotFound)
    }

    pub fn is_version_mismatch(&self) -> bool {
        self.status() == Some(StatusCode::VersionMismatch)
    }
}
