"""Streaming uploads as SDKs send them: `aws-chunked` bodies with signed chunks (the payload
signed chunk by chunk, as the Java and Go SDKs send over HTTP), signed chunks with a signed
trailer, and unsigned chunks with a checksum trailer (as recent SDKs send over HTTPS). Each
upload is sent on a socket of its own, signed here by SigV4's rules; each must store exactly
its decoded bytes, and a chunk whose signature or a trailer whose checksum is wrong must store
nothing. A plain chunked transfer encoding with no length is refused with 411, as S3 does."""

import base64
import hashlib
import hmac
import socket
import urllib.parse
import zlib

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, ENDPOINT, REGION, SECRET_KEY, error_of, payload

CHUNK = 64 * 1024


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def signing_key(date):
    key = ("AWS4" + SECRET_KEY).encode()
    for part in (date, REGION, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def crc32_b64(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def send(head, body):
    """Sends a request on a socket of its own; returns (status, response text)."""
    parsed = urllib.parse.urlsplit(ENDPOINT)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=30) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        reply = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    text = reply.decode(errors="replace")
    return int(text.split(" ", 2)[1]), text


def header_block(method, path, headers):
    host = urllib.parse.urlsplit(ENDPOINT).netloc
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k.lower() != "host")


def put_aws_chunked(path, data, signed=True, trailer=None, corrupt_chunk=None):
    """PUT PATH with DATA as an aws-chunked body: signed chunks (each chunk's signature chained
    from the request's), or unsigned ones; TRAILER (name, value) after the last chunk, signed
    when the chunks are. CORRUPT_CHUNK: the index of a chunk whose bytes change after signing."""
    pieces = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)] + [b""]
    mode = ("STREAMING-AWS4-HMAC-SHA256-PAYLOAD" if signed else "STREAMING-UNSIGNED-PAYLOAD") + ("-TRAILER" if trailer else "")
    headers = {"x-amz-content-sha256": mode, "content-encoding": "aws-chunked", "x-amz-decoded-content-length": str(len(data))}
    if trailer:
        headers["x-amz-trailer"] = trailer[0]

    def encode(chunk_sigs, trailer_sig):
        out = b""
        for piece, sig in zip(pieces, chunk_sigs):
            ext = f";chunk-signature={sig}" if signed else ""
            out += f"{len(piece):x}{ext}\r\n".encode() + piece + b"\r\n"
        if trailer:
            out = out[:-2] + f"{trailer[0]}:{trailer[1]}\r\n".encode()
            if signed:
                out += f"x-amz-trailer-signature:{trailer_sig}\r\n".encode()
            out += b"\r\n"
        return out

    headers["content-length"] = str(len(encode(["0" * 64] * len(pieces), "0" * 64)))
    request = AWSRequest(method="PUT", url=ENDPOINT + path, data=b"", headers=headers)
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(request)
    previous = request.headers["Authorization"].split("Signature=")[1]
    amz_date = request.headers["X-Amz-Date"]
    scope = f"{amz_date[:8]}/{REGION}/s3/aws4_request"
    key = signing_key(amz_date[:8])
    chunk_sigs, trailer_sig = [], ""
    for piece in pieces:
        to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous, sha256_hex(b""), sha256_hex(piece)])
        previous = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        chunk_sigs.append(previous)
    if trailer and signed:
        to_sign = "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, previous, sha256_hex(f"{trailer[0]}:{trailer[1]}\n".encode())])
        trailer_sig = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if corrupt_chunk is not None:
        piece = bytearray(pieces[corrupt_chunk])
        piece[0] ^= 0xFF
        pieces[corrupt_chunk] = bytes(piece)
    return send(header_block("PUT", path, dict(request.headers)), encode(chunk_sigs, trailer_sig))


def missing(s3, bucket, key):
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key=key)
    return error_of(e)[1] == 404


@pytest.mark.parametrize("size", [0, 1000, 3 * CHUNK + 17])
def test_signed_chunks_store_the_decoded_bytes(s3, bucket, size):
    data = payload(size, f"signed-{size}")
    status, text = put_aws_chunked(f"/{bucket}/signed", data)
    assert status == 200, text
    got = s3.get_object(Bucket=bucket, Key="signed")
    assert got["Body"].read() == data and got["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
    # aws-chunked framed the request; it is not the object's encoding.
    assert "ContentEncoding" not in got


def test_signed_chunks_with_a_signed_checksum_trailer(s3, bucket):
    data = payload(2 * CHUNK + 5, "trailer")
    status, text = put_aws_chunked(f"/{bucket}/trailed", data, trailer=("x-amz-checksum-crc32", crc32_b64(data)))
    assert status == 200, text
    assert f"x-amz-checksum-crc32: {crc32_b64(data)}" in text
    assert s3.get_object(Bucket=bucket, Key="trailed")["Body"].read() == data


def test_unsigned_chunks_with_a_checksum_trailer_as_recent_sdks_send_them(s3, bucket):
    data = payload(CHUNK + 1, "unsigned")
    status, text = put_aws_chunked(f"/{bucket}/unsigned", data, signed=False, trailer=("x-amz-checksum-crc32", crc32_b64(data)))
    assert status == 200, text
    assert s3.get_object(Bucket=bucket, Key="unsigned")["Body"].read() == data


def test_a_chunk_changed_after_signing_stores_nothing(s3, bucket):
    data = payload(3 * CHUNK, "tampered")
    status, text = put_aws_chunked(f"/{bucket}/tampered", data, corrupt_chunk=1)
    assert status in (400, 403), text
    assert missing(s3, bucket, "tampered")


def test_a_trailer_checksum_that_does_not_match_stores_nothing(s3, bucket):
    data = payload(CHUNK + 9, "bad-trailer")
    wrong = crc32_b64(data + b"x")
    status, text = put_aws_chunked(f"/{bucket}/wrong", data, signed=False, trailer=("x-amz-checksum-crc32", wrong))
    assert status == 400, text
    assert missing(s3, bucket, "wrong")


def test_plain_chunked_transfer_encoding_without_a_length_is_refused_as_s3_refuses_it(s3, bucket):
    request = AWSRequest(method="PUT", url=f"{ENDPOINT}/{bucket}/te", data=b"", headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", REGION).add_auth(request)
    headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
    headers["Transfer-Encoding"] = "chunked"
    status, text = send(header_block("PUT", f"/{bucket}/te", headers), b"5\r\nhello\r\n0\r\n\r\n")
    assert status == 411 and "<Code>MissingContentLength</Code>" in text, text
    assert missing(s3, bucket, "te")
