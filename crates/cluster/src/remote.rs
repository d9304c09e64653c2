//! Remote pools: an external S3 bucket as the coldest tier, so an archive can leave the
//! cluster's disks. The map records where the bucket is (endpoint, bucket, key prefix,
//! region), never credentials: each gateway that writes to or sweeps a remote pool is given
//! its keys. The remote store's own redundancy keeps the data; the cluster places, rebuilds and
//! scrubs nothing there.

use serde::{Deserialize, Serialize};

use crate::error::SettingError;

/// Longest key prefix a remote pool takes (S3 keys are at most 1,024 bytes; the gateway's
/// own part of a key is under 64).
pub const MAX_REMOTE_PREFIX: usize = 512;

/// Where a remote pool keeps its objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemotePool {
    /// `http://HOST:PORT` or `https://HOST:PORT`, path-style requests.
    pub endpoint: String,
    pub bucket: String,
    /// Keys begin with this ("" or ending in '/'), so one bucket can serve several clusters.
    #[serde(default)]
    pub prefix: String,
    /// The region requests are signed for.
    pub region: String,
}

impl RemotePool {
    /// From `http(s)://HOST[:PORT]/BUCKET[/PREFIX]` and the region to sign for.
    pub fn parse(url: &str, region: &str) -> Result<RemotePool, SettingError> {
        let bad = |reason: &str| SettingError::RemotePool { url: url.to_string(), reason: reason.to_string() };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("expected http://HOST:PORT/BUCKET[/PREFIX]"))?;
        let (authority, path) = rest.split_once('/').ok_or_else(|| bad("no bucket after the host"))?;
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        let prefix = if prefix.is_empty() || prefix.ends_with('/') { prefix.to_string() } else { format!("{prefix}/") };
        let remote = RemotePool { endpoint: format!("{scheme}://{authority}"), bucket: bucket.to_string(), prefix, region: region.to_string() };
        remote.validate().map_err(|e| match e {
            SettingError::RemotePool { reason, .. } => bad(&reason),
            other => other,
        })?;
        Ok(remote)
    }

    /// The rules `parse` keeps, checked again on a pool read from a change request.
    pub fn validate(&self) -> Result<(), SettingError> {
        let bad = |reason: String| SettingError::RemotePool { url: self.describe(), reason };
        let Some((scheme, authority)) = self.endpoint.split_once("://") else { return Err(bad("the endpoint has no scheme".into())) };
        if scheme != "http" && scheme != "https" {
            return Err(bad(format!("{scheme}:// is not HTTP")));
        }
        if authority.is_empty() || authority.contains(['/', '@', '?', '#', ' ']) {
            return Err(bad(format!("{authority:?} is not HOST or HOST:PORT")));
        }
        if !bucket_name_ok(&self.bucket) {
            return Err(bad(format!("bucket {:?}: 3 to 63 lowercase letters, digits, '.' or '-', beginning and ending with a letter or digit", self.bucket)));
        }
        if self.prefix.len() > MAX_REMOTE_PREFIX || (!self.prefix.is_empty() && !self.prefix.ends_with('/')) || self.prefix.starts_with('/') || self.prefix.contains("//") {
            return Err(bad(format!("prefix {:?}: at most {MAX_REMOTE_PREFIX} bytes, ending in '/', no empty segment", self.prefix)));
        }
        if self.region.is_empty() || !self.region.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(bad(format!("region {:?}: letters, digits and '-'", self.region)));
        }
        Ok(())
    }

    /// `ENDPOINT/BUCKET/PREFIX`, as the operator wrote it.
    pub fn describe(&self) -> String {
        format!("{}/{}/{}", self.endpoint, self.bucket, self.prefix)
    }
}

/// S3's bucket naming rules (the ones any S3 server enforces).
fn bucket_name_ok(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (3..=63).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
        && edge(name.chars().next())
        && edge(name.chars().last())
        && !name.contains("..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_endpoint_bucket_and_prefix() {
        let r = RemotePool::parse("http://127.0.0.1:9000/archive/cluster-a", "us-east-1").unwrap();
        assert_eq!((r.endpoint.as_str(), r.bucket.as_str(), r.prefix.as_str()), ("http://127.0.0.1:9000", "archive", "cluster-a/"));
        assert_eq!(r.describe(), "http://127.0.0.1:9000/archive/cluster-a/");
        let r = RemotePool::parse("https://s3.example.com/archive", "eu-west-1").unwrap();
        assert_eq!((r.endpoint.as_str(), r.prefix.as_str()), ("https://s3.example.com", ""));
        assert_eq!(RemotePool::parse("http://h:1/b-1/a/b/", "r").unwrap().prefix, "a/b/");
        for bad in ["127.0.0.1:9000/archive", "ftp://h/archive", "http://h", "http://h/", "http://h/Archive", "http://h/ab", "http://u@h/archive", "http://h/archive/a//b", "http:///archive", "http://h/-archive"] {
            let e = RemotePool::parse(bad, "us-east-1").unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
        assert!(RemotePool::parse("http://h/archive", "us east").is_err());
        assert!(RemotePool::parse("http://h/archive", "").is_err());
        let long = format!("http://h/archive/{}", "p".repeat(MAX_REMOTE_PREFIX));
        assert!(RemotePool::parse(&long, "r").is_err());
    }
}
