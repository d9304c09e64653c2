"""Browser form uploads (POST object) with policy documents, made by boto3's
generate_presigned_post and sent as a browser sends a form: the object is stored with the
form's fields, the policy's conditions and expiry hold, a form whose signature does not match
stores nothing, and a file past the gateway's form limit is refused with bounded memory."""

import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import ENDPOINT, error_of, payload

# crates/s3/src/admission.rs: MAX_POST_FILE, FORMS_AT_ONCE.
MAX_POST_FILE = 16 * 1024 * 1024
FORMS_AT_ONCE = 8


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


def test_a_form_is_decided_by_its_key(s3, bucket):
    """A form names its key in the form, and is decided as the PutObject of that key: a bucket
    policy letting anyone write under open/ takes an anonymous form there and nowhere else."""
    policy = {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{bucket}/open/*"}]}
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))
    anonymous = {"url": f"{ENDPOINT}/{bucket}", "fields": {}}
    status, text = send_form(anonymous, b"allowed", extra={"key": "open/x"})
    assert status == 204, text
    assert s3.get_object(Bucket=bucket, Key="open/x")["Body"].read() == b"allowed"
    status, text = send_form(anonymous, b"denied", extra={"key": "closed/x"})
    assert status == 403 and "AccessDenied" in text, text
    assert absent(s3, bucket, "closed/x")


def test_binary_files_of_every_shape_go_up_whole(s3, bucket):
    """Files whose bytes hold carriage returns at every place a read may end (s3s' form parser
    failed such files when a read ended in part of the boundary: the gateway hands it small
    frames)."""
    post = s3.generate_presigned_post(bucket, "forms/binary", ExpiresIn=300)
    for seed in range(8):
        data = payload(1024 * 1024 + seed, f"s{seed}")
        status, text = send_form(post, data)
        assert status == 204, (seed, text)
        assert s3.get_object(Bucket=bucket, Key="forms/binary")["Body"].read() == data, seed


def test_only_a_few_forms_are_held_at_once(s3, bucket):
    """Form uploads are held in memory: past FORMS_AT_ONCE in progress, another is answered
    503 SlowDown at once; once they end, forms are taken again."""
    parsed = urllib.parse.urlsplit(ENDPOINT)
    post = s3.generate_presigned_post(bucket, "forms/held", ExpiresIn=300)

    def stall():
        """A form whose head is sent and whose body never comes: it holds a place."""
        sock = socket.create_connection((parsed.hostname, parsed.port), timeout=30)
        head = (f"POST /{bucket} HTTP/1.1\r\nHost: {parsed.netloc}\r\nContent-Type: multipart/form-data; boundary=xyz\r\n"
                f"Content-Length: 1000000\r\n\r\n--xyz\r\n")
        sock.sendall(head.encode())
        return sock

    def answered(sock):
        """Whether the gateway answered a stalled form (it found no place when it came)."""
        sock.setblocking(False)
        try:
            sock.recv(1, socket.MSG_PEEK)  # an answer, or the connection closed
            return True
        except BlockingIOError:
            return False
        finally:
            sock.setblocking(True)

    stalled = [stall() for _ in range(FORMS_AT_ONCE)]
    try:
        # Each stalled form holds its place once the gateway has read its head; one that came
        # while an earlier form still held a place was answered and is stalled again. Waited
        # for with a bound only a defect exceeds.
        deadline = time.monotonic() + 60
        while True:
            status, text = send_form(post, b"one too many")
            if status == 503:
                break
            assert time.monotonic() < deadline, f"a form was taken while {FORMS_AT_ONCE} were held: {status} {text}"
            for i, sock in enumerate(stalled):
                if answered(sock):
                    sock.close()
                    stalled[i] = stall()
            time.sleep(0.2)
        assert "SlowDown" in text
    finally:
        for sock in stalled:
            sock.close()
    deadline = time.monotonic() + 60
    while (status := send_form(post, b"taken again")[0]) != 204:
        assert status == 503 and time.monotonic() < deadline, status
        time.sleep(0.2)
    assert s3.get_object(Bucket=bucket, Key="forms/held")["Body"].read() == b"taken again"
