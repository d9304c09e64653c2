"""The gateway against hostile and broken clients, and over HTTPS.

Each test starts a gateway of its own over the suite's cluster (S3_ETCD) with small limits and
short timeouts, so that what a limit does shows in seconds; every wait is for a condition,
bounded generously (a bound only a real defect exceeds), never a fixed sleep that a busy machine
could outlast. Checked:
- sockets that trickle their headers are closed at the header timeout, however steadily they
  trickle, and real clients are served meanwhile;
- when unauthenticated sockets fill their share, the oldest make room: a flood cannot lock a
  real client out, and connections that sent a signed request are never closed for it;
- one address cannot hold more than its share of unauthenticated connections (503 SlowDown);
- oversize headers, too many headers and an oversize XML body get a clear answer;
- a client that never reads its response, and an upload whose body stops, lose their
  connection at the stall timeout, leaving nothing behind, and the gateway's memory stays
  bounded while they hang;
- HTTPS with a certificate from files, and a renewed certificate served without a restart.
"""

import os
import resource
import select
import socket
import ssl
import subprocess
import time
import urllib.parse

import pytest
from botocore.exceptions import ClientError

from conftest import MIB, make_client, own_gateway, payload, unique_bucket_name

BOUND = 60  # seconds: generous bound on waits for a condition


def wait_for(condition, what, bound=BOUND):
    deadline = time.monotonic() + bound
    while not condition():
        assert time.monotonic() < deadline, f"not within {bound} s: {what}"
        time.sleep(0.2)


def raise_fd_limit(wanted):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= wanted, "cannot open enough sockets for the test"


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=BOUND)
    s.setblocking(False)
    return s


def closed_by_peer(s):
    """Whether the gateway has closed S (EOF or reset); drains whatever it sent."""
    try:
        while True:
            r, _, _ = select.select([s], [], [], 0)
            if not r:
                return False
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True


def head_of(s, bound=BOUND):
    """The head of the gateway's answer on S (its connection left open), as text."""
    s.setblocking(True)
    s.settimeout(bound)
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.setblocking(False)
    return got.decode(errors="replace")


def answer(s, bound=BOUND):
    """What the gateway answers on S (until it closes it or BOUND passes), as text."""
    return received(s, bound).decode(errors="replace")


def received(s, bound=BOUND):
    """What the gateway sends on S until it closes it or BOUND passes."""
    s.setblocking(True)
    s.settimeout(bound)
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return got


def send_all(s, data):
    s.setblocking(True)
    s.sendall(data)
    s.setblocking(False)


def presigned(s3, method, operation, extra="", **params):
    """The request line and headers of a presigned OPERATION (signed: it proves the connection)."""
    url = urllib.parse.urlsplit(s3.generate_presigned_url(operation, Params=params, ExpiresIn=600))
    return f"{method} {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n{extra}\r\n".encode()


def signed_get(s3, bucket, key):
    return presigned(s3, "GET", "get_object", Bucket=bucket, Key=key)


def read_response(s):
    """Reads one whole response with a Content-Length from S; returns (status, body)."""
    s.setblocking(True)
    s.settimeout(BOUND)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, "the gateway closed the connection"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    length = next(int(l.split(":", 1)[1]) for l in lines if l.lower().startswith("content-length:"))
    while len(body) < length:
        chunk = s.recv(65536)
        assert chunk, "the gateway closed the connection mid-body"
        body += chunk
    return int(lines[0].split()[1]), body


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


@pytest.fixture
def bucket_of():
    """Creates a bucket through a client and removes it (and its objects) after the test."""
    made = []

    def make(s3):
        name = unique_bucket_name("hostile")
        s3.create_bucket(Bucket=name)
        made.append((s3, name))
        return name

    yield make
    for s3, name in made:
        try:
            for o in s3.list_objects_v2(Bucket=name).get("Contents", []):
                s3.delete_object(Bucket=name, Key=o["Key"])
            s3.delete_bucket(Bucket=name)
        except Exception:  # the gateway is gone with its test; the suite's sweeper has the rest
            pass


def test_trickling_headers_are_cut_at_the_header_timeout_and_real_clients_are_served(bucket_of):
    raise_fd_limit(4096)
    count = 1000
    with own_gateway("--header-timeout-secs", "2", "--unproven-per-address", "5000") as (endpoint, port, _, _):
        s3 = make_client(endpoint=endpoint)
        bucket = bucket_of(s3)
        socks = [connect(port) for _ in range(count)]
        for s in socks:
            send_all(s, b"GET / HTTP/1.1\r\nHost: x\r\n")
        open_ = list(socks)
        deadline = time.monotonic() + BOUND
        # One more header byte a second to each: steady trickling does not extend the timeout.
        while open_:
            assert time.monotonic() < deadline, f"{len(open_)} of {count} trickling connections still open after {BOUND} s"
            still = []
            for s in open_:
                try:
                    send_all(s, b"X")
                except OSError:
                    s.close()
                    continue
                if closed_by_peer(s):
                    s.close()
                else:
                    still.append(s)
            open_ = still
            # Real clients are served meanwhile.
            s3.put_object(Bucket=bucket, Key="k", Body=b"v")
            assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
            time.sleep(1)


def test_an_idle_connection_is_closed_at_the_header_timeout():
    with own_gateway("--header-timeout-secs", "2") as (_, port, _, _):
        s = connect(port)
        wait_for(lambda: closed_by_peer(s), "an idle connection closed")
        s.close()


def test_a_flood_of_unauthenticated_sockets_cannot_lock_out_signed_clients(bucket_of):
    raise_fd_limit(1024)
    flags = ("--max-connections", "64", "--reserved-connections", "16", "--unproven-per-address", "1000", "--header-timeout-secs", "600")
    with own_gateway(*flags) as (endpoint, port, _, _):
        s3 = make_client(endpoint=endpoint, max_pool_connections=1)
        bucket = bucket_of(s3)
        s3.put_object(Bucket=bucket, Key="k", Body=b"value")
        # Four connections prove themselves with a signed request and stay open.
        proven = [connect(port) for _ in range(4)]
        for s in proven:
            send_all(s, signed_get(s3, bucket, "k"))
            assert read_response(s) == (200, b"value")
        # A flood, far more sockets than the unproven share (64 - 16), that never say anything:
        # the oldest of them are closed to make room for the newest.
        flood = [connect(port) for _ in range(400)]
        wait_for(lambda: sum(closed_by_peer(s) for s in flood) >= 400 - 48, "the oldest flooding sockets closed")
        # The proven connections were not touched, and a new client gets in.
        for s in proven:
            send_all(s, signed_get(s3, bucket, "k"))
            assert read_response(s) == (200, b"value")
        fresh = make_client(endpoint=endpoint)
        assert fresh.get_object(Bucket=bucket, Key="k")["Body"].read() == b"value"
        for s in proven + flood:
            s.close()


def test_a_made_up_signature_or_a_preflight_proves_nothing():
    """Connections whose requests carry an Authorization header s3s cannot verify, or that send
    CORS preflights, stay unproven: a flood of them is closed to make room like silent ones."""
    raise_fd_limit(1024)
    flags = ("--max-connections", "64", "--reserved-connections", "16", "--unproven-per-address", "1000", "--header-timeout-secs", "600")
    with own_gateway(*flags) as (_, port, _, _):
        pretending = []
        for n in range(48):
            s = connect(port)
            if n % 2:
                send_all(s, b"OPTIONS / HTTP/1.1\r\nHost: x\r\nAuthorization: made-up\r\n\r\n")
            else:
                send_all(s, b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: AWS4-HMAC-SHA256 nonsense\r\n\r\n")
            reply = head_of(s)
            assert reply.startswith("HTTP/1.1 4"), reply[:200]
            pretending.append(s)
        # Answered and kept open, each holds a place of the unproven share.
        assert not any(closed_by_peer(s) for s in pretending)
        # The share is full of them: a flood of newcomers makes room by closing the oldest (as
        # in the flood test above), these first.
        flood = [connect(port) for _ in range(400)]
        wait_for(lambda: sum(closed_by_peer(s) for s in pretending) == 48, "the pretending connections closed for newer ones")
        for s in pretending + flood:
            s.close()


def test_one_address_holds_at_most_its_share_of_unauthenticated_connections():
    with own_gateway("--unproven-per-address", "8", "--header-timeout-secs", "600") as (_, port, _, _):
        held = [connect(port) for _ in range(8)]
        extra = connect(port)
        reply = answer(extra)
        assert reply.startswith("HTTP/1.1 503") and "<Code>SlowDown</Code>" in reply, reply
        assert not any(closed_by_peer(s) for s in held)
        for s in held + [extra]:
            s.close()


def test_oversize_and_too_many_headers_get_431():
    with own_gateway() as (_, port, _, _):
        s = connect(port)
        send_all(s, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (100 * 1024) + b"\r\n\r\n")
        reply = answer(s)
        assert reply.startswith("HTTP/1.1 431"), reply[:200]
        s.close()
        s = connect(port)
        send_all(s, b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(150)) + b"\r\n")
        reply = answer(s)
        assert reply.startswith("HTTP/1.1 431"), reply[:200]
        s.close()


def test_an_oversize_xml_body_gets_a_clear_error(bucket_of):
    with own_gateway() as (endpoint, port, _, _):
        s3 = make_client(endpoint=endpoint)
        bucket = bucket_of(s3)
        upload = s3.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
        part = b'<Part><PartNumber>1</PartNumber><ETag>"0123456789abcdef0123456789abcdef"</ETag></Part>'
        body = b"<CompleteMultipartUpload>" + part * (40 * MIB // len(part)) + b"</CompleteMultipartUpload>"
        s = connect(port)
        send_all(s, presigned(s3, "POST", "complete_multipart_upload", f"Content-Length: {len(body)}\r\n", Bucket=bucket, Key="big", UploadId=upload))
        try:
            send_all(s, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered and closed before the rest was sent
        reply = answer(s)
        assert reply.startswith("HTTP/1.1 400") and "<Code>MaxMessageLengthExceeded</Code>" in reply, reply[:500]
        s.close()
        # The gateway is unharmed and the upload untouched.
        s3.abort_multipart_upload(Bucket=bucket, Key="big", UploadId=upload)
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_clients_that_never_read_lose_their_connection_and_memory_stays_bounded(bucket_of):
    size = 32 * MIB
    clients = 16
    with own_gateway("--stall-timeout-secs", "2") as (endpoint, port, process, _):
        s3 = make_client(endpoint=endpoint)
        bucket = bucket_of(s3)
        s3.put_object(Bucket=bucket, Key="big", Body=payload(size, "never-read"))
        before = rss_kib(process.pid)
        socks = []
        for _ in range(clients):
            s = connect(port)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            send_all(s, signed_get(s3, bucket, "big"))
            socks.append(s)
        # The clients read nothing. The gateway gives their connections up (its sockets on the
        # port are no longer its own: closed, left to the kernel to finish), holding a few
        # chunks per transfer meanwhile, not the objects.
        peak = rss_kib(process.pid)

        def served():
            nonlocal peak
            peak = max(peak, rss_kib(process.pid))
            return gateway_connections(process.pid, port)

        wait_for(lambda: served() == 0, f"the gateway gave up {clients} clients that read nothing")
        grown_mib = (peak - before) / 1024
        assert grown_mib < clients * 16, f"the gateway grew by {grown_mib:.0f} MiB for {clients} stalled transfers of {size // MIB} MiB"
        # What each got, read now, falls short of the object: the transfer was cut.
        for i, s in enumerate(socks):
            got = len(received(s))
            assert got < size, f"client {i} received the whole object: the transfer was not cut"
            s.close()
        # Served as usual afterwards.
        assert s3.head_object(Bucket=bucket, Key="big")["ContentLength"] == size


def gateway_connections(pid, port):
    """The established connections on PORT that process PID still holds."""
    out = subprocess.run(["ss", "-Htnp", "state", "established", f"( sport = :{port} )"], check=True, capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if f"pid={pid}," in line)


def test_an_upload_whose_body_stops_loses_its_connection_and_stores_nothing(bucket_of):
    with own_gateway("--stall-timeout-secs", "2") as (endpoint, port, _, _):
        s3 = make_client(endpoint=endpoint)
        bucket = bucket_of(s3)
        s = connect(port)
        send_all(s, presigned(s3, "PUT", "put_object", f"Content-Length: {MIB}\r\n", Bucket=bucket, Key="stalled") + b"x" * 1000)
        reply = answer(s)
        assert reply == "" or reply.startswith("HTTP/1.1 4") or reply.startswith("HTTP/1.1 5"), reply[:300]
        s.close()
        with pytest.raises(ClientError) as e:
            s3.head_object(Bucket=bucket, Key="stalled")
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def make_certificate(directory, name):
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    new_cert, new_key = cert + ".new", key + ".new"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", new_key, "-out", new_cert, "-days", "2", "-subj", f"/CN={name}",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    # Renamed into place, key first: a reload sees the old pair or the new one (a mismatched
    # pair in between is refused and tried again).
    os.replace(new_key, key)
    os.replace(new_cert, cert)
    return cert, key


def served_certificate(port):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND) as raw:
        with context.wrap_socket(raw) as tls:
            return ssl.DER_cert_to_PEM_cert(tls.getpeercert(binary_form=True))


def same_certificate(pem_a, pem_b):
    return ssl.PEM_cert_to_DER_cert(pem_a) == ssl.PEM_cert_to_DER_cert(pem_b)


def test_https_and_a_renewed_certificate_without_a_restart(tmp_path, bucket_of):
    cert, key = make_certificate(str(tmp_path), "spindle-first")
    with own_gateway("--tls-cert", cert, "--tls-key", key, scheme="https") as (endpoint, port, process, output):
        s3 = make_client(endpoint=endpoint, verify=cert)
        bucket = bucket_of(s3)
        body = payload(3 * MIB + 5, "https")
        s3.put_object(Bucket=bucket, Key="k", Body=body)
        assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == body
        # Plain HTTP on the HTTPS port is not served.
        with pytest.raises(Exception):
            make_client(endpoint=f"http://127.0.0.1:{port}", connect_timeout=5, read_timeout=5).list_buckets()
        # An unknown certificate is refused by a verifying client.
        with pytest.raises(Exception):
            make_client(endpoint=endpoint).list_buckets()
        with open(cert) as f:
            first = f.read()
        assert same_certificate(served_certificate(port), first)

        renewed, _ = make_certificate(str(tmp_path), "spindle-renewed")
        with open(renewed) as f:
            second = f.read()
        wait_for(lambda: same_certificate(served_certificate(port), second), "the renewed certificate served")
        assert process.poll() is None, "the gateway restarted"
        assert "TLS certificate reloaded" in output()
        s3 = make_client(endpoint=endpoint, verify=cert)
        assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == body
