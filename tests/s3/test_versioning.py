"""Bucket versioning through boto3, against the suite's gateway over the cluster and against a
gateway of the test's own over one drive: versions kept through overwrites and deletes, delete
markers, reads, copies and deletes by version id, ListObjectVersions (prefix, delimiter,
pagination), the null version of objects from before versioning and while it is suspended,
and the sweeper keeping exactly the data that versions reference."""

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from conftest import MIB, error_of, payload, quoted_md5, remove_bucket, unique_bucket_name
from test_store_ops import drive_and_gateway, ops_of


@pytest.fixture(scope="module", params=["cluster", "drive"])
def store(request, s3):
    """(boto3 client, drive address or None): the suite's gateway, or one over a drive."""
    if request.param == "cluster":
        yield s3, None
        return
    with drive_and_gateway("--sweep-grace-secs", "1", "--sweep-interval-secs", "1") as (client, drive, _, _):
        yield client, drive


@pytest.fixture
def versioned(store):
    """(client, bucket with versioning enabled, drive or None)."""
    client, drive = store
    name = unique_bucket_name("v")
    client.create_bucket(Bucket=name)
    client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    yield client, name, drive
    remove_bucket(client, name)


def versions(client, bucket, **kwargs):
    """Every version and delete marker, each as (key, version id, is latest, is marker), in the
    listing's order per kind."""
    got = client.list_object_versions(Bucket=bucket, **kwargs)
    return (
        [(v["Key"], v["VersionId"], v["IsLatest"], False) for v in got.get("Versions", [])]
        + [(m["Key"], m["VersionId"], m["IsLatest"], True) for m in got.get("DeleteMarkers", [])]
    )


def read(client, bucket, key, **kwargs):
    return client.get_object(Bucket=bucket, Key=key, **kwargs)["Body"].read()


def test_configuration_goes_from_never_to_enabled_to_suspended(store):
    client, _ = store
    name = unique_bucket_name("vc")
    client.create_bucket(Bucket=name)
    try:
        assert "Status" not in client.get_bucket_versioning(Bucket=name)
        client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        assert client.get_bucket_versioning(Bucket=name)["Status"] == "Enabled"
        client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Suspended"})
        assert client.get_bucket_versioning(Bucket=name)["Status"] == "Suspended"
        with pytest.raises(ClientError) as e:
            client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled", "MFADelete": "Enabled"})
        assert error_of(e)[1] == 400
        with pytest.raises(ClientError) as e:
            client.get_bucket_versioning(Bucket=unique_bucket_name("none"))
        assert error_of(e) == ("NoSuchBucket", 404)
    finally:
        remove_bucket(client, name)


def test_overwrites_keep_every_version_readable_by_its_id(versioned):
    client, bucket, _ = versioned
    bodies = [payload(1000 + i, i) for i in range(3)]
    ids = [client.put_object(Bucket=bucket, Key="k", Body=b)["VersionId"] for b in bodies]
    assert len(set(ids)) == 3 and "null" not in ids
    listed = versions(client, bucket)
    # Newest first, only the newest latest.
    assert listed == [("k", ids[2], True, False), ("k", ids[1], False, False), ("k", ids[0], False, False)]
    for vid, body in zip(ids, bodies):
        got = client.get_object(Bucket=bucket, Key="k", VersionId=vid)
        assert got["Body"].read() == body and got["VersionId"] == vid and got["ETag"] == quoted_md5(body)
        head = client.head_object(Bucket=bucket, Key="k", VersionId=vid)
        assert head["ContentLength"] == len(body) and head["VersionId"] == vid
    current = client.get_object(Bucket=bucket, Key="k")
    assert current["Body"].read() == bodies[2] and current["VersionId"] == ids[2]
    # Each version names the owner GetObjectAcl names.
    owner = client.get_object_acl(Bucket=bucket, Key="k")["Owner"]["ID"]
    assert {v["Owner"]["ID"] for v in client.list_object_versions(Bucket=bucket)["Versions"]} == {owner}
    # The current listing shows the key once.
    assert [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])] == ["k"]


def test_concurrent_writers_each_get_a_version_that_exists(versioned):
    """8 writers put 5 bodies each to one key and 2 of them delete it between puts, all at
    once: every PUT's VersionId reads back its own body, every DELETE's marker is listed, and
    the listing holds exactly those versions and markers, one of them latest. (A swap that
    races another and never takes effect must not answer with the version id it tried.)"""
    client, bucket, _ = versioned
    writers, rounds = 8, 5

    def writer(w):
        made, markers = {}, []
        for i in range(rounds):
            body = payload(2000 + 97 * w + i, f"w{w}-{i}")
            made[client.put_object(Bucket=bucket, Key="hot", Body=body)["VersionId"]] = body
            if w < 2 and i % 2 == 0:
                markers.append(client.delete_object(Bucket=bucket, Key="hot")["VersionId"])
        return made, markers

    made, markers = {}, []
    with ThreadPoolExecutor(writers) as pool:
        for m, d in pool.map(writer, range(writers)):
            made.update(m)
            markers += d
    assert len(made) == writers * rounds and len(set(markers)) == len(markers) == 6
    for vid, body in made.items():
        assert read(client, bucket, "hot", VersionId=vid) == body
    listed = client.list_object_versions(Bucket=bucket)
    assert not listed["IsTruncated"]
    assert sorted(v["VersionId"] for v in listed.get("Versions", [])) == sorted(made)
    assert sorted(m["VersionId"] for m in listed.get("DeleteMarkers", [])) == sorted(markers)
    latest = [v for v in listed.get("Versions", []) + listed.get("DeleteMarkers", []) if v["IsLatest"]]
    assert len(latest) == 1


def test_a_completion_sent_again_while_the_first_runs_makes_one_version(versioned):
    """Copies of one CompleteMultipartUpload sent at once (a client whose first timed out
    sends it again): each answers the same version, and the upload is one version, which
    reads back whole once every other version is deleted. (Two completions that each swapped
    the upload in made two versions on one upload's data.)"""
    client, bucket, drive = versioned
    copies, rounds = 4, 5
    bodies = {}
    for r in range(rounds):
        body = payload(3000 + r, f"upload-{r}")
        upload = client.create_multipart_upload(Bucket=bucket, Key="done")["UploadId"]
        etag = client.upload_part(Bucket=bucket, Key="done", UploadId=upload, PartNumber=1, Body=body)["ETag"]
        parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
        with ThreadPoolExecutor(copies) as pool:
            answers = list(pool.map(lambda _: client.complete_multipart_upload(Bucket=bucket, Key="done", UploadId=upload, MultipartUpload=parts)["VersionId"], range(copies)))
        assert len(set(answers)) == 1, answers
        bodies[answers[0]] = body
        client.put_object(Bucket=bucket, Key="done", Body=b"between")
    listed = client.list_object_versions(Bucket=bucket, Prefix="done")
    from_uploads = [v["VersionId"] for v in listed["Versions"] if v["Size"] != len(b"between")]
    assert sorted(from_uploads) == sorted(bodies)
    for v in listed["Versions"]:
        if v["VersionId"] not in bodies:
            client.delete_object(Bucket=bucket, Key="done", VersionId=v["VersionId"])
    if drive is not None:
        time.sleep(3)  # past the one-second grace of the gateway over one drive: swept
    for vid, body in bodies.items():
        assert read(client, bucket, "done", VersionId=vid) == body


def test_a_delete_hides_the_key_behind_a_marker_and_removing_it_brings_the_object_back(versioned):
    client, bucket, _ = versioned
    v1 = client.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    v2 = client.put_object(Bucket=bucket, Key="k", Body=b"two")["VersionId"]
    deleted = client.delete_object(Bucket=bucket, Key="k")
    assert deleted["DeleteMarker"] is True
    marker = deleted["VersionId"]
    with pytest.raises(ClientError) as e:
        client.get_object(Bucket=bucket, Key="k")
    assert error_of(e) == ("NoSuchKey", 404)
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"].get("x-amz-delete-marker") == "true"
    with pytest.raises(ClientError) as e:
        client.head_object(Bucket=bucket, Key="k")
    assert error_of(e)[1] == 404
    # The marker by its id has no body: 405.
    with pytest.raises(ClientError) as e:
        client.get_object(Bucket=bucket, Key="k", VersionId=marker)
    assert error_of(e) == ("MethodNotAllowed", 405)
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert versions(client, bucket) == [("k", v2, False, False), ("k", v1, False, False), ("k", marker, True, True)]
    # Versions stay readable behind the marker.
    assert read(client, bucket, "k", VersionId=v1) == b"one"
    # Removing the marker makes the newest version current again.
    gone = client.delete_object(Bucket=bucket, Key="k", VersionId=marker)
    assert gone["DeleteMarker"] is True and gone["VersionId"] == marker
    assert read(client, bucket, "k") == b"two"
    assert versions(client, bucket) == [("k", v2, True, False), ("k", v1, False, False)]
    # Removing the current version for good: the one before it becomes current.
    client.delete_object(Bucket=bucket, Key="k", VersionId=v2)
    assert read(client, bucket, "k") == b"one"
    with pytest.raises(ClientError) as e:
        client.get_object(Bucket=bucket, Key="k", VersionId=v2)
    assert error_of(e) == ("NoSuchVersion", 404)
    client.delete_object(Bucket=bucket, Key="k", VersionId=v1)
    assert versions(client, bucket) == []
    with pytest.raises(ClientError) as e:
        client.get_object(Bucket=bucket, Key="k")
    assert error_of(e) == ("NoSuchKey", 404)


def test_version_ids_are_checked(versioned):
    client, bucket, _ = versioned
    client.put_object(Bucket=bucket, Key="k", Body=b"x")
    for bad in ("not-a-version", "A" * 32):
        with pytest.raises(ClientError) as e:
            client.get_object(Bucket=bucket, Key="k", VersionId=bad)
        assert error_of(e) == ("InvalidArgument", 400)
    with pytest.raises(ClientError) as e:
        client.get_object(Bucket=bucket, Key="k", VersionId="0" * 32)
    assert error_of(e) == ("NoSuchVersion", 404)
    # A version that does not exist is deleted already.
    assert client.delete_object(Bucket=bucket, Key="k", VersionId="0" * 32)["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert read(client, bucket, "k") == b"x"


def test_the_null_version_before_versioning_and_while_suspended(store):
    client, _ = store
    bucket = unique_bucket_name("vn")
    client.create_bucket(Bucket=bucket)
    try:
        client.put_object(Bucket=bucket, Key="k", Body=b"before")
        # A key no marker hides says so on its 404.
        with pytest.raises(ClientError) as e:
            client.head_object(Bucket=bucket, Key="absent")
        assert e.value.response["ResponseMetadata"]["HTTPHeaders"].get("x-amz-delete-marker") == "false"
        # An unversioned bucket lists through ListObjectVersions too, with version "null".
        assert versions(client, bucket) == [("k", "null", True, False)]
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        v1 = client.put_object(Bucket=bucket, Key="k", Body=b"enabled")["VersionId"]
        assert versions(client, bucket) == [("k", v1, True, False), ("k", "null", False, False)]
        assert read(client, bucket, "k", VersionId="null") == b"before"
        # Suspended: a write replaces the null version; versions made while enabled stay.
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
        put = client.put_object(Bucket=bucket, Key="k", Body=b"suspended")
        assert put.get("VersionId") in (None, "null")
        assert versions(client, bucket) == [("k", "null", True, False), ("k", v1, False, False)]
        assert read(client, bucket, "k", VersionId="null") == b"suspended"
        client.put_object(Bucket=bucket, Key="k", Body=b"suspended again")
        assert versions(client, bucket) == [("k", "null", True, False), ("k", v1, False, False)]
        # A delete while suspended: a null delete marker in place of the null version.
        deleted = client.delete_object(Bucket=bucket, Key="k")
        assert deleted["DeleteMarker"] is True and deleted["VersionId"] == "null"
        assert versions(client, bucket) == [("k", v1, False, False), ("k", "null", True, True)]
        # Re-enabled: the null marker is kept behind a new version.
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        v2 = client.put_object(Bucket=bucket, Key="k", Body=b"again")["VersionId"]
        assert versions(client, bucket) == [("k", v2, True, False), ("k", v1, False, False), ("k", "null", False, True)]
    finally:
        remove_bucket(client, bucket)


def test_listing_versions_by_prefix_delimiter_and_pages(versioned):
    client, bucket, _ = versioned
    expected = []
    for key in ("a", "dir/x", "dir/y", "dir/sub/z", "e", "f"):
        ids = [client.put_object(Bucket=bucket, Key=key, Body=key.encode() * n)["VersionId"] for n in (1, 2)]
        expected += [(key, ids[1]), (key, ids[0])]
    client.delete_object(Bucket=bucket, Key="e")
    whole = client.list_object_versions(Bucket=bucket)
    assert whole["IsTruncated"] is False
    got = [(v["Key"], v["VersionId"]) for v in whole["Versions"]]
    # Names ascending, each name's versions newest first.
    assert got == sorted(expected, key=lambda kv: kv[0]), got
    assert [m["Key"] for m in whole["DeleteMarkers"]] == ["e"]
    # Pages of 3 (versions, markers and prefixes count alike) give the same versions in order.
    paged, markers, pages = [], [], 0
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, PaginationConfig={"PageSize": 3}):
        pages += 1
        assert len(page.get("Versions", [])) + len(page.get("DeleteMarkers", [])) + len(page.get("CommonPrefixes", [])) <= 3
        paged += [(v["Key"], v["VersionId"]) for v in page.get("Versions", [])]
        markers += [m["Key"] for m in page.get("DeleteMarkers", [])]
    assert paged == got and markers == ["e"] and pages == 5
    # A prefix and a delimiter: "dir/" keys only, "dir/sub/" grouped.
    under = client.list_object_versions(Bucket=bucket, Prefix="dir/", Delimiter="/")
    assert [p["Prefix"] for p in under["CommonPrefixes"]] == ["dir/sub/"]
    assert sorted({v["Key"] for v in under["Versions"]}) == ["dir/x", "dir/y"]
    top = client.list_object_versions(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["dir/"]
    assert sorted({v["Key"] for v in top["Versions"]}) == ["a", "e", "f"]
    # A key marker with a version marker resumes inside that key's versions.
    first_a = [v for v in whole["Versions"] if v["Key"] == "a"][0]["VersionId"]
    resumed = client.list_object_versions(Bucket=bucket, KeyMarker="a", VersionIdMarker=first_a, MaxKeys=1)
    assert [(v["Key"], v["VersionId"]) for v in resumed["Versions"]] == [expected[1]] and resumed["IsTruncated"] is True


def test_copy_from_a_version_and_multipart_uploads_make_versions(versioned):
    client, bucket, _ = versioned
    old = client.put_object(Bucket=bucket, Key="src", Body=b"old bytes")["VersionId"]
    client.put_object(Bucket=bucket, Key="src", Body=b"new bytes")
    copied = client.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src", "VersionId": old})
    assert copied["CopySourceVersionId"] == old and copied["VersionId"] not in (None, "null")
    assert read(client, bucket, "dst") == b"old bytes"
    # A delete marker cannot be the source of a copy.
    marker = client.delete_object(Bucket=bucket, Key="src")["VersionId"]
    with pytest.raises(ClientError) as e:
        client.copy_object(Bucket=bucket, Key="dst2", CopySource={"Bucket": bucket, "Key": "src", "VersionId": marker})
    assert error_of(e)[1] == 400
    with pytest.raises(ClientError) as e:
        client.copy_object(Bucket=bucket, Key="dst2", CopySource={"Bucket": bucket, "Key": "src"})
    assert error_of(e) == ("NoSuchKey", 404)
    # Multipart: the completion names the new version; the one it replaced stays.
    parts = [payload(5 * MIB, 1), payload(1000, 2)]
    up = client.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    etags = [client.upload_part(Bucket=bucket, Key="dst", UploadId=up, PartNumber=n + 1, Body=p)["ETag"] for n, p in enumerate(parts)]
    done = client.complete_multipart_upload(Bucket=bucket, Key="dst", UploadId=up, MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": e} for n, e in enumerate(etags)]})
    assert done["VersionId"] not in (None, "null", copied["VersionId"])
    assert read(client, bucket, "dst") == b"".join(parts)
    assert read(client, bucket, "dst", VersionId=copied["VersionId"]) == b"old bytes"


def test_delete_objects_by_version_and_a_bucket_with_versions_is_not_empty(store):
    client, _ = store
    bucket = unique_bucket_name("vd")
    client.create_bucket(Bucket=bucket)
    try:
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        ids = {k: [client.put_object(Bucket=bucket, Key=k, Body=b"x")["VersionId"] for _ in range(2)] for k in ("a", "b")}
        markers = client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "a"}, {"Key": "b"}]})["Deleted"]
        assert all(d["DeleteMarker"] and d["DeleteMarkerVersionId"] for d in markers)
        assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
        with pytest.raises(ClientError) as e:
            client.delete_bucket(Bucket=bucket)
        assert error_of(e) == ("BucketNotEmpty", 409)
        every = [{"Key": k, "VersionId": v} for k, vs in ids.items() for v in vs]
        every += [{"Key": d["Key"], "VersionId": d["DeleteMarkerVersionId"]} for d in markers]
        out = client.delete_objects(Bucket=bucket, Delete={"Objects": every})
        assert len(out["Deleted"]) == 6 and not out.get("Errors")
        assert sum(1 for d in out["Deleted"] if d.get("DeleteMarker")) == 2
        assert versions(client, bucket) == []
        client.delete_bucket(Bucket=bucket)
    except Exception:
        remove_bucket(client, bucket)
        raise


def test_a_versioned_put_costs_the_store_one_range_more_than_an_unversioned_one():
    with drive_and_gateway() as (client, drive, _, _):
        bucket = unique_bucket_name("vops")
        client.create_bucket(Bucket=bucket)
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        client.put_object(Bucket=bucket, Key="k", Body=b"x" * 1000)
        # As an unversioned replacement (test_store_ops.py), but the replaced version is kept
        # (one PUT) instead of its data being released (one PUT), and the newest kept version's
        # time is read off its key (one range), so the new version sorts after every other.
        again = ops_of(drive, lambda: client.put_object(Bucket=bucket, Key="k", Body=b"x" * 1000))
        assert again == {"GET": 2, "PUT": 5, "FLUSHALLDATA": 1, "DELETE": 1, "GETKEYRANGE": 1}, again


def chunk_keys(drive):
    """The data chunks (kind D) on the drive (a drive answers at most 200 keys a range: this
    module's drive holds fewer)."""
    out = subprocess.run([os.environ["SPINDLE_BIN"], "range", "s3", "s3\x01", "--max", "200", "--drive", drive, "--json"],
                         check=True, capture_output=True, text=True, timeout=60).stdout
    keys = json.loads(out)["keys"]
    assert len(keys) < 200, "the drive holds more keys than one range answers"
    return {k for k in keys if len(k) > 3 and k[3] == "D"}


def test_the_sweeper_keeps_what_versions_reference_and_takes_what_they_let_go(store):
    """Over the drive gateway, whose sweeper runs every second with a grace of one second."""
    client, drive = store
    if drive is None:
        pytest.skip("counts chunks on the drive gateway's own drive (the cluster run covers the rest)")
    bucket = unique_bucket_name("vs")
    client.create_bucket(Bucket=bucket)
    try:
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        before = chunk_keys(drive)
        bodies = [payload(300_000, 10 + i) for i in range(3)]
        ids = [client.put_object(Bucket=bucket, Key="k", Body=b)["VersionId"] for b in bodies]
        marker = client.delete_object(Bucket=bucket, Key="k")["VersionId"]
        # Several sweeps with a one-second grace pass; every version still reads back whole.
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            for vid, body in zip(ids, bodies):
                assert read(client, bucket, "k", VersionId=vid) == body
            time.sleep(0.5)
        held = chunk_keys(drive) - before
        assert len(held) >= 3, held
        # Versions removed for good let their data go; the others stay.
        client.delete_object(Bucket=bucket, Key="k", VersionId=ids[0])
        client.delete_object(Bucket=bucket, Key="k", VersionId=ids[1])
        deadline = time.monotonic() + 120
        while len(chunk_keys(drive) - before) >= len(held) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = chunk_keys(drive) - before
        assert 0 < len(left) < len(held), (len(left), len(held))
        assert read(client, bucket, "k", VersionId=ids[2]) == bodies[2]
        client.delete_object(Bucket=bucket, Key="k", VersionId=marker)
        assert read(client, bucket, "k") == bodies[2]
    finally:
        remove_bucket(client, bucket)


def test_deleting_every_version_of_a_key_at_once_leaves_none(versioned):
    """DeleteObjects naming every version and marker of a key (as tools emptying a bucket do)
    deletes them concurrently: none may survive by being made current meanwhile."""
    client, bucket, _ = versioned
    for round_ in range(4):
        ids = [client.put_object(Bucket=bucket, Key="k", Body=f"{round_}-{n}".encode())["VersionId"] for n in range(5)]
        ids.append(client.delete_object(Bucket=bucket, Key="k")["VersionId"])
        ids.append(client.put_object(Bucket=bucket, Key="k", Body=b"last")["VersionId"])
        out = client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "k", "VersionId": v} for v in ids]})
        assert len(out["Deleted"]) == len(ids) and not out.get("Errors"), out
        assert versions(client, bucket) == [], round_


def test_a_version_made_after_a_delete_marker_is_newer_than_it(versioned):
    client, bucket, _ = versioned
    client.put_object(Bucket=bucket, Key="k", Body=b"v")
    marker = client.delete_object(Bucket=bucket, Key="k")["VersionId"]
    p = client.put_object(Bucket=bucket, Key="k", Body=b"p")["VersionId"]
    q = client.put_object(Bucket=bucket, Key="k", Body=b"q")["VersionId"]
    listed = client.list_object_versions(Bucket=bucket)
    order = [(v["VersionId"], v["LastModified"]) for v in listed["Versions"]]
    assert [vid for vid, _ in order][:2] == [q, p]
    client.delete_object(Bucket=bucket, Key="k", VersionId=q)
    assert read(client, bucket, "k") == b"p"
    client.delete_object(Bucket=bucket, Key="k", VersionId=p)
    # The marker is the newest left: the key reads as deleted.
    with pytest.raises(ClientError) as e:
        client.get_object(Bucket=bucket, Key="k")
    assert error_of(e) == ("NoSuchKey", 404)
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"].get("x-amz-version-id") == marker


def test_pages_of_one_entry_with_a_delimiter_and_while_emptying(versioned):
    client, bucket, _ = versioned
    for key in ("a/1", "a/2", "b", "c/1"):
        for n in range(2):
            client.put_object(Bucket=bucket, Key=key, Body=bytes([n]))
    seen = []
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, Delimiter="/", PaginationConfig={"PageSize": 1}):
        seen += [p["Prefix"] for p in page.get("CommonPrefixes", [])] + [v["Key"] for v in page.get("Versions", [])]
    assert seen == ["a/", "b", "b", "c/"], seen
    assert client.list_object_versions(Bucket=bucket, MaxKeys=0)["IsTruncated"] is False
    # Emptying page by page, each page deleted before the next is asked for.
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, PaginationConfig={"PageSize": 3}):
        objects = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
        if objects:
            client.delete_objects(Bucket=bucket, Delete={"Objects": objects})
    assert versions(client, bucket) == []


def test_an_acl_is_set_on_the_version_named(versioned):
    client, bucket, _ = versioned
    old = client.put_object(Bucket=bucket, Key="k", Body=b"old")["VersionId"]
    client.put_object(Bucket=bucket, Key="k", Body=b"new")
    client.put_object_acl(Bucket=bucket, Key="k", VersionId=old, ACL="public-read")

    def public(**kwargs):
        grants = client.get_object_acl(Bucket=bucket, Key="k", **kwargs)["Grants"]
        return any(g["Grantee"].get("URI", "").endswith("/AllUsers") for g in grants)

    assert public(VersionId=old) and not public()
    with pytest.raises(ClientError) as e:
        client.put_object_acl(Bucket=bucket, Key="k", VersionId="0" * 32, ACL="public-read")
    assert error_of(e) == ("NoSuchVersion", 404)
