//! Access keys: SigV4 signatures are checked by `s3s` with the secret key found here, the
//! administrators' (`Keys`, the gateway's own) or a user's (`users::Directory`).

use std::collections::HashMap;
use std::sync::Arc;

use s3s::auth::{S3Auth, SecretKey};
use s3s::{s3_error, S3Result};

use crate::users::Directory;

/// The administrators' keys.
#[derive(Default)]
pub struct Keys {
    secrets: HashMap<String, SecretKey>,
}

impl Keys {
    pub fn add(&mut self, access_key: &str, secret_key: &str) {
        self.secrets.insert(access_key.to_owned(), SecretKey::from(secret_key));
    }

    /// Keys from a file of `ACCESS_KEY SECRET_KEY` lines (`#` starts a comment).
    pub fn parse(text: &str) -> Result<Keys, String> {
        let mut keys = Keys::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some(a), Some(s), None) => keys.add(a, s),
                _ => return Err(format!("line {}: expected `ACCESS_KEY SECRET_KEY`", n + 1)),
            }
        }
        Ok(keys)
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn contains(&self, access_key: &str) -> bool {
        self.secrets.contains_key(access_key)
    }
}

/// Every key the gateway takes.
pub struct Auth {
    pub admins: Arc<Keys>,
    pub users: Option<Arc<Directory>>,
}

#[async_trait::async_trait]
impl S3Auth for Auth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        if let Some(secret) = self.admins.secrets.get(access_key) {
            return Ok(secret.clone());
        }
        if let Some(users) = &self.users {
            match users.lookup(access_key).await {
                Ok(Some((_, secret))) => return Ok(secret),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "users could not be read");
                    return Err(s3_error!(ServiceUnavailable, "the gateway cannot read its users right now; retry"));
                }
            }
        }
        Err(s3_error!(InvalidAccessKeyId, "The AWS Access Key Id you provided does not exist in our records."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files() {
        let keys = Keys::parse("# keys\nAK1 secret1\n\n  AK2   secret2  # second\n").unwrap();
        assert_eq!(keys.secrets.len(), 2);
        assert!(Keys::parse("only-one-word").is_err());
        assert!(Keys::parse("a b c").is_err());
    }
}
