//! HMAC-SHA1 over `commandBytes`, exactly as the reference clients compute it: the 4-byte
//! big-endian length of the command bytes, then the bytes; nothing at all for empty commands.

use hmac::{Hmac, Mac};
use sha1::Sha1;

type HmacSha1 = Hmac<Sha1>;

/// Length of an HMAC-SHA1 tag.
pub const HMAC_LEN: usize = 20;

/// The HMAC state for `key`, its pads hashed.
#[allow(clippy::expect_used, reason = "HMAC takes keys of any length (a long one is hashed first), so InvalidLength never comes")]
fn mac_for(key: &[u8]) -> HmacSha1 {
    HmacSha1::new_from_slice(key).expect("HMAC accepts keys of any length")
}

fn keyed(key: &[u8], command_bytes: &[u8]) -> HmacSha1 {
    let mut mac = mac_for(key);
    if !command_bytes.is_empty() {
        mac.update(&(command_bytes.len() as u32).to_be_bytes());
        mac.update(command_bytes);
    }
    mac
}

/// A key with its HMAC state prepared once (the inner and outer pads hashed), so signing and
/// verifying a message costs only the message's own SHA-1 blocks. Cheap to clone.
#[derive(Clone)]
pub struct HmacKey {
    keyed: HmacSha1,
}

impl std::fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HmacKey(..)")
    }
}

impl HmacKey {
    pub fn new(key: &[u8]) -> Self {
        HmacKey { keyed: mac_for(key) }
    }

    fn with(&self, command_bytes: &[u8]) -> HmacSha1 {
        let mut mac = self.keyed.clone();
        if !command_bytes.is_empty() {
            mac.update(&(command_bytes.len() as u32).to_be_bytes());
            mac.update(command_bytes);
        }
        mac
    }

    pub fn sign(&self, command_bytes: &[u8]) -> [u8; HMAC_LEN] {
        self.with(command_bytes).finalize().into_bytes().into()
    }

    /// Constant-time check of a received HMAC.
    pub fn verify(&self, command_bytes: &[u8], hmac: &[u8]) -> bool {
        self.with(command_bytes).verify_slice(hmac).is_ok()
    }
}

/// The HMAC a message carrying `command_bytes` must have under `key`.
pub fn sign(key: &[u8], command_bytes: &[u8]) -> [u8; HMAC_LEN] {
    keyed(key, command_bytes).finalize().into_bytes().into()
}

/// Constant-time check of a received HMAC.
pub fn verify(key: &[u8], command_bytes: &[u8], hmac: &[u8]) -> bool {
    keyed(key, command_bytes).verify_slice(hmac).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_an_independent_computation() {
        // Expected tags computed with Python's hmac module:
        // hmac.new(b"asdfasdf", b"\x00\x00\x00\x03abc", hashlib.sha1) and over b"".
        let tag = sign(b"asdfasdf", b"abc");
        assert_eq!(hex(&tag), "4d4e8600b55b0242c1200df8edeeace8c4f976ae");
        assert_eq!(hex(&sign(b"asdfasdf", b"")), "a77a6ada5ce67cf7aee48a79d4866bb271241815");
        assert!(verify(b"asdfasdf", b"abc", &tag));
        assert!(!verify(b"asdfasdg", b"abc", &tag));
        assert!(!verify(b"asdfasdf", b"abd", &tag));
        assert!(!verify(b"asdfasdf", b"abc", &tag[..19]));
        let prepared = HmacKey::new(b"asdfasdf");
        assert_eq!(prepared.sign(b"abc"), tag);
        assert!(prepared.verify(b"abc", &tag));
        assert!(!prepared.verify(b"abd", &tag));
        assert_eq!(prepared.sign(b""), sign(b"asdfasdf", b""));
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
