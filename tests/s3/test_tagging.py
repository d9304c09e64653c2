"""Object and bucket tagging and GetObjectAttributes through boto3: tags set by PUT, copy and
multipart creation, changed and removed by the tagging calls (per version in a versioned
bucket), counted on GET, refused past S3's limits; a bucket's tag set; an object's attributes
and the parts of a multipart object, a page at a time."""

import base64
import hashlib

import boto3
import pytest
from botocore.exceptions import ClientError

import botocore

from conftest import ENDPOINT, MIB, REGION, client_config, error_of, payload


def tags(s3, bucket, key, **kwargs):
    return {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=bucket, Key=key, **kwargs)["TagSet"]}


def test_object_tags_are_set_changed_counted_and_removed(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", Tagging="project=blue%20sky&team=storage")
    assert tags(s3, bucket, "k") == {"project": "blue sky", "team": "storage"}
    assert s3.get_object(Bucket=bucket, Key="k")["TagCount"] == 2
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": [{"Key": "stage", "Value": "archive"}]})
    assert tags(s3, bucket, "k") == {"stage": "archive"}
    # A tag change leaves the object's bytes and ETag as they were.
    got = s3.get_object(Bucket=bucket, Key="k")
    assert got["Body"].read() == b"x" and got["TagCount"] == 1
    assert s3.head_object(Bucket=bucket, Key="k")["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "1"
    s3.delete_object_tagging(Bucket=bucket, Key="k")
    assert tags(s3, bucket, "k") == {}
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="k")
    with pytest.raises(ClientError) as e:
        s3.get_object_tagging(Bucket=bucket, Key="missing")
    assert error_of(e) == ("NoSuchKey", 404)


def test_tags_past_s3s_limits_are_refused(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    for tag_set in (
        [{"Key": f"k{n}", "Value": "v"} for n in range(11)],
        [{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}],
        [{"Key": "aws:reserved", "Value": "v"}],
        [{"Key": "k" * 129, "Value": "v"}],
        [{"Key": "k", "Value": "v" * 257}],
    ):
        with pytest.raises(ClientError) as e:
            s3.put_object_tagging(Bucket=bucket, Key="k", Tagging={"TagSet": tag_set})
        assert error_of(e) == ("InvalidTag", 400), tag_set
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k2", Body=b"x", Tagging="&".join(f"k{n}=v" for n in range(11)))
    assert error_of(e) == ("InvalidTag", 400)
    assert tags(s3, bucket, "k") == {}


def test_copies_and_multipart_uploads_carry_tags(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"source", Tagging="a=1")
    s3.copy_object(Bucket=bucket, Key="copied", CopySource={"Bucket": bucket, "Key": "src"})
    assert tags(s3, bucket, "copied") == {"a": "1"}
    s3.copy_object(Bucket=bucket, Key="replaced", CopySource={"Bucket": bucket, "Key": "src"}, TaggingDirective="REPLACE", Tagging="b=2")
    assert tags(s3, bucket, "replaced") == {"b": "2"}
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", Tagging="c=3")["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=1, Body=b"only")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    assert tags(s3, bucket, "mp") == {"c": "3"}


def test_each_version_has_its_own_tags(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket=bucket, Key="k", Body=b"old", Tagging="v=old")["VersionId"]
    s3.put_object(Bucket=bucket, Key="k", Body=b"new", Tagging="v=new")
    assert tags(s3, bucket, "k") == {"v": "new"}
    assert tags(s3, bucket, "k", VersionId=old) == {"v": "old"}
    assert s3.put_object_tagging(Bucket=bucket, Key="k", VersionId=old, Tagging={"TagSet": [{"Key": "v", "Value": "changed"}]})["VersionId"] == old
    assert tags(s3, bucket, "k", VersionId=old) == {"v": "changed"} and tags(s3, bucket, "k") == {"v": "new"}


def test_a_buckets_tag_set(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.get_bucket_tagging(Bucket=bucket)
    assert error_of(e) == ("NoSuchTagSet", 404)
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "cost-centre", "Value": "42"}]})
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == [{"Key": "cost-centre", "Value": "42"}]
    with pytest.raises(ClientError) as e:
        s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": f"k{n}", "Value": ""} for n in range(51)]})
    assert error_of(e) == ("InvalidTag", 400)
    s3.delete_bucket_tagging(Bucket=bucket)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_tagging(Bucket=bucket)
    assert error_of(e) == ("NoSuchTagSet", 404)


def test_object_attributes_and_parts_a_page_at_a_time(s3, bucket):
    s3.put_object(Bucket=bucket, Key="plain", Body=b"12345")
    got = s3.get_object_attributes(Bucket=bucket, Key="plain", ObjectAttributes=["ETag", "ObjectSize", "StorageClass", "ObjectParts"])
    # The ETag unquoted, as S3 gives it here (and only here).
    assert got["ObjectSize"] == 5 and got["StorageClass"] == "STANDARD" and got["ETag"] == "827ccb0eea8a706c4c34a16891f84e7b"
    assert "ObjectParts" not in got
    parts = [payload(5 * MIB, n) for n in range(2)] + [b"tail"]
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    etags = [s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=n + 1, Body=p)["ETag"] for n, p in enumerate(parts)]
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up, MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
    first = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts", "ObjectSize"], MaxParts=2)
    assert first["ObjectSize"] == sum(len(p) for p in parts)
    op = first["ObjectParts"]
    assert op["TotalPartsCount"] == 3 and op["IsTruncated"] is True and [p["Size"] for p in op["Parts"]] == [5 * MIB, 5 * MIB]
    rest = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts"], MaxParts=2, PartNumberMarker=op["NextPartNumberMarker"])["ObjectParts"]
    assert rest["IsTruncated"] is False and [(p["PartNumber"], p["Size"]) for p in rest["Parts"]] == [(3, 4)]
    with pytest.raises(ClientError) as e:
        s3.get_object_attributes(Bucket=bucket, Key="missing", ObjectAttributes=["ETag"])
    assert error_of(e)[1] == 404


def test_a_public_objects_tags_are_not_public(s3, bucket):
    """An ACL grants an object's bytes, not its tags (as on S3)."""
    s3.put_object(Bucket=bucket, Key="public", Body=b"open", ACL="public-read", Tagging="secret=yes")
    anonymous = boto3.client("s3", endpoint_url=ENDPOINT, region_name=REGION, config=client_config(signature_version=botocore.UNSIGNED))
    assert anonymous.get_object(Bucket=bucket, Key="public")["Body"].read() == b"open"
    with pytest.raises(ClientError) as e:
        anonymous.get_object_tagging(Bucket=bucket, Key="public")
    assert error_of(e) == ("AccessDenied", 403)


def test_a_puts_checksums_are_kept_and_answered(s3, bucket):
    """Checksums a PUT asked for are kept with the object: HEAD and GET answer them when asked
    (x-amz-checksum-mode), and GetObjectAttributes names them."""
    data = payload(300_000, "checksummed")
    s3.put_object(Bucket=bucket, Key="c", Body=data, ChecksumAlgorithm="SHA256")
    want = base64.b64encode(hashlib.sha256(data).digest()).decode()
    head = s3.head_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == want
    assert "ChecksumSHA256" not in s3.head_object(Bucket=bucket, Key="c")
    got = s3.get_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")
    assert got["ChecksumSHA256"] == want and got["Body"].read() == data
    # A range is not the whole object: no whole-object checksum on it.
    assert "ChecksumSHA256" not in s3.get_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED", Range="bytes=0-9")
    attrs = s3.get_object_attributes(Bucket=bucket, Key="c", ObjectAttributes=["Checksum"])
    assert attrs["Checksum"]["ChecksumSHA256"] == want
