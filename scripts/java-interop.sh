#!/usr/bin/env bash
# Run the Java interoperability suite (interop/java: the reference Kinetic Java client
# 0.8.0.4 from Maven Central) against a Spindle drive started for the run.
#
#   scripts/java-interop.sh SPINDLE_BIN [extra mvn args, e.g. -Dtest=RangeInteropTest]
#
# Starts `SPINDLE_BIN drive --data TMPDIR --port 0 --tls-port 0 --listen 127.0.0.1`, waits for
# the first stdout line "spindle drive listening on 127.0.0.1:PORT", runs
# `mvn -B test -Dkinetic.port=PORT`, then stops the drive and removes TMPDIR (also on error or
# interrupt). Exits with Maven's status (or 1 if the drive does not come up).
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

data_dir=$(mktemp -d -t spindle-interop-data.XXXXXX)
log_dir=$(mktemp -d -t spindle-interop-log.XXXXXX)
drive_pid=

stop_drive() {
    if [[ -n $drive_pid ]] && kill -0 "$drive_pid" 2>/dev/null; then
        kill -TERM "$drive_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$drive_pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$drive_pid" 2>/dev/null; then
            echo "java-interop: drive did not stop on SIGTERM, sending SIGKILL" >&2
            kill -KILL "$drive_pid" 2>/dev/null || true
        fi
        wait "$drive_pid" 2>/dev/null || true
    fi
    drive_pid=
}

cleanup() {
    stop_drive
    rm -rf "$data_dir" "$log_dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

show_drive_log() {
    echo "--- drive stdout (last 40 lines) ---" >&2
    tail -n 40 "$log_dir/drive.out" >&2 || true
    echo "--- drive stderr (last 40 lines) ---" >&2
    tail -n 40 "$log_dir/drive.err" >&2 || true
}

"$spindle_bin" drive --data "$data_dir" --port 0 --tls-port 0 --listen 127.0.0.1 \
    >"$log_dir/drive.out" 2>"$log_dir/drive.err" &
drive_pid=$!

port=
deadline=$((SECONDS + startup_timeout))
while [[ -z $port ]]; do
    port=$(sed -n -E 's/.*spindle drive listening on 127\.0\.0\.1:([0-9]+).*/\1/p' \
        "$log_dir/drive.out" | head -n 1)
    [[ -n $port ]] && break
    if ! kill -0 "$drive_pid" 2>/dev/null; then
        wait "$drive_pid" && rc=0 || rc=$?
        drive_pid=
        echo "java-interop: drive exited (status $rc) before it was ready" >&2
        show_drive_log
        exit 1
    fi
    if ((SECONDS >= deadline)); then
        echo "java-interop: drive not ready after ${startup_timeout}s" >&2
        show_drive_log
        exit 1
    fi
    sleep 0.1
done
tls_port=$(sed -n -E 's/.*spindle drive listening on 127\.0\.0\.1:[0-9]+ tls 127\.0\.0\.1:([0-9]+).*/\1/p' \
    "$log_dir/drive.out" | head -n 1)
echo "java-interop: drive pid $drive_pid listening on 127.0.0.1:$port, TLS ${tls_port:-none}" >&2

set +e
mvn -B --no-transfer-progress -f "$root/interop/java/pom.xml" test \
    -Dkinetic.host=127.0.0.1 -Dkinetic.port="$port" -Dkinetic.tlsPort="${tls_port:-0}" "$@"
status=$?
set -e

if [[ $status -ne 0 ]]; then
    echo "java-interop: maven exited with status $status" >&2
    show_drive_log
    echo "(per-test client output: interop/java/target/surefire-reports/)" >&2
fi
exit "$status"
