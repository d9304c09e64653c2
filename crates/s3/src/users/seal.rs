//! The users key: 32 random bytes shared by the gateways (a file, like the cluster's
//! credentials) that seals every user's secret key in the store with AES-256-GCM, so that the
//! store, its drives and their disks hold no secret in the clear. Each sealed secret is bound
//! to its access key (the AEAD's associated data): a sealed secret moved to another key does
//! not open.

use std::path::Path;

use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

use super::UserError;

/// Bytes of the users key.
pub const USERS_KEY_BYTES: usize = 32;

pub struct UsersKey {
    key: LessSafeKey,
}

impl UsersKey {
    /// A fresh key and its file text (hex, one line).
    pub fn generate() -> Result<(UsersKey, String), UserError> {
        let mut bytes = [0u8; USERS_KEY_BYTES];
        SystemRandom::new().fill(&mut bytes).map_err(|_| UserError::Seal("no randomness"))?;
        let text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok((UsersKey::from_bytes(&bytes)?, format!("{text}\n")))
    }

    /// Creates the key file (mode 0600); an existing file is never overwritten, since every
    /// secret sealed with the key in it would be lost.
    pub fn create_file(path: &Path) -> Result<UsersKey, UserError> {
        let (key, text) = UsersKey::generate()?;
        spindle_cluster::write_new_secret_file(path, text.as_bytes()).map_err(|e| UserError::KeyFile(format!("{}: {e}", path.display())))?;
        Ok(key)
    }

    pub fn load(path: &Path) -> Result<UsersKey, UserError> {
        let text = std::fs::read_to_string(path).map_err(|e| UserError::KeyFile(format!("{}: {e}", path.display())))?;
        UsersKey::parse(&text).map_err(|e| UserError::KeyFile(format!("{}: {e}", path.display())))
    }

    pub fn parse(text: &str) -> Result<UsersKey, String> {
        let hex = text.trim();
        if hex.len() != 2 * USERS_KEY_BYTES {
            return Err(format!("expected {} hex digits, found {}", 2 * USERS_KEY_BYTES, hex.len()));
        }
        let mut bytes = [0u8; USERS_KEY_BYTES];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = hex.get(2 * i..2 * i + 2).and_then(|d| u8::from_str_radix(d, 16).ok()).ok_or("not hex")?;
        }
        UsersKey::from_bytes(&bytes).map_err(|e| e.to_string())
    }

    fn from_bytes(bytes: &[u8; USERS_KEY_BYTES]) -> Result<UsersKey, UserError> {
        let unbound = UnboundKey::new(&AES_256_GCM, bytes).map_err(|_| UserError::Seal("bad key length"))?;
        Ok(UsersKey { key: LessSafeKey::new(unbound) })
    }

    /// `secret` sealed for `access_key`: base64 of nonce, ciphertext and tag.
    pub fn seal(&self, access_key: &str, secret: &str) -> Result<String, UserError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).map_err(|_| UserError::Seal("no randomness"))?;
        let mut data = secret.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(access_key.as_bytes()), &mut data)
            .map_err(|_| UserError::Seal("sealing failed"))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(base64::engine::general_purpose::STANDARD.encode(out))
    }

    /// The secret sealed for `access_key`, or an error when another key sealed it, it was
    /// sealed for another access key, or it was altered.
    pub fn open(&self, access_key: &str, sealed: &str) -> Result<String, UserError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(sealed).map_err(|_| UserError::Seal("a sealed secret is not base64"))?;
        if bytes.len() < NONCE_LEN {
            return Err(UserError::Seal("a sealed secret is too short"));
        }
        let (nonce, rest) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| UserError::Seal("bad nonce"))?;
        let mut data = rest.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(access_key.as_bytes()), &mut data)
            .map_err(|_| UserError::Seal("a sealed secret does not open with this users key"))?;
        String::from_utf8(plain.to_vec()).map_err(|_| UserError::Seal("a sealed secret is not text"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_with_its_key_and_its_access_key() {
        let (key, text) = UsersKey::generate().unwrap();
        let again = UsersKey::parse(&text).unwrap();
        let (other, _) = UsersKey::generate().unwrap();
        let sealed = key.seal("AK1", "s3cret").unwrap();
        assert!(!sealed.contains("s3cret"));
        assert_eq!(again.open("AK1", &sealed).unwrap(), "s3cret");
        assert!(key.open("AK2", &sealed).is_err(), "bound to its access key");
        assert!(other.open("AK1", &sealed).is_err(), "another users key");
        let mut altered = base64::engine::general_purpose::STANDARD.decode(&sealed).unwrap();
        *altered.last_mut().unwrap() ^= 1;
        assert!(key.open("AK1", &base64::engine::general_purpose::STANDARD.encode(altered)).is_err());
        assert!(key.open("AK1", "%%").is_err());
        assert!(UsersKey::parse("abcd").is_err());
        assert!(UsersKey::parse(&"zz".repeat(32)).is_err());
    }
}
