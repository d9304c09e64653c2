"""The S3 behaviours Spindle's gateway promises, checked through boto3 (path style, SigV4) the
way applications will use it: buckets, objects, metadata, integrity checks, ranges, listings,
copies, batch deletes, conditional requests, multipart uploads, authentication, concurrent
overwrites and a large streamed object.

Each test states what it expects of real S3; the gateway must answer the same way. Run by
scripts/s3-clients.sh, which starts a cluster and a gateway and sets S3_ENDPOINT & co.
"""

import hashlib
import socket
import http.client
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from conftest import (
    ACCESS_KEY,
    ENDPOINT,
    MIB,
    REGION,
    SECRET_KEY,
    error_of,
    make_client,
    md5_hex,
    multipart_etag,
    payload,
    quoted_md5,
    remove_bucket,
    unique_bucket_name,
)


def keys_of(page):
    return [o["Key"] for o in page.get("Contents", [])]


def utf8_sorted(keys):
    """S3 lists keys in the order of their UTF-8 bytes."""
    return sorted(keys, key=lambda k: k.encode("utf-8"))


def put_many(s3, bucket, keys, threads=8):
    def put(key):
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode("utf-8"))

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, keys))


# --- buckets -----------------------------------------------------------------------------------


def test_bucket_create_head_list_delete(s3):
    name = unique_bucket_name("life")
    s3.create_bucket(Bucket=name)
    try:
        assert s3.head_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert name in [b["Name"] for b in s3.list_buckets()["Buckets"]]
        s3.delete_bucket(Bucket=name)
        with pytest.raises(ClientError) as e:
            s3.head_bucket(Bucket=name)
        assert error_of(e)[1] == 404
        assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    finally:
        remove_bucket(s3, name)


def test_recreating_an_owned_bucket_is_refused(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket=bucket)
    code, status = error_of(e)
    assert code in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists")
    assert status == 409


def test_deleting_a_bucket_with_objects_is_refused(s3, bucket):
    s3.put_object(Bucket=bucket, Key="keep", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=bucket)
    assert error_of(e) == ("BucketNotEmpty", 409)
    assert s3.get_object(Bucket=bucket, Key="keep")["Body"].read() == b"x"


def test_deleting_a_bucket_takes_its_unfinished_uploads_with_it(s3):
    """A bucket with no object but an upload left unfinished is deleted, and the upload with
    it (as S3, Ceph and MinIO do): a harness emptying a bucket by its objects can remove it."""
    name = unique_bucket_name("uploads")
    s3.create_bucket(Bucket=name)
    uid = s3.create_multipart_upload(Bucket=name, Key="left")["UploadId"]
    s3.upload_part(Bucket=name, Key="left", UploadId=uid, PartNumber=1, Body=b"part")
    s3.create_multipart_upload(Bucket=name, Key="also-left")
    s3.delete_bucket(Bucket=name)
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    # Created again, it is empty: the uploads went with it.
    s3.create_bucket(Bucket=name)
    assert s3.list_multipart_uploads(Bucket=name).get("Uploads", []) == []
    with pytest.raises(ClientError) as e:
        s3.list_parts(Bucket=name, Key="left", UploadId=uid)
    assert error_of(e) == ("NoSuchUpload", 404)
    s3.delete_bucket(Bucket=name)


def test_missing_bucket(s3):
    name = unique_bucket_name("absent")
    for call in (
        lambda: s3.get_object(Bucket=name, Key="k"),
        lambda: s3.put_object(Bucket=name, Key="k", Body=b"x"),
        lambda: s3.list_objects_v2(Bucket=name),
        lambda: s3.delete_bucket(Bucket=name),
        lambda: s3.create_multipart_upload(Bucket=name, Key="k"),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert error_of(e) == ("NoSuchBucket", 404)
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=name)
    assert error_of(e)[1] == 404


# --- objects -----------------------------------------------------------------------------------


def test_missing_key(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="nothing/here")
    assert error_of(e) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="nothing/here")
    assert error_of(e)[1] == 404


def test_put_get_head_delete(s3, bucket):
    body = payload(100_000, "pghd")
    put = s3.put_object(Bucket=bucket, Key="dir/obj", Body=body)
    assert put["ETag"] == quoted_md5(body)

    got = s3.get_object(Bucket=bucket, Key="dir/obj")
    assert got["Body"].read() == body
    assert got["ContentLength"] == len(body)
    assert got["ETag"] == quoted_md5(body)

    head = s3.head_object(Bucket=bucket, Key="dir/obj")
    assert head["ContentLength"] == len(body)
    assert head["ETag"] == quoted_md5(body)
    assert head["LastModified"] is not None

    # Overwrite, then delete; deleting an absent key succeeds as S3's does.
    s3.put_object(Bucket=bucket, Key="dir/obj", Body=b"second")
    assert s3.get_object(Bucket=bucket, Key="dir/obj")["Body"].read() == b"second"
    assert s3.delete_object(Bucket=bucket, Key="dir/obj")["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="dir/obj")
    assert error_of(e)[1] == 404
    assert s3.delete_object(Bucket=bucket, Key="dir/obj")["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_empty_object(s3, bucket):
    put = s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    assert put["ETag"] == quoted_md5(b"")
    got = s3.get_object(Bucket=bucket, Key="empty")
    assert got["ContentLength"] == 0
    assert got["Body"].read() == b""


def test_user_metadata_and_content_type_round_trip(s3, bucket):
    meta = {"colour": "blue", "multi-word-name": "two words", "number": "42"}
    s3.put_object(Bucket=bucket, Key="m", Body=b"meta", Metadata=meta, ContentType="text/x-spindle; charset=utf-8")
    for resp in (s3.head_object(Bucket=bucket, Key="m"), s3.get_object(Bucket=bucket, Key="m")):
        assert resp["Metadata"] == meta
        assert resp["ContentType"] == "text/x-spindle; charset=utf-8"
    # An overwrite without metadata drops the old metadata.
    s3.put_object(Bucket=bucket, Key="m", Body=b"plain")
    assert s3.head_object(Bucket=bucket, Key="m")["Metadata"] == {}


def test_content_md5_is_checked(s3, bucket):
    import base64

    body = b"the body whose digest is checked"
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    wrong = base64.b64encode(hashlib.md5(b"another body").digest()).decode()

    assert s3.put_object(Bucket=bucket, Key="md5", Body=body, ContentMD5=good)["ETag"] == quoted_md5(body)

    # A wrong digest is refused and leaves the stored object as it was ...
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="md5", Body=b"a replacement body", ContentMD5=wrong)
    assert error_of(e) == ("BadDigest", 400)
    assert s3.get_object(Bucket=bucket, Key="md5")["Body"].read() == body

    # ... and creates nothing where there was nothing.
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="md5-new", Body=body, ContentMD5=wrong)
    assert error_of(e) == ("BadDigest", 400)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="md5-new")
    assert error_of(e)[1] == 404


def test_ranged_get(s3, bucket):
    body = payload(1000, "range")
    s3.put_object(Bucket=bucket, Key="r", Body=body)

    def get(spec):
        return s3.get_object(Bucket=bucket, Key="r", Range=spec)

    r = get("bytes=10-19")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert r["ContentRange"] == "bytes 10-19/1000"
    assert r["ContentLength"] == 10
    assert r["Body"].read() == body[10:20]

    r = get("bytes=990-")
    assert r["ContentRange"] == "bytes 990-999/1000"
    assert r["Body"].read() == body[990:]

    r = get("bytes=-25")
    assert r["ContentRange"] == "bytes 975-999/1000"
    assert r["Body"].read() == body[-25:]

    # An end past the object is cut at its last byte.
    r = get("bytes=995-5000")
    assert r["ContentRange"] == "bytes 995-999/1000"
    assert r["Body"].read() == body[995:]

    r = get("bytes=0-0")
    assert r["Body"].read() == body[:1]

    for spec in ("bytes=1000-", "bytes=5000-6000"):
        with pytest.raises(ClientError) as e:
            get(spec)
        assert error_of(e) == ("InvalidRange", 416), spec


# --- listings ----------------------------------------------------------------------------------


def test_list_v2_prefix_and_delimiter(s3, bucket):
    keys = ["a/b/c", "a/b/d", "a/e", "f", "g/h", "g/i/j", "gx"]
    put_many(s3, bucket, keys)

    r = s3.list_objects_v2(Bucket=bucket)
    assert keys_of(r) == keys
    assert r["KeyCount"] == len(keys)
    assert not r["IsTruncated"]
    for o in r["Contents"]:
        assert o["Size"] == len(o["Key"])
        assert o["ETag"] == quoted_md5(o["Key"].encode())

    r = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert keys_of(r) == ["f", "gx"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "g/"]
    assert r["KeyCount"] == 4

    r = s3.list_objects_v2(Bucket=bucket, Prefix="a/", Delimiter="/")
    assert keys_of(r) == ["a/e"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/b/"]

    r = s3.list_objects_v2(Bucket=bucket, Prefix="g")
    assert keys_of(r) == ["g/h", "g/i/j", "gx"]

    r = s3.list_objects_v2(Bucket=bucket, Prefix="g", Delimiter="/")
    assert keys_of(r) == ["gx"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["g/"]

    r = s3.list_objects_v2(Bucket=bucket, Prefix="nope")
    assert r["KeyCount"] == 0 and "Contents" not in r and not r["IsTruncated"]


def test_empty_bucket_lists_nothing(s3, bucket):
    r = s3.list_objects_v2(Bucket=bucket)
    assert r["KeyCount"] == 0
    assert "Contents" not in r and "CommonPrefixes" not in r
    assert not r["IsTruncated"]
    r = s3.list_objects(Bucket=bucket)
    assert "Contents" not in r and not r["IsTruncated"]


@pytest.fixture(scope="module")
def walk_bucket():
    """A bucket of 2,500 keys whose numeric and lexical orders differ ("walk/10" < "walk/9")."""
    s3 = make_client()
    name = unique_bucket_name("walk")
    s3.create_bucket(Bucket=name)
    keys = [f"walk/{i}" for i in range(2500)]
    put_many(s3, name, keys, threads=16)
    yield name, utf8_sorted(keys)
    # Three DeleteObjects of up to 1,000 keys at once.
    batches = [[{"Key": k} for k in keys[i : i + 1000]] for i in range(0, len(keys), 1000)]
    with ThreadPoolExecutor(len(batches)) as pool:
        results = list(pool.map(lambda b: s3.delete_objects(Bucket=name, Delete={"Objects": b}), batches))
    assert sum(len(r.get("Deleted", [])) for r in results) == len(keys)
    assert not any(r.get("Errors") for r in results)
    s3.delete_bucket(Bucket=name)


def walk_v2(s3, bucket, max_keys, **kwargs):
    keys, token, pages = [], None, 0
    while True:
        args = dict(Bucket=bucket, MaxKeys=max_keys, **kwargs)
        if token:
            args["ContinuationToken"] = token
        r = s3.list_objects_v2(**args)
        pages += 1
        page = keys_of(r)
        assert len(page) <= max_keys
        assert r["KeyCount"] == len(page) + len(r.get("CommonPrefixes", []))
        keys += page
        if not r["IsTruncated"]:
            assert "NextContinuationToken" not in r
            return keys, pages
        assert page, "a truncated page must hold keys"
        token = r["NextContinuationToken"]
        assert pages < 10_000, "the listing does not end"


def test_list_v2_walks_every_key_in_order(s3, walk_bucket):
    name, expected = walk_bucket
    keys, pages = walk_v2(s3, name, 1000)
    assert keys == expected
    assert pages == 3


def test_list_v2_walks_a_prefix_in_small_pages(s3, walk_bucket):
    # The 111 keys under "walk/24" ("walk/24", "walk/240".."walk/249", "walk/2400".."walk/2499"),
    # seven at a time: 16 pages, each but the first starting from a continuation token.
    name, expected = walk_bucket
    under = [k for k in expected if k.startswith("walk/24")]
    assert len(under) == 111
    keys, pages = walk_v2(s3, name, 7, Prefix="walk/24")
    assert keys == under
    assert pages == 16


def test_list_v2_default_page_is_1000(s3, walk_bucket):
    name, expected = walk_bucket
    r = s3.list_objects_v2(Bucket=name)
    assert keys_of(r) == expected[:1000]
    assert r["IsTruncated"]


def test_list_v2_start_after(s3, walk_bucket):
    name, expected = walk_bucket
    keys, pages = walk_v2(s3, name, 100, StartAfter=expected[2300])
    assert keys == expected[2301:]
    assert pages == 2
    # StartAfter need not be a stored key: here one that sorts between two stored ones.
    after = expected[2400] + "x"
    assert expected[2400] < after < expected[2401]
    keys, _ = walk_v2(s3, name, 1000, StartAfter=after)
    assert keys == expected[2401:]


def test_list_v1_walks_with_marker(s3, walk_bucket):
    name, expected = walk_bucket
    keys, marker = [], ""
    while True:
        r = s3.list_objects(Bucket=name, Marker=marker, MaxKeys=1000)
        page = keys_of(r)
        keys += page
        if not r["IsTruncated"]:
            break
        marker = r.get("NextMarker") or page[-1]
    assert keys == expected
    r = s3.list_objects(Bucket=name, Marker=expected[2400])
    assert keys_of(r) == expected[2401:]


# Keys with spaces, unicode, URL-reserved characters and characters that sort below '/'
# (space ! # $ % & ' ( ) * + , - .), so that a store ordering keys by anything but their UTF-8
# bytes, or a listing that mishandles the delimiter next to them, shows.
ODD_KEYS = [
    "a b",
    "a!b",
    "a#b",
    "a$b",
    "a%b",
    "a%20b",
    "a&b",
    "a'b",
    "a(b)",
    "a*b",
    "a+b",
    "a,b",
    "a-b",
    "a.b",
    "a/b",
    "a/b c/d",
    "a/b/c",
    "a0",
    "a:b",
    "a;b",
    "a=b",
    "a?b",
    "a@b",
    "a~b",
    "trailing space ",
    "ünïcödé/ключ",
    "日本語/ファイル名",
    "emoji/😀",
    "é",
    "e\u0301",
]


def expected_delimited(keys, prefix, delimiter):
    contents, prefixes = [], []
    for k in utf8_sorted(keys):
        if not k.startswith(prefix):
            continue
        rest = k[len(prefix) :]
        if delimiter in rest:
            p = prefix + rest[: rest.index(delimiter) + len(delimiter)]
            if p not in prefixes:
                prefixes.append(p)
        else:
            contents.append(k)
    return contents, prefixes


def test_odd_keys_round_trip_and_list_in_byte_order(s3, bucket):
    put_many(s3, bucket, ODD_KEYS)
    for k in ODD_KEYS:
        assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == k.encode(), k
        assert s3.head_object(Bucket=bucket, Key=k)["ContentLength"] == len(k.encode()), k

    expected = utf8_sorted(ODD_KEYS)
    assert keys_of(s3.list_objects_v2(Bucket=bucket)) == expected
    assert walk_v2(s3, bucket, 3)[0] == expected
    assert keys_of(s3.list_objects(Bucket=bucket)) == expected

    for prefix in ("", "a", "a/", "ü", "日本語/"):
        contents, prefixes = expected_delimited(ODD_KEYS, prefix, "/")
        r = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/")
        assert keys_of(r) == contents, prefix
        assert [p["Prefix"] for p in r.get("CommonPrefixes", [])] == prefixes, prefix

    # The same delimited listing two entries at a time: a common prefix counts as one entry and
    # is never repeated across pages.
    contents, prefixes = expected_delimited(ODD_KEYS, "", "/")
    got_keys, got_prefixes, token = [], [], None
    for _ in range(100):
        args = dict(Bucket=bucket, Delimiter="/", MaxKeys=2)
        if token:
            args["ContinuationToken"] = token
        r = s3.list_objects_v2(**args)
        assert len(r.get("Contents", [])) + len(r.get("CommonPrefixes", [])) <= 2
        got_keys += keys_of(r)
        got_prefixes += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    assert got_keys == contents
    assert got_prefixes == prefixes

    # A prefix containing characters below '/'.
    r = s3.list_objects_v2(Bucket=bucket, Prefix="a%")
    assert keys_of(r) == ["a%20b", "a%b"]
    r = s3.list_objects_v2(Bucket=bucket, Prefix="a+")
    assert keys_of(r) == ["a+b"]


# --- copies and batch deletes --------------------------------------------------------------------


def test_copy_object(s3, bucket, other_bucket):
    body = payload(300_000, "copy")
    meta = {"origin": "source"}
    s3.put_object(Bucket=bucket, Key="src", Body=body, Metadata=meta, ContentType="application/x-src")

    # Same bucket, metadata copied (the default directive).
    r = s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert r["CopyObjectResult"]["ETag"] == quoted_md5(body)
    got = s3.get_object(Bucket=bucket, Key="dst")
    assert got["Body"].read() == body
    assert got["Metadata"] == meta
    assert got["ContentType"] == "application/x-src"

    # Another bucket, metadata replaced.
    s3.copy_object(
        Bucket=other_bucket,
        Key="copied/dst",
        CopySource={"Bucket": bucket, "Key": "src"},
        MetadataDirective="REPLACE",
        Metadata={"origin": "replaced", "extra": "1"},
        ContentType="application/x-new",
    )
    got = s3.get_object(Bucket=other_bucket, Key="copied/dst")
    assert got["Body"].read() == body
    assert got["Metadata"] == {"origin": "replaced", "extra": "1"}
    assert got["ContentType"] == "application/x-new"

    # The source is untouched by either copy, and later writes to it do not reach the copies.
    s3.put_object(Bucket=bucket, Key="src", Body=b"changed")
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == body
    assert s3.get_object(Bucket=other_bucket, Key="copied/dst")["Body"].read() == body


def test_copy_onto_itself(s3, bucket):
    s3.put_object(Bucket=bucket, Key="self", Body=b"same bytes", Metadata={"v": "1"})
    # Without a change of metadata S3 refuses the copy ...
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="self", CopySource={"Bucket": bucket, "Key": "self"})
    assert error_of(e) == ("InvalidRequest", 400)
    # ... with REPLACE it rewrites the metadata and keeps the bytes.
    s3.copy_object(
        Bucket=bucket,
        Key="self",
        CopySource={"Bucket": bucket, "Key": "self"},
        MetadataDirective="REPLACE",
        Metadata={"v": "2"},
    )
    got = s3.get_object(Bucket=bucket, Key="self")
    assert got["Body"].read() == b"same bytes"
    assert got["Metadata"] == {"v": "2"}


def test_copy_of_a_missing_source(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "absent"})
    assert error_of(e) == ("NoSuchKey", 404)


def test_delete_objects(s3, bucket):
    put_many(s3, bucket, ["d1", "d2", "d3", "d4", "keep"])
    r = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": "d1"}, {"Key": "d2"}, {"Key": "never-there"}]}
    )
    # S3 reports an absent key as deleted too.
    assert sorted(d["Key"] for d in r["Deleted"]) == ["d1", "d2", "never-there"]
    assert not r.get("Errors")
    assert keys_of(s3.list_objects_v2(Bucket=bucket)) == ["d3", "d4", "keep"]

    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "d3"}, {"Key": "d4"}, {"Key": "gone"}], "Quiet": True})
    assert not r.get("Deleted")
    assert not r.get("Errors")
    assert keys_of(s3.list_objects_v2(Bucket=bucket)) == ["keep"]


# --- conditional requests ----------------------------------------------------------------------


def test_conditional_get(s3, bucket):
    body = b"conditional"
    etag = s3.put_object(Bucket=bucket, Key="c", Body=body)["ETag"]
    stale = quoted_md5(b"something else")

    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == body
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfMatch=stale)
    assert error_of(e) == ("PreconditionFailed", 412)

    modified = s3.head_object(Bucket=bucket, Key="c")["ResponseMetadata"]["HTTPHeaders"]["last-modified"]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert error_of(e)[1] == 304
    # A 304 carries the validators a 200 would (RFC 9110), for the client's cache.
    headers = e.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert (headers.get("etag"), headers.get("last-modified")) == (etag, modified), headers
    assert s3.get_object(Bucket=bucket, Key="c", IfNoneMatch=stale)["Body"].read() == body

    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert error_of(e)[1] == 304
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"].get("etag") == etag
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="c", IfMatch=stale)
    assert error_of(e)[1] == 412


def test_put_if_none_match_creates_once(s3, bucket):
    s3.put_object(Bucket=bucket, Key="once", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="once", Body=b"second", IfNoneMatch="*")
    assert error_of(e) == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="once")["Body"].read() == b"first"


def test_put_if_match(s3, bucket):
    first = s3.put_object(Bucket=bucket, Key="cas", Body=b"v1")["ETag"]
    second = s3.put_object(Bucket=bucket, Key="cas", Body=b"v2", IfMatch=first)["ETag"]
    assert second == quoted_md5(b"v2")
    # The first ETag is stale now.
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="cas", Body=b"v3", IfMatch=first)
    assert error_of(e) == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="cas")["Body"].read() == b"v2"
    # If-Match on a key that does not exist: S3 answers NoSuchKey.
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="cas-absent", Body=b"v1", IfMatch=first)
    assert error_of(e) == ("NoSuchKey", 404)


# --- multipart uploads -------------------------------------------------------------------------


def test_multipart_upload_out_of_order(s3, bucket):
    parts = [payload(5 * MIB, "mp1"), payload(5 * MIB, "mp2"), payload(1 * MIB + 123, "mp3")]
    up = s3.create_multipart_upload(Bucket=bucket, Key="big/object", Metadata={"kind": "multipart"})
    other = s3.create_multipart_upload(Bucket=bucket, Key="elsewhere/object")
    uid = up["UploadId"]

    etags = {}
    # Part 1 is first uploaded with other bytes: the later upload of the same number wins.
    s3.upload_part(Bucket=bucket, Key="big/object", UploadId=uid, PartNumber=1, Body=payload(5 * MIB, "stale"))
    for n in (3, 1, 2):
        r = s3.upload_part(Bucket=bucket, Key="big/object", UploadId=uid, PartNumber=n, Body=parts[n - 1])
        assert r["ETag"] == quoted_md5(parts[n - 1])
        etags[n] = r["ETag"]

    listed = s3.list_parts(Bucket=bucket, Key="big/object", UploadId=uid)
    assert [p["PartNumber"] for p in listed["Parts"]] == [1, 2, 3]
    assert [p["ETag"] for p in listed["Parts"]] == [etags[1], etags[2], etags[3]]
    assert [p["Size"] for p in listed["Parts"]] == [len(p) for p in parts]

    uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix="big/")
    assert [(u["Key"], u["UploadId"]) for u in uploads.get("Uploads", [])] == [("big/object", uid)]
    everything = s3.list_multipart_uploads(Bucket=bucket)
    assert {u["UploadId"] for u in everything["Uploads"]} == {uid, other["UploadId"]}

    # Nothing is visible under the key before completion.
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="big/object")
    assert error_of(e)[1] == 404
    assert keys_of(s3.list_objects_v2(Bucket=bucket)) == []

    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="big/object",
        UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": etags[n]} for n in (1, 2, 3)]},
    )
    whole = b"".join(parts)
    assert done["ETag"] == multipart_etag(parts)

    got = s3.get_object(Bucket=bucket, Key="big/object")
    assert got["ContentLength"] == len(whole)
    assert got["ETag"] == multipart_etag(parts)
    assert got["Metadata"] == {"kind": "multipart"}
    assert hashlib.sha256(got["Body"].read()).digest() == hashlib.sha256(whole).digest()
    assert [o["Size"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == [len(whole)]

    # Ranges across the part boundaries.
    b1, b2 = len(parts[0]), len(parts[0]) + len(parts[1])
    for start, end in ((b1 - 10, b1 + 9), (b2 - 1, b2), (b1 - 100, b2 + 100), (0, len(whole) - 1), (b2 + 5, len(whole) - 1)):
        r = s3.get_object(Bucket=bucket, Key="big/object", Range=f"bytes={start}-{end}")
        assert r["ContentRange"] == f"bytes {start}-{end}/{len(whole)}"
        assert r["Body"].read() == whole[start : end + 1], (start, end)
    r = s3.get_object(Bucket=bucket, Key="big/object", Range="bytes=-7")
    assert r["Body"].read() == whole[-7:]

    # The completed upload is no longer listed; the other one still is.
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])] == [other["UploadId"]]


def start_upload_with_parts(s3, bucket, key, sizes, seed):
    uid = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts, etags = [], []
    for n, size in enumerate(sizes, start=1):
        data = payload(size, f"{seed}-{n}")
        parts.append(data)
        etags.append(s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=n, Body=data)["ETag"])
    return uid, parts, etags


def test_complete_with_a_wrong_part_etag(s3, bucket):
    uid, parts, etags = start_upload_with_parts(s3, bucket, "k", [5 * MIB, 1000], "wrongetag")
    for listing in (
        [{"PartNumber": 1, "ETag": etags[0]}, {"PartNumber": 2, "ETag": quoted_md5(b"not the part")}],
        [{"PartNumber": 1, "ETag": etags[0]}, {"PartNumber": 3, "ETag": etags[1]}],
    ):
        with pytest.raises(ClientError) as e:
            s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=uid, MultipartUpload={"Parts": listing})
        assert error_of(e) == ("InvalidPart", 400)
    # The upload survives a refused completion and completes with the right list.
    s3.complete_multipart_upload(
        Bucket=bucket, Key="k", UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etags[0]}, {"PartNumber": 2, "ETag": etags[1]}]}
    )
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"".join(parts)


def test_complete_with_parts_out_of_order(s3, bucket):
    uid, _, etags = start_upload_with_parts(s3, bucket, "k", [5 * MIB, 5 * MIB], "order")
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="k", UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": etags[1]}, {"PartNumber": 1, "ETag": etags[0]}]}
        )
    assert error_of(e) == ("InvalidPartOrder", 400)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="k")
    assert error_of(e)[1] == 404


def test_complete_with_a_small_part_before_the_last(s3, bucket):
    uid, _, etags = start_upload_with_parts(s3, bucket, "k", [1 * MIB, 1 * MIB], "small")
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="k", UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etags[0]}, {"PartNumber": 2, "ETag": etags[1]}]}
        )
    assert error_of(e) == ("EntityTooSmall", 400)
    # A lone part may be as small as it likes (it is the last one).
    uid, parts, etags = start_upload_with_parts(s3, bucket, "tiny", [1], "tiny")
    done = s3.complete_multipart_upload(Bucket=bucket, Key="tiny", UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etags[0]}]})
    assert done["ETag"] == multipart_etag(parts)
    assert s3.get_object(Bucket=bucket, Key="tiny")["Body"].read() == parts[0]


def test_abort_multipart_upload(s3, bucket):
    uid, _, _ = start_upload_with_parts(s3, bucket, "aborted", [5 * MIB], "abort")
    s3.abort_multipart_upload(Bucket=bucket, Key="aborted", UploadId=uid)
    for call in (
        lambda: s3.upload_part(Bucket=bucket, Key="aborted", UploadId=uid, PartNumber=2, Body=b"late"),
        lambda: s3.list_parts(Bucket=bucket, Key="aborted", UploadId=uid),
        lambda: s3.complete_multipart_upload(Bucket=bucket, Key="aborted", UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"x"'}]}),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert error_of(e) == ("NoSuchUpload", 404)
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="aborted")
    assert error_of(e)[1] == 404


def test_upload_part_to_an_unknown_upload(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="k", UploadId="no-such-upload-id", PartNumber=1, Body=b"x")
    assert error_of(e) == ("NoSuchUpload", 404)


# --- authentication ----------------------------------------------------------------------------


def test_wrong_secret_key(s3, bucket):
    bad = make_client(secret_key=SECRET_KEY + "x")
    with pytest.raises(ClientError) as e:
        bad.list_buckets()
    assert error_of(e) == ("SignatureDoesNotMatch", 403)
    with pytest.raises(ClientError) as e:
        bad.put_object(Bucket=bucket, Key="forged", Body=b"x")
    assert error_of(e) == ("SignatureDoesNotMatch", 403)
    assert keys_of(s3.list_objects_v2(Bucket=bucket)) == []


def test_unknown_access_key(s3, bucket):
    bad = make_client(access_key="AKIDONOTEXIST000000")
    with pytest.raises(ClientError) as e:
        bad.get_object(Bucket=bucket, Key="k")
    assert error_of(e) == ("InvalidAccessKeyId", 403)


def raw_request(method, path, body=b"", headers=None, sign=True, tamper_body=None):
    """One request sent by hand (SigV4 by botocore's signer when SIGN), so that what a client
    library would never send can be: TAMPER_BODY replaces the signed body on the wire."""
    url = ENDPOINT + path
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    if sign:
        request.headers["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest()
        SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(request)
    parsed = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    try:
        wire = tamper_body if tamper_body is not None else body
        hdrs = {k: v for k, v in request.headers.items()}
        hdrs["Content-Length"] = str(len(wire))
        target = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        conn.request(method, target, body=wire, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_payload_not_matching_its_signed_hash_is_refused(s3, bucket):
    status, text = raw_request("PUT", f"/{bucket}/signed", body=b"hello world", tamper_body=b"hello WORLD")
    assert status == 400, text
    assert b"<Code>XAmzContentSHA256Mismatch</Code>" in text
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="signed")
    assert error_of(e)[1] == 404
    # The untampered request goes through: the test's signing is right.
    status, text = raw_request("PUT", f"/{bucket}/signed", body=b"hello world")
    assert status == 200, text
    assert s3.get_object(Bucket=bucket, Key="signed")["Body"].read() == b"hello world"


def without_content_length(method, path, body, query=""):
    """A signed request whose body follows its headers with neither Content-Length nor
    chunked transfer encoding, sent on a socket of its own; returns (status, response text)."""
    url = ENDPOINT + path + (f"?{query}" if query else "")
    # An unsigned payload, as SDKs send over HTTPS: nothing but the length says where it ends.
    request = AWSRequest(method=method, url=url, data=body, headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(request)
    parsed = urllib.parse.urlsplit(url)
    target = parsed.path + (f"?{parsed.query}" if parsed.query else "")
    head = f"{method} {target} HTTP/1.1\r\nHost: {parsed.netloc}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in request.headers.items() if k.lower() not in ("host", "content-length"))
    with socket.create_connection((parsed.hostname, parsed.port), timeout=30) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        reply = b""
        while b"\r\n\r\n" not in reply or (b"</Error>" not in reply and b"content-length: 0" not in reply.lower()):
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    text = reply.decode(errors="replace")
    return int(text.split(" ", 2)[1]), text


def test_a_put_without_its_length_is_refused_and_stores_nothing(s3, bucket):
    """A body sent with neither Content-Length nor chunked encoding is no body to HTTP: the
    PUT is refused with 411 rather than storing an empty object, and so is an UploadPart."""
    status, text = without_content_length("PUT", f"/{bucket}/unsized", b"hello world")
    assert status == 411 and "<Code>MissingContentLength</Code>" in text, text
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="unsized")
    assert error_of(e)[1] == 404
    upload = s3.create_multipart_upload(Bucket=bucket, Key="unsized-parts")["UploadId"]
    status, text = without_content_length("PUT", f"/{bucket}/unsized-parts", b"part", query=f"partNumber=1&uploadId={upload}")
    assert status == 411 and "<Code>MissingContentLength</Code>" in text, text
    assert s3.list_parts(Bucket=bucket, Key="unsized-parts", UploadId=upload).get("Parts", []) == []
    s3.abort_multipart_upload(Bucket=bucket, Key="unsized-parts", UploadId=upload)
    # The same PUT with its length is stored whole.
    s3.put_object(Bucket=bucket, Key="unsized", Body=b"hello world")
    assert s3.get_object(Bucket=bucket, Key="unsized")["Body"].read() == b"hello world"


def test_bucket_names_follow_s3s_rules(s3):
    """Names that are no DNS name, look like an IP address or use S3's reserved parts are
    refused with InvalidBucketName; names with dots and hyphens in their places are taken."""
    for bad in ("foo-.bar", "foo.-bar", "a..b", "192.168.5.4", "xn--bucket", "bucket-s3alias", "ab"):
        with pytest.raises(ClientError) as e:
            s3.create_bucket(Bucket=bad)
        assert error_of(e) == ("InvalidBucketName", 400), bad
    good = unique_bucket_name("dots") + ".and-hyphens.2026"
    s3.create_bucket(Bucket=good)
    remove_bucket(s3, good)


def test_a_part_number_past_the_last_is_an_invalid_part(s3, bucket):
    """GetObject and HeadObject with partNumber past an object's parts answer InvalidPart (400),
    as S3 does; a plain object is its own part 1."""
    s3.put_object(Bucket=bucket, Key="plain", Body=b"plain")
    assert s3.get_object(Bucket=bucket, Key="plain", PartNumber=1)["Body"].read() == b"plain"
    uid = s3.create_multipart_upload(Bucket=bucket, Key="parts")["UploadId"]
    parts = [payload(5 * MIB, "p1"), b"tail"]
    etags = [s3.upload_part(Bucket=bucket, Key="parts", UploadId=uid, PartNumber=n + 1, Body=p)["ETag"] for n, p in enumerate(parts)]
    s3.complete_multipart_upload(Bucket=bucket, Key="parts", UploadId=uid, MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
    assert s3.get_object(Bucket=bucket, Key="parts", PartNumber=2)["Body"].read() == b"tail"
    for key, past in (("plain", 2), ("parts", 3)):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key=key, PartNumber=past)
        assert error_of(e) == ("InvalidPart", 400), key
        with pytest.raises(ClientError) as e:
            s3.head_object(Bucket=bucket, Key=key, PartNumber=past)
        assert error_of(e)[1] == 400, key


def test_completing_a_completed_upload_again_answers_as_the_first_time(s3, bucket):
    """A client that lost the answer to its completion and sends it again gets the same
    answer (as S3 gives it), not NoSuchUpload; once the object is replaced, the upload is gone."""
    uid = s3.create_multipart_upload(Bucket=bucket, Key="twice")["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key="twice", UploadId=uid, PartNumber=1, Body=b"only part")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
    first = s3.complete_multipart_upload(Bucket=bucket, Key="twice", UploadId=uid, MultipartUpload=parts)
    again = s3.complete_multipart_upload(Bucket=bucket, Key="twice", UploadId=uid, MultipartUpload=parts)
    assert (again["ETag"], again["Key"], again["Bucket"]) == (first["ETag"], "twice", bucket)
    assert s3.get_object(Bucket=bucket, Key="twice")["Body"].read() == b"only part"
    s3.put_object(Bucket=bucket, Key="twice", Body=b"replaced")
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="twice", UploadId=uid, MultipartUpload=parts)
    assert error_of(e) == ("NoSuchUpload", 404)
    assert s3.get_object(Bucket=bucket, Key="twice")["Body"].read() == b"replaced"


def test_anonymous_request_is_refused(s3, bucket):
    s3.put_object(Bucket=bucket, Key="private", Body=b"secret")
    status, text = raw_request("GET", f"/{bucket}/private", sign=False)
    assert status == 403, text
    assert b"secret" not in text


def test_presigned_get(s3, bucket):
    s3.put_object(Bucket=bucket, Key="shared file", Body=b"presigned bytes")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "shared file"}, ExpiresIn=300)
    parsed = urllib.parse.urlsplit(url)

    def fetch(query):
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
        try:
            conn.request("GET", f"{parsed.path}?{query}")
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    assert fetch(parsed.query) == (200, b"presigned bytes")
    # The same URL with one hex digit of its signature changed.
    params = urllib.parse.parse_qsl(parsed.query)
    forged = [(k, (v[:-1] + ("0" if v[-1] != "0" else "1")) if k == "X-Amz-Signature" else v) for k, v in params]
    status, text = fetch(urllib.parse.urlencode(forged, quote_via=urllib.parse.quote))
    assert status == 403, text
    assert b"presigned bytes" not in text


def test_a_presigned_url_lives_a_week_at_most(s3, bucket):
    """As in S3, a presigned URL signed for a week is served and one signed for longer is
    refused (AuthorizationQueryParametersError), its signature right or not."""
    s3.put_object(Bucket=bucket, Key="shared", Body=b"for a week")
    week = 7 * 24 * 3600
    for expires, expected in ((week, 200), (week + 1, 400)):
        url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "shared"}, ExpiresIn=expires)
        parsed = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
        try:
            conn.request("GET", f"{parsed.path}?{parsed.query}")
            resp = conn.getresponse()
            status, text = resp.status, resp.read()
        finally:
            conn.close()
        assert status == expected, (expires, text)
        if expected == 400:
            assert b"<Code>AuthorizationQueryParametersError</Code>" in text and b"for a week" not in text


# --- concurrency and size ----------------------------------------------------------------------


def test_concurrent_overwrites_of_one_key(s3, bucket):
    """8 writers each put 5 distinct 3 MiB payloads to one key while 2 readers loop on it:
    every read is one whole written payload whose MD5 is its ETag, never a mix, and the last
    value is the last write of one of the writers."""
    writers, rounds, size = 8, 5, 3 * MIB
    initial = payload(size, "initial")
    written = {md5_hex(initial): "initial"}
    last_of_writer = set()
    for w in range(writers):
        for i in range(rounds):
            data = payload(size, f"w{w}-{i}")
            written[md5_hex(data)] = f"w{w}-{i}"
        last_of_writer.add(md5_hex(payload(size, f"w{w}-{rounds - 1}")))
    assert len(written) == writers * rounds + 1
    s3.put_object(Bucket=bucket, Key="hot", Body=initial)

    done = threading.Event()
    reads, failures = [], []

    def writer(w):
        for i in range(rounds):
            s3.put_object(Bucket=bucket, Key="hot", Body=payload(size, f"w{w}-{i}"))

    def reader():
        while not done.is_set():
            r = s3.get_object(Bucket=bucket, Key="hot")
            body = r["Body"].read()
            digest = md5_hex(body)
            reads.append(digest)
            if len(body) != size or f'"{digest}"' != r["ETag"] or digest not in written:
                failures.append((len(body), r["ETag"], digest))

    with ThreadPoolExecutor(writers + 2) as pool:
        readers = [pool.submit(reader) for _ in range(2)]
        try:
            for f in [pool.submit(writer, w) for w in range(writers)]:
                f.result()
        finally:
            done.set()
        for f in readers:
            f.result()

    assert not failures, f"{len(failures)} torn or unknown reads, e.g. {failures[:3]}"
    assert reads, "the readers read nothing"
    final = s3.get_object(Bucket=bucket, Key="hot")["Body"].read()
    assert md5_hex(final) in last_of_writer


class PatternFile:
    """A readable, seekable file of SIZE pseudo-random bytes produced as it is read, so that a
    large object goes up without being held in memory."""

    BLOCK = 1 * MIB

    def __init__(self, size, seed):
        self.size, self.seed, self.pos = size, seed, 0

    def block(self, n):
        return payload(self.BLOCK, f"{self.seed}-{n}")

    def read(self, amount=-1):
        if amount is None or amount < 0:
            amount = self.size - self.pos
        amount = min(amount, self.size - self.pos)
        out = bytearray()
        while len(out) < amount:
            n, offset = divmod(self.pos, self.BLOCK)
            piece = self.block(n)[offset : offset + amount - len(out)]
            out += piece
            self.pos += len(piece)
        return bytes(out)

    def seek(self, pos, whence=0):
        self.pos = {0: pos, 1: self.pos + pos, 2: self.size + pos}[whence]
        return self.pos

    def tell(self):
        return self.pos

    def digests(self):
        sha, md5 = hashlib.sha256(), hashlib.md5()
        for n in range(-(-self.size // self.BLOCK)):
            data = self.block(n)[: self.size - n * self.BLOCK]
            sha.update(data)
            md5.update(data)
        return sha.hexdigest(), md5.hexdigest()


def test_large_object_streamed_up_and_down(s3, bucket):
    size = 64 * MIB
    source = PatternFile(size, "large")
    sha, md5 = source.digests()
    r = s3.put_object(Bucket=bucket, Key="large", Body=source, ContentLength=size)
    assert r["ETag"] == f'"{md5}"'

    got = s3.get_object(Bucket=bucket, Key="large")
    assert got["ContentLength"] == size
    digest, length = hashlib.sha256(), 0
    for chunk in got["Body"].iter_chunks(1 * MIB):
        digest.update(chunk)
        length += len(chunk)
    assert length == size
    assert digest.hexdigest() == sha


def test_connection_stays_usable_after_an_early_error(s3, bucket):
    """An error answered before the request body is read (here 412 to a 1 MiB PUT with
    If-None-Match: *) must either say `Connection: close` or leave the connection usable:
    clients keep connections alive and send their next request on it. A gateway that closes
    the connection may do so while the client is still sending the body (how much of it the
    socket buffers had taken by then is the machine's timing): the client then sees the
    connection reset, which also keeps the rest of the body from being read as a request."""
    s3.put_object(Bucket=bucket, Key="taken", Body=b"first")
    body = payload(1 * MIB, "early-error")
    path = f"/{bucket}/taken"

    def signed_headers(method, data, extra):
        request = AWSRequest(method=method, url=ENDPOINT + path, data=data, headers=dict(extra))
        request.headers["x-amz-content-sha256"] = hashlib.sha256(data).hexdigest()
        SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(request)
        return dict(request.headers.items())

    parsed = urllib.parse.urlsplit(ENDPOINT)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    try:
        try:
            conn.request("PUT", path, body=body, headers=signed_headers("PUT", body, {"If-None-Match": "*"}))
            resp = conn.getresponse()
            resp.read()
        except (BrokenPipeError, ConnectionResetError):
            return
        assert resp.status == 412
        if (resp.getheader("Connection") or "").lower() == "close":
            return
        conn.request("GET", path, headers=signed_headers("GET", b"", {}))
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"first")
    finally:
        conn.close()
