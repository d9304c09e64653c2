//! Stored values in S3's forms: hex ETags, HTTP dates, the owner, URL-encoded names and
//! continuation tokens.

use s3s::dto::{EncodingType, Timestamp};
use s3s::{s3_error, S3Result};

use crate::records;

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// HTTP dates have whole seconds: compare modification times at that precision.
pub(super) fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(records::time_of(ms / 1000 * 1000))
}

/// Percent-encodes a name for `encoding-type=url` listings: everything but unreserved
/// characters and '/'.
pub(super) fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(super) fn encoder(encoding: Option<&EncodingType>) -> impl Fn(String) -> String {
    let url = encoding.is_some_and(|e| e.as_str() == EncodingType::URL);
    move |s| if url { url_encode(&s) } else { s }
}

/// An owner as S3 shows it: the canonical id, with the administrators' display name for
/// theirs.
pub(super) fn owner(id: &str) -> s3s::dto::Owner {
    let name = if id == records::ADMIN_ID { "spindle".to_owned() } else { id.to_owned() };
    s3s::dto::Owner { display_name: Some(name), id: Some(id.to_owned()) }
}

/// The initiator of an upload: its owner, as ListParts and ListMultipartUploads show it.
pub(super) fn initiator(id: &str) -> s3s::dto::Initiator {
    let o = owner(id);
    s3s::dto::Initiator { display_name: o.display_name, id: o.id }
}

/// Continuation tokens are opaque to clients: the resume name, hex-encoded so that any name
/// survives a query string.
pub(super) fn encode_token(name: &str) -> String {
    hex(name.as_bytes())
}

pub(super) fn decode_token(token: &str) -> S3Result<String> {
    unhex(token).and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| s3_error!(InvalidArgument, "The continuation token provided is incorrect"))
}
