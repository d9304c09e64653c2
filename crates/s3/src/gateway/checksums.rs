//! What a client declares about a body it sends (Content-MD5, `x-amz-checksum-*`), checked
//! against what the gateway received.

use s3s::dto::*;
use s3s::{s3_error, S3Result};

use crate::records::ObjectChecksum;

/// The checksums a client asked the gateway to verify (`x-amz-checksum-*`, `x-amz-sdk-checksum-algorithm`).
#[derive(Default)]
pub(super) struct Checksums {
    crc32: Option<String>,
    crc32c: Option<String>,
    sha1: Option<String>,
    sha256: Option<String>,
    crc64nvme: Option<String>,
    algorithm: Option<ChecksumAlgorithm>,
}

impl Checksums {
    pub(super) fn of_put(i: &PutObjectInput) -> Checksums {
        Checksums {
            crc32: i.checksum_crc32.clone(),
            crc32c: i.checksum_crc32c.clone(),
            sha1: i.checksum_sha1.clone(),
            sha256: i.checksum_sha256.clone(),
            crc64nvme: i.checksum_crc64nvme.clone(),
            algorithm: i.checksum_algorithm.clone(),
        }
    }

    pub(super) fn of_part(i: &UploadPartInput) -> Checksums {
        Checksums {
            crc32: i.checksum_crc32.clone(),
            crc32c: i.checksum_crc32c.clone(),
            sha1: i.checksum_sha1.clone(),
            sha256: i.checksum_sha256.clone(),
            crc64nvme: i.checksum_crc64nvme.clone(),
            algorithm: i.checksum_algorithm.clone(),
        }
    }

    pub(super) fn hasher(&self) -> s3s::checksum::ChecksumHasher {
        let mut h = s3s::checksum::ChecksumHasher::default();
        let alg = self.algorithm.as_ref().map(|a| a.as_str().to_owned()).unwrap_or_default();
        if self.crc32.is_some() || alg == ChecksumAlgorithm::CRC32 {
            h.crc32 = Some(Default::default());
        }
        if self.crc32c.is_some() || alg == ChecksumAlgorithm::CRC32C {
            h.crc32c = Some(Default::default());
        }
        if self.sha1.is_some() || alg == ChecksumAlgorithm::SHA1 {
            h.sha1 = Some(Default::default());
        }
        if self.sha256.is_some() || alg == ChecksumAlgorithm::SHA256 {
            h.sha256 = Some(Default::default());
        }
        if self.crc64nvme.is_some() || alg == ChecksumAlgorithm::CRC64NVME {
            h.crc64nvme = Some(Default::default());
        }
        h
    }
}

/// Checks what the client declared about the body it sent: its Content-MD5 and any
/// `x-amz-checksum-*` (in headers or in the trailer of an aws-chunked body).
pub(super) fn verify(w: &crate::objects::Written, content_md5: Option<&str>, mut wanted: Checksums, trailers: Option<s3s::TrailingHeaders>) -> S3Result<()> {
    if let Some(md5) = content_md5 {
        let declared = base64_md5(md5).ok_or_else(|| s3_error!(InvalidDigest, "Content-MD5 is not a base64 MD5"))?;
        if declared != w.md5 {
            return Err(s3_error!(BadDigest, "the Content-MD5 you specified did not match what was received"));
        }
    }
    if let Some(t) = trailers.and_then(|t| t.take()) {
        let get = |name: &str| t.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        wanted.crc32 = get("x-amz-checksum-crc32").or(wanted.crc32);
        wanted.crc32c = get("x-amz-checksum-crc32c").or(wanted.crc32c);
        wanted.sha1 = get("x-amz-checksum-sha1").or(wanted.sha1);
        wanted.sha256 = get("x-amz-checksum-sha256").or(wanted.sha256);
        wanted.crc64nvme = get("x-amz-checksum-crc64nvme").or(wanted.crc64nvme);
    }
    let c = &w.checksum;
    let pairs = [
        ("CRC32", &wanted.crc32, &c.checksum_crc32),
        ("CRC32C", &wanted.crc32c, &c.checksum_crc32c),
        ("SHA1", &wanted.sha1, &c.checksum_sha1),
        ("SHA256", &wanted.sha256, &c.checksum_sha256),
        ("CRC64NVME", &wanted.crc64nvme, &c.checksum_crc64nvme),
    ];
    for (name, declared, computed) in pairs {
        if let Some(d) = declared {
            if Some(d) != computed.as_ref() {
                return Err(s3_error!(BadDigest, "the {name} checksum you specified did not match what was received"));
            }
        }
    }
    Ok(())
}

/// What an object keeps of the checksums its write computed (none when it computed none).
pub(super) fn kept(c: &Checksum) -> Option<ObjectChecksum> {
    let k = ObjectChecksum {
        crc32: c.checksum_crc32.clone(),
        crc32c: c.checksum_crc32c.clone(),
        sha1: c.checksum_sha1.clone(),
        sha256: c.checksum_sha256.clone(),
        crc64nvme: c.checksum_crc64nvme.clone(),
    };
    (k != ObjectChecksum::default()).then_some(k)
}

/// An object's kept checksums as S3 answers them: of the whole object.
pub(super) fn answered(k: &ObjectChecksum) -> Checksum {
    Checksum {
        checksum_crc32: k.crc32.clone(),
        checksum_crc32c: k.crc32c.clone(),
        checksum_sha1: k.sha1.clone(),
        checksum_sha256: k.sha256.clone(),
        checksum_crc64nvme: k.crc64nvme.clone(),
        checksum_type: Some(ChecksumType::from_static(ChecksumType::FULL_OBJECT)),
    }
}

/// The checksums a GET or HEAD answers: the whole object's, when it asks for them
/// (`x-amz-checksum-mode: ENABLED`) and is sent the whole object; none otherwise.
pub(super) fn of_read(kept: Option<&ObjectChecksum>, mode: Option<&ChecksumMode>, whole: bool) -> Checksum {
    let asked = mode.is_some_and(|m| m.as_str() == ChecksumMode::ENABLED);
    kept.filter(|_| asked && whole).map(answered).unwrap_or_default()
}

/// A Content-MD5 header's 16 bytes.
pub(super) fn base64_md5(s: &str) -> Option<[u8; 16]> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s.trim()).ok()?.try_into().ok()
}
