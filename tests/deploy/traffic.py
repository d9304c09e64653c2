"""S3 traffic for the multi-host deployment test (scripts/deploy-test.sh), through boto3.

Gateways are given as a list, tried in turn as a load balancer would (the next one when a
gateway does not answer). Every write is retried until acknowledged, for a bounded time, and
recorded in a manifest (one JSON line per acknowledged object: key, size, SHA-256) only once
acknowledged; `verify` reads every recorded object back and compares.

    traffic.py --gateways URL[,URL] --ca CA.pem --key AK:SK mb BUCKET
    traffic.py ... put BUCKET PREFIX COUNT MANIFEST
    traffic.py ... verify BUCKET MANIFEST
    traffic.py ... denied BUCKET KEY        (the key must be refused: 403)
    traffic.py ... anonymous BUCKET KEY     (an unsigned GET must be refused: 403)
"""

import argparse
import hashlib
import json
import random
import sys
import time
import urllib.request
import ssl

import boto3
import botocore.config
import botocore.exceptions

# Each operation is retried this long (seconds) before the run fails: a real defect exceeds it,
# a gateway or drive taking a few seconds to notice a lost host does not.
OP_BOUND = 180
# Objects up to this size, some over the gateway's 1 MiB chunk.
MAX_SIZE = 1_600_000


def clients(args):
    ak, sk = args.key.split(":", 1)
    config = botocore.config.Config(
        connect_timeout=5, read_timeout=30, retries={"max_attempts": 1}, s3={"addressing_style": "path"}
    )
    return [
        boto3.client(
            "s3", endpoint_url=url, aws_access_key_id=ak, aws_secret_access_key=sk,
            region_name="us-east-1", verify=args.ca, config=config,
        )
        for url in args.gateways.split(",")
    ]


# The gateway that answered last: a load balancer stops sending to one that fails.
current = 0


def retried(gateways, what, op):
    """op(client) on the gateways in turn until it succeeds or OP_BOUND passes."""
    global current
    deadline = time.monotonic() + OP_BOUND
    while True:
        client = gateways[current % len(gateways)]
        try:
            return op(client)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
            if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoSuchKey", "NoSuchBucket"):
                raise
            if time.monotonic() > deadline:
                sys.exit(f"{what}: still failing after {OP_BOUND}s: {e}")
            current += 1
            time.sleep(0.5)


def put(args, gateways):
    rng = random.Random(f"{args.prefix}")
    started, slowest = time.monotonic(), 0.0
    with open(args.manifest, "a") as manifest:
        for i in range(args.count):
            key = f"{args.prefix}/{i:05d}"
            size = rng.choice([0, 1, 4096, rng.randrange(1, MAX_SIZE)])
            body = rng.randbytes(size)
            began = time.monotonic()
            retried(gateways, f"put {key}", lambda c: c.put_object(Bucket=args.bucket, Key=key, Body=body))
            slowest = max(slowest, time.monotonic() - began)
            manifest.write(json.dumps({"key": key, "size": size, "sha256": hashlib.sha256(body).hexdigest()}) + "\n")
            manifest.flush()
    print(f"put {args.count} objects under {args.prefix}/ in {time.monotonic() - started:.1f} s, the slowest {slowest:.1f} s")


def verify(args, gateways):
    with open(args.manifest) as f:
        wanted = [json.loads(line) for line in f if line.strip()]
    for w in wanted:
        body = retried(gateways, f"get {w['key']}", lambda c: c.get_object(Bucket=args.bucket, Key=w["key"])["Body"].read())
        got = hashlib.sha256(body).hexdigest()
        if len(body) != w["size"] or got != w["sha256"]:
            sys.exit(f"{w['key']}: read {len(body)} bytes sha256 {got}, acknowledged {w['size']} bytes sha256 {w['sha256']}")
    print(f"verified {len(wanted)} acknowledged objects")


def denied(args, gateways):
    """Every gateway refuses this key reading, listing and writing the bucket (403 AccessDenied)."""
    for c in gateways:
        for what, call in [
            ("read", lambda: c.get_object(Bucket=args.bucket, Key=args.object)),
            ("list", lambda: c.list_objects_v2(Bucket=args.bucket)),
            ("write", lambda: c.put_object(Bucket=args.bucket, Key=args.object, Body=b"intruder")),
        ]:
            try:
                call()
            except botocore.exceptions.ClientError as e:
                status = e.response["ResponseMetadata"]["HTTPStatusCode"]
                if status != 403:
                    sys.exit(f"{c.meta.endpoint_url}: a {what} answered {status}, not 403: {e}")
                continue
            sys.exit(f"{c.meta.endpoint_url}: a {what} of {args.bucket} was served to a key without access")
    print("refused")


def anonymous(args, _gateways):
    context = ssl.create_default_context(cafile=args.ca)
    for url in args.gateways.split(","):
        try:
            urllib.request.urlopen(f"{url}/{args.bucket}/{args.object}", context=context, timeout=30)
        except urllib.error.HTTPError as e:
            if e.code != 403:
                sys.exit(f"{url}: an unsigned GET answered {e.code}, not 403")
            continue
        sys.exit(f"{url}: served {args.bucket}/{args.object} to an unsigned request")
    print("refused")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gateways", required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--key", required=True)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("mb").add_argument("bucket")
    s = sub.add_parser("put")
    for a in ("bucket", "prefix"):
        s.add_argument(a)
    s.add_argument("count", type=int)
    s.add_argument("manifest")
    s = sub.add_parser("verify")
    s.add_argument("bucket")
    s.add_argument("manifest")
    for name in ("denied", "anonymous"):
        s = sub.add_parser(name)
        s.add_argument("bucket")
        s.add_argument("object")
    args = p.parse_args()
    gateways = clients(args)
    if args.cmd == "mb":
        def create(c):
            try:
                c.create_bucket(Bucket=args.bucket)
            except botocore.exceptions.ClientError as e:
                # An attempt that created it but whose answer was lost.
                if e.response["Error"]["Code"] != "BucketAlreadyOwnedByYou":
                    raise

        retried(gateways, f"create {args.bucket}", create)
        print(f"created {args.bucket}")
    else:
        {"put": put, "verify": verify, "denied": denied, "anonymous": anonymous}[args.cmd](args, gateways)


if __name__ == "__main__":
    main()
