"""Browser form uploads (POST object) with policy documents, made by boto3's
generate_presigned_post and sent as a browser sends a form: the object is stored with the
form's fields, the policy's conditions and expiry hold, a form whose signature does not match
stores nothing, and a file past the gateway's form limit is refused with bounded memory."""

import time
import urllib.error
import urllib.request
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import error_of, payload

# crates/s3/src/admission.rs: MAX_POST_FILE.
MAX_POST_FILE = 16 * 1024 * 1024


def send_form(post, data, extra=None, filename="hello.txt"):
    """POSTs the form of POST (url, fields) with DATA as its file; returns (status, body)."""
    fields = dict(post["fields"])
    fields.update(extra or {})
    boundary = "----spindle" + uuid.uuid4().hex
    body = b""
    for name, value in fields.items():
        body += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
    body += f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode()
    body += data + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(post["url"], data=body, method="POST", headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def absent(s3, bucket, key):
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key=key)
    return error_of(e)[1] == 404


def test_a_form_upload_stores_the_file_with_the_forms_fields(s3, bucket):
    post = s3.generate_presigned_post(bucket, "forms/report.txt", Fields={"Content-Type": "text/plain"}, Conditions=[{"Content-Type": "text/plain"}], ExpiresIn=300)
    status, text = send_form(post, b"filled in by a browser")
    assert status == 204, text
    got = s3.get_object(Bucket=bucket, Key="forms/report.txt")
    assert got["Body"].read() == b"filled in by a browser" and got["ContentType"] == "text/plain"


def test_success_action_status_201_answers_where_the_object_is(s3, bucket):
    post = s3.generate_presigned_post(bucket, "forms/created", Fields={"success_action_status": "201"}, Conditions=[{"success_action_status": "201"}], ExpiresIn=300)
    status, text = send_form(post, b"x" * 10)
    assert status == 201, text
    assert "<Key>forms/created</Key>" in text and f"<Bucket>{bucket}</Bucket>" in text


def test_the_policys_conditions_hold(s3, bucket):
    sized = s3.generate_presigned_post(bucket, "forms/small", Conditions=[["content-length-range", 1, 10]], ExpiresIn=300)
    status, text = send_form(sized, b"x" * 100)
    assert status == 400 and "EntityTooLarge" in text, text
    assert absent(s3, bucket, "forms/small")
    # A key ending in ${filename} makes boto3 ask for the key's prefix rather than the key.
    prefixed = s3.generate_presigned_post(bucket, "forms/${filename}", ExpiresIn=300)
    status, text = send_form(prefixed, b"x", extra={"key": "elsewhere/out"})
    assert status == 400 and "InvalidPolicyDocument" in text, text
    assert absent(s3, bucket, "elsewhere/out")
    # Within its conditions the same form is taken.
    status, text = send_form(prefixed, b"x", extra={"key": "forms/other"})
    assert status == 204, text
    assert s3.get_object(Bucket=bucket, Key="forms/other")["Body"].read() == b"x"


def test_an_expired_or_forged_form_stores_nothing(s3, bucket):
    expired = s3.generate_presigned_post(bucket, "forms/late", ExpiresIn=1)
    time.sleep(2)
    status, text = send_form(expired, b"late")
    assert status == 403, text
    forged = s3.generate_presigned_post(bucket, "forms/forged", ExpiresIn=300)
    forged["fields"]["x-amz-signature"] = "0" * 64
    status, text = send_form(forged, b"forged")
    assert status == 403 and "SignatureDoesNotMatch" in text, text
    for key in ("forms/late", "forms/forged"):
        assert absent(s3, bucket, key)


def test_a_file_past_the_form_limit_is_refused(s3, bucket):
    """s3s holds a form's file in memory: past MAX_POST_FILE it stops reading and refuses (the
    client may see the refusal, or its connection closed while it still sends); nothing is
    stored and the gateway serves on."""
    post = s3.generate_presigned_post(bucket, "forms/huge", ExpiresIn=300)
    try:
        status, text = send_form(post, payload(MAX_POST_FILE + 1, "huge"))
        assert status == 400 and "EntityTooLarge" in text, text
    except urllib.error.URLError as e:
        assert isinstance(e.reason, (BrokenPipeError, ConnectionResetError)), e
    assert absent(s3, bucket, "forms/huge")
    # At the limit it is taken.
    status, text = send_form(post, payload(MAX_POST_FILE, "at-limit"))
    assert status == 204, text
    assert s3.head_object(Bucket=bucket, Key="forms/huge")["ContentLength"] == MAX_POST_FILE
