//! What each S3 operation asks for: its IAM action (as policies name it) and what grants it
//! when no policy does (the bucket's ACL, the object's ACL, or the bucket owner only).

use crate::acl::Permission;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Not about one bucket: any signed-in requester (ListBuckets shows each their own).
    Service,
    /// Granted by the bucket's ACL.
    Bucket(Permission),
    /// Granted by the object's ACL (checked by the operation, which reads the object).
    Object(Permission),
    /// The bucket's configuration: its owner, or whom a policy allows.
    Owner,
}

/// (IAM action, scope) of an operation by its S3 name.
pub fn of(op: &str) -> (&'static str, Scope) {
    use Permission::*;
    use Scope::*;
    match op {
        "ListBuckets" => ("s3:ListAllMyBuckets", Service),
        "CreateBucket" => ("s3:CreateBucket", Service),
        "HeadBucket" | "ListObjects" | "ListObjectsV2" => ("s3:ListBucket", Bucket(Read)),
        "ListObjectVersions" => ("s3:ListBucketVersions", Bucket(Read)),
        "ListMultipartUploads" => ("s3:ListBucketMultipartUploads", Bucket(Read)),
        "GetBucketAcl" => ("s3:GetBucketAcl", Bucket(ReadAcp)),
        "PutBucketAcl" => ("s3:PutBucketAcl", Bucket(WriteAcp)),
        "PutObject" | "PostObject" | "CreateMultipartUpload" | "UploadPart" | "UploadPartCopy" | "CompleteMultipartUpload" | "CopyObject" => ("s3:PutObject", Bucket(Write)),
        "DeleteObject" | "DeleteObjects" => ("s3:DeleteObject", Bucket(Write)),
        "AbortMultipartUpload" => ("s3:AbortMultipartUpload", Bucket(Write)),
        "ListParts" => ("s3:ListMultipartUploadParts", Bucket(Write)),
        "GetObject" | "HeadObject" => ("s3:GetObject", Object(Read)),
        "GetObjectAttributes" => ("s3:GetObjectAttributes", Object(Read)),
        "GetObjectAcl" => ("s3:GetObjectAcl", Object(ReadAcp)),
        "PutObjectAcl" => ("s3:PutObjectAcl", Object(WriteAcp)),
        // No ACL grants tagging (READ on an object is its bytes only), as on S3.
        "GetObjectTagging" => ("s3:GetObjectTagging", Owner),
        "PutObjectTagging" | "DeleteObjectTagging" => ("s3:PutObjectTagging", Owner),
        "DeleteBucket" => ("s3:DeleteBucket", Owner),
        "GetBucketLocation" => ("s3:GetBucketLocation", Owner),
        "GetBucketPolicy" => ("s3:GetBucketPolicy", Owner),
        "PutBucketPolicy" => ("s3:PutBucketPolicy", Owner),
        "DeleteBucketPolicy" => ("s3:DeleteBucketPolicy", Owner),
        "GetBucketPolicyStatus" => ("s3:GetBucketPolicyStatus", Owner),
        "GetPublicAccessBlock" => ("s3:GetBucketPublicAccessBlock", Owner),
        "PutPublicAccessBlock" | "DeletePublicAccessBlock" => ("s3:PutBucketPublicAccessBlock", Owner),
        "GetBucketOwnershipControls" => ("s3:GetBucketOwnershipControls", Owner),
        "PutBucketOwnershipControls" | "DeleteBucketOwnershipControls" => ("s3:PutBucketOwnershipControls", Owner),
        "GetBucketVersioning" => ("s3:GetBucketVersioning", Owner),
        "PutBucketVersioning" => ("s3:PutBucketVersioning", Owner),
        "GetBucketCors" => ("s3:GetBucketCORS", Owner),
        "PutBucketCors" | "DeleteBucketCors" => ("s3:PutBucketCORS", Owner),
        "GetBucketTagging" => ("s3:GetBucketTagging", Owner),
        "PutBucketTagging" | "DeleteBucketTagging" => ("s3:PutBucketTagging", Owner),
        "GetBucketLifecycleConfiguration" => ("s3:GetLifecycleConfiguration", Owner),
        "PutBucketLifecycleConfiguration" | "DeleteBucketLifecycle" => ("s3:PutLifecycleConfiguration", Owner),
        // Anything else (operations the gateway answers NotImplemented, or added later) is the
        // bucket owner's until this table says otherwise.
        _ => ("s3:*", Owner),
    }
}

/// The IAM action of an operation on one version of an object (`?versionId=`), as policies
/// name it: `s3:GetObject` allows the current version only.
pub fn of_version(action: &'static str) -> &'static str {
    match action {
        "s3:GetObject" => "s3:GetObjectVersion",
        "s3:DeleteObject" => "s3:DeleteObjectVersion",
        "s3:GetObjectAcl" => "s3:GetObjectVersionAcl",
        "s3:PutObjectAcl" => "s3:PutObjectVersionAcl",
        "s3:GetObjectTagging" => "s3:GetObjectVersionTagging",
        "s3:PutObjectTagging" => "s3:PutObjectVersionTagging",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_and_configuration() {
        assert_eq!(of("GetObject"), ("s3:GetObject", Scope::Object(Permission::Read)));
        assert_eq!(of("HeadObject").0, "s3:GetObject");
        assert_eq!(of("UploadPart"), ("s3:PutObject", Scope::Bucket(Permission::Write)));
        assert_eq!(of("ListObjectsV2"), ("s3:ListBucket", Scope::Bucket(Permission::Read)));
        assert_eq!(of("PutBucketPolicy").1, Scope::Owner);
        assert_eq!(of("SomethingNew").1, Scope::Owner);
        assert_eq!(of_version(of("HeadObject").0), "s3:GetObjectVersion");
        assert_eq!(of_version(of("PutObject").0), "s3:PutObject");
    }
}
