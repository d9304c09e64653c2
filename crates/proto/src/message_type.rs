use crate::MessageType;

/// The response type for a request type: the protocol numbers each response one below its
/// request (PUT 4 -> PUT_RESPONSE 3). `None` for types that are themselves responses or unknown.
pub fn response_type(request: i32) -> Option<MessageType> {
    if request <= 0 || request % 2 != 0 {
        return None;
    }
    MessageType::try_from(request).ok()?;
    MessageType::try_from(request - 1).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_has_its_response() {
        assert_eq!(response_type(MessageType::Put as i32), Some(MessageType::PutResponse));
        assert_eq!(response_type(MessageType::SetPowerLevel as i32), Some(MessageType::SetPowerLevelResponse));
        assert_eq!(response_type(MessageType::GetResponse as i32), None);
        assert_eq!(response_type(14), None);
        assert_eq!(response_type(-1), None);
        assert_eq!(response_type(1000), None);
    }
}
