#!/usr/bin/env bash
# Run the Java interoperability suite (interop/java: the reference Kinetic Java client
# 0.8.0.4 from Maven Central) against a Spindle drive started for the run.
#
#   scripts/java-interop.sh SPINDLE_BIN [extra mvn args, e.g. -Dtest=RangeInteropTest]
#
# Starts three drives, each `SPINDLE_BIN drive --data TMPDIR --port 0 --tls-port 0 --listen
# 127.0.0.1` on its own TMPDIR: the drive under test; a second one, the peer for the P2P tests
# (P2PInteropTest); and a third one dedicated to the security/admin tests (SecurityInteropTest),
# which change drive-wide state (ACL, PINs, lock, erase, cluster version) and so must not share
# a drive with the others. The drive under test gets a config file trusting the peer's TLS
# certificate (p2p_tls_trust). Waits for each one's first stdout line "spindle drive listening on
# 127.0.0.1:PORT [tls 127.0.0.1:TLSPORT]", runs
# `mvn -B test -Dkinetic.port=PORT -Dkinetic.tlsPort=TLSPORT -Dkinetic.peerPort=PORT2
# -Dkinetic.peerTlsPort=TLSPORT2 -Dkinetic.adminPort=PORT3 -Dkinetic.adminTlsPort=TLSPORT3`, then
# stops the drives and removes the TMPDIRs (also on error or interrupt). Exits with Maven's
# status (or 1 if a drive does not come up).
# The first run lets mvn download the client and test dependencies from Maven Central.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 SPINDLE_BIN [extra mvn args]" >&2
    exit 2
fi
spindle_bin=$1
shift
if [[ ! -x $spindle_bin ]]; then
    echo "java-interop: not an executable: $spindle_bin" >&2
    exit 2
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
startup_timeout=${SPINDLE_STARTUP_TIMEOUT:-60}

log_dir=$(mktemp -d -t spindle-interop-log.XXXXXX)
data_dirs=()
drive_pids=()
drive_names=()

stop_drive() { # PID NAME
    local pid=$1 name=$2
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "java-interop: $name did not stop on SIGTERM, sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local i
    for i in "${!drive_pids[@]}"; do
        stop_drive "${drive_pids[$i]}" "${drive_names[$i]}"
    done
    drive_pids=()
    rm -rf ${data_dirs[@]+"${data_dirs[@]}"} "$log_dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

show_drive_log() { # NAME
    echo "--- $1 stdout (last 40 lines) ---" >&2
    tail -n 40 "$log_dir/$1.out" >&2 || true
    echo "--- $1 stderr (last 40 lines) ---" >&2
    tail -n 40 "$log_dir/$1.err" >&2 || true
}

# start_drive NAME [extra drive args]: starts a drive on its own temporary data directory and
# waits until it listens; sets drive_data, drive_port and drive_tls_port (empty if it announces
# no TLS port).
start_drive() {
    local name=$1 data pid rc deadline
    shift
    data=$(mktemp -d -t "spindle-interop-$name.XXXXXX")
    data_dirs+=("$data")
    drive_data=$data
    # Created before the drive starts: the first look below can come before the background
    # job has opened them (under pipefail a missing file would end the script).
    : >"$log_dir/$name.out"
    : >"$log_dir/$name.err"
    "$spindle_bin" drive --data "$data" --port 0 --tls-port 0 --listen 127.0.0.1 "$@" \
        >"$log_dir/$name.out" 2>"$log_dir/$name.err" &
    pid=$!
    drive_pids+=("$pid")
    drive_names+=("$name")

    drive_port=
    deadline=$((SECONDS + startup_timeout))
    while [[ -z $drive_port ]]; do
        drive_port=$(sed -n -E 's/.*spindle drive listening on 127\.0\.0\.1:([0-9]+).*/\1/p' \
            "$log_dir/$name.out" | head -n 1)
        [[ -n $drive_port ]] && break
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" && rc=0 || rc=$?
            echo "java-interop: $name exited (status $rc) before it was ready" >&2
            show_drive_log "$name"
            exit 1
        fi
        if ((SECONDS >= deadline)); then
            echo "java-interop: $name not ready after ${startup_timeout}s" >&2
            show_drive_log "$name"
            exit 1
        fi
        sleep 0.1
    done
    drive_tls_port=$(sed -n -E 's/.*spindle drive listening on 127\.0\.0\.1:[0-9]+ tls 127\.0\.0\.1:([0-9]+).*/\1/p' \
        "$log_dir/$name.out" | head -n 1)
    echo "java-interop: $name pid $pid listening on 127.0.0.1:$drive_port, TLS ${drive_tls_port:-none}" >&2
}

# The peer first: the drive under test trusts the peer's (self-signed, generated at start)
# TLS certificate for pushes over TLS (p2p_tls_trust), as the reference simulator trusts any.
start_drive peer
peer_port=$drive_port peer_tls_port=$drive_tls_port
peer_cert=$drive_data/tls/cert.pem
drive_args=()
if [[ -f $peer_cert ]]; then
    printf 'p2p_tls_trust = "%s"\n' "$peer_cert" >"$log_dir/drive.toml"
    drive_args=(--config "$log_dir/drive.toml")
else
    echo "java-interop: no $peer_cert: pushes over TLS will fail" >&2
fi
start_drive drive ${drive_args[@]+"${drive_args[@]}"}
port=$drive_port tls_port=$drive_tls_port
# Dedicated to SecurityInteropTest (it skips without TLS: SECURITY and PINOP need TLS).
start_drive admin
admin_port=$drive_port admin_tls_port=$drive_tls_port

set +e
mvn -B --no-transfer-progress -f "$root/interop/java/pom.xml" test \
    -Dkinetic.host=127.0.0.1 -Dkinetic.port="$port" -Dkinetic.tlsPort="${tls_port:-0}" \
    -Dkinetic.peerHost=127.0.0.1 -Dkinetic.peerPort="$peer_port" \
    -Dkinetic.peerTlsPort="${peer_tls_port:-0}" \
    -Dkinetic.adminHost=127.0.0.1 -Dkinetic.adminPort="$admin_port" \
    -Dkinetic.adminTlsPort="${admin_tls_port:-0}" "$@"
status=$?
set -e

if [[ $status -ne 0 ]]; then
    echo "java-interop: maven exited with status $status" >&2
    show_drive_log drive
    show_drive_log peer
    show_drive_log admin
    echo "(per-test client output: interop/java/target/surefire-reports/)" >&2
fi
exit "$status"
