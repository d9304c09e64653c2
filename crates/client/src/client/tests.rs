//! The connection's own tests, against fake drives on loopback.

use super::*;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// A drive that signs on, then reads requests and answers those `answers` picks (their
/// frames, HMAC-signed with the default key), never the others. The receiver hears when the
/// client's side of the connection is gone.
async fn drive_answering(answers: fn(&Command) -> bool) -> (std::net::SocketAddr, oneshot::Receiver<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (ended, ends) = oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let command = Command {
            header: Some(Header { connection_id: Some(7), ..Header::default() }),
            status: Some(spindle_proto::pb::command::Status { code: Some(StatusCode::Success as i32), ..Default::default() }),
            body: None,
        };
        let message = Message { auth_type: Some(AuthType::Unsolicitedstatus as i32), command_bytes: Some(Bytes::from(command.encode_to_vec())), ..Message::default() };
        let mut out = BytesMut::new();
        spindle_proto::encode_frame(&message, &[], &mut out);
        stream.write_all(&out).await.unwrap();
        let mac = HmacKey::new(&ClientConfig::default().hmac_key);
        let mut decoder = FrameDecoder::new(1 << 20, 1 << 20);
        let mut buf = BytesMut::new();
        while stream.read_buf(&mut buf).await.is_ok_and(|n| n > 0) {
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                let request = Command::decode(frame.message.command_bytes.clone().unwrap_or_default()).unwrap();
                if !answers(&request) {
                    continue;
                }
                let header = request.header.unwrap_or_default();
                let answer = Command {
                    header: Some(Header { ack_sequence: header.sequence, message_type: header.message_type.and_then(response_type).map(|t| t as i32), ..Header::default() }),
                    status: Some(spindle_proto::pb::command::Status { code: Some(StatusCode::Success as i32), ..Default::default() }),
                    body: None,
                };
                let bytes = answer.encode_to_vec();
                let hmac = spindle_proto::pb::message::HmaCauth { identity: Some(1), hmac: Some(Bytes::copy_from_slice(&mac.sign(&bytes))) };
                let message = Message { auth_type: Some(AuthType::Hmacauth as i32), hmac_auth: Some(hmac), command_bytes: Some(Bytes::from(bytes)), ..Message::default() };
                let mut out = BytesMut::new();
                spindle_proto::encode_frame(&message, &[], &mut out);
                stream.write_all(&out).await.unwrap();
            }
        }
        let _ = ended.send(());
    });
    (addr, ends)
}

fn is_noop(c: &Command) -> bool {
    c.header.as_ref().and_then(|h| h.message_type) == Some(MessageType::Noop as i32)
}

#[tokio::test]
async fn a_connection_silent_for_a_whole_timeout_is_given_up_and_its_requests_fail() {
    let config = ClientConfig { timeout: Duration::from_millis(100), ..ClientConfig::default() };
    let (addr, connection_ends) = drive_answering(|_| false).await;
    let client = Client::connect(addr, config).await.unwrap();
    let waiting = client.clone();
    let second = tokio::spawn(async move { waiting.get(b"k").await });
    assert!(matches!(client.noop().await, Err(ClientError::Timeout(_))));
    assert!(client.is_closed(), "nothing came back for a whole timeout");
    // The request sent beside it fails as the connection is given up, or times out with it.
    assert!(matches!(second.await.unwrap(), Err(ClientError::Terminated(_) | ClientError::Timeout(_))));
    assert!(matches!(client.noop().await, Err(ClientError::Terminated(_))), "later requests fail at once");
    assert!(client.shared.pending.lock().waiters.is_empty(), "every waiter was taken back");
    // Its reader and writer are stopped: the socket closes though the handle lives on.
    tokio::time::timeout(Duration::from_secs(30), connection_ends).await.expect("the given-up connection closed").unwrap();
    drop(client);
}

#[tokio::test]
async fn a_connection_that_answers_others_is_kept_and_dropped_requests_leave_no_waiter() {
    // Long enough that the answers below come well within it on any machine.
    let config = ClientConfig { timeout: Duration::from_secs(2), ..ClientConfig::default() };
    let (addr, _) = drive_answering(is_noop).await;
    let client = Client::connect(addr, config).await.unwrap();
    for _ in 0..3 {
        // The caller gives up before the request's own timeout.
        assert!(tokio::time::timeout(Duration::from_millis(10), client.get(b"k")).await.is_err());
    }
    assert!(!client.is_closed(), "callers giving up say nothing of the connection");
    // A request that times out while the drive answers another sent after it.
    let waiting = client.clone();
    let unanswered = tokio::spawn(async move { waiting.get(b"k").await });
    while client.shared.pending.lock().waiters.is_empty() {
        tokio::task::yield_now().await;
    }
    client.noop().await.unwrap();
    assert!(matches!(unanswered.await.unwrap(), Err(ClientError::Timeout(_))));
    assert!(!client.is_closed(), "the drive answered while the request waited");
    client.noop().await.unwrap();
    assert!(client.shared.pending.lock().waiters.is_empty(), "every waiter was taken back");
}
