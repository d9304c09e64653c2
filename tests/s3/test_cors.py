"""CORS through boto3 and as a browser sends it: a bucket's CORS configuration put, read and
deleted; preflight (OPTIONS) requests answered by the first rule that allows the origin, the
method and the headers, refused otherwise; actual cross-origin requests answered with the
rule's headers."""

import http.client
import urllib.parse

import pytest
from botocore.exceptions import ClientError

from conftest import ENDPOINT, error_of

RULES = [
    {"AllowedOrigins": ["https://*.example.com"], "AllowedMethods": ["GET", "HEAD"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600},
    {"ID": "uploads", "AllowedOrigins": ["https://upload.example.org"], "AllowedMethods": ["PUT", "POST"], "AllowedHeaders": ["x-amz-*", "content-type"]},
]


def request(method, path, headers):
    """An unsigned request as a browser sends it; returns (status, headers lower-cased, body)."""
    parsed = urllib.parse.urlsplit(ENDPOINT)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
    try:
        conn.request(method, path, headers=headers)
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


def test_a_cors_configuration_is_put_read_and_deleted(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.get_bucket_cors(Bucket=bucket)
    assert error_of(e) == ("NoSuchCORSConfiguration", 404)
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    got = s3.get_bucket_cors(Bucket=bucket)["CORSRules"]
    assert got[0]["AllowedOrigins"] == ["https://*.example.com"] and got[0]["MaxAgeSeconds"] == 600 and got[0]["ExposeHeaders"] == ["ETag"]
    assert got[1]["ID"] == "uploads" and got[1]["AllowedHeaders"] == ["x-amz-*", "content-type"]
    for bad in ({"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}, {"AllowedOrigins": ["https://*.*.org"], "AllowedMethods": ["GET"]}):
        with pytest.raises(ClientError) as e:
            s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [bad]})
        assert error_of(e)[1] == 400
    s3.delete_bucket_cors(Bucket=bucket)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_cors(Bucket=bucket)
    assert error_of(e) == ("NoSuchCORSConfiguration", 404)


def test_preflights_are_answered_by_the_first_rule_that_allows_them(s3, bucket):
    path = f"/{bucket}/page.html"
    # No configuration: refused.
    status, _, body = request("OPTIONS", path, {"Origin": "https://app.example.com", "Access-Control-Request-Method": "GET"})
    assert status == 403 and b"CORS is not enabled" in body
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    status, h, _ = request("OPTIONS", path, {"Origin": "https://app.example.com", "Access-Control-Request-Method": "GET"})
    assert status == 200
    assert h["access-control-allow-origin"] == "https://app.example.com" and h["access-control-allow-methods"] == "GET, HEAD"
    assert h["access-control-max-age"] == "600" and h["access-control-expose-headers"] == "ETag"
    status, h, _ = request("OPTIONS", path, {"Origin": "https://upload.example.org", "Access-Control-Request-Method": "PUT",
                                             "Access-Control-Request-Headers": "Content-Type, X-Amz-Date"})
    assert status == 200 and h["access-control-allow-headers"] == "content-type, x-amz-date"
    # A header, a method or an origin no rule allows.
    for asked in (
        {"Origin": "https://upload.example.org", "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "authorization"},
        {"Origin": "https://app.example.com", "Access-Control-Request-Method": "DELETE"},
        {"Origin": "https://evil.test", "Access-Control-Request-Method": "GET"},
    ):
        status, h, body = request("OPTIONS", path, asked)
        assert status == 403 and "access-control-allow-origin" not in h and b"not allowed" in body, asked
    status, _, _ = request("OPTIONS", path, {"Origin": "https://app.example.com"})
    assert status == 400


def test_cross_origin_answers_carry_the_rules_headers(s3, bucket):
    s3.put_object(Bucket=bucket, Key="public.txt", Body=b"shared", ACL="public-read")
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    status, h, body = request("GET", f"/{bucket}/public.txt", {"Origin": "https://app.example.com"})
    assert status == 200 and body == b"shared"
    assert h["access-control-allow-origin"] == "https://app.example.com" and h["access-control-expose-headers"] == "ETag"
    status, h, _ = request("GET", f"/{bucket}/public.txt", {"Origin": "https://evil.test"})
    assert status == 200 and "access-control-allow-origin" not in h
    # Without an Origin nothing is added.
    status, h, _ = request("GET", f"/{bucket}/public.txt", {})
    assert "access-control-allow-origin" not in h
    # A request naming the method its page's preflight asked for is matched by that method
    # (a HEAD here, which the GET rule allows), as S3 matches it.
    status, h, _ = request("HEAD", f"/{bucket}/public.txt", {"Origin": "https://upload.example.org", "Access-Control-Request-Method": "PUT"})
    assert status == 200 and h["access-control-allow-origin"] == "https://upload.example.org"
