#!/usr/bin/env bash
# Run the Java interoperability suite (interop/java: the reference Kinetic Java client
# 0.8.0.4 from Maven Central) against a Spindle drive started for the run.
#
#   scripts/java-interop.sh SPINDLE_BIN [extra mvn args, e.g. -Dtest=RangeInteropTest]
#
# Starts three drives (scripts/servers.sh's start_drive: `SPINDLE_BIN drive --data DIR
# --port 0 --tls-port 0 --listen 127.0.0.1`), each on its own data directory: the drive under test; a second one, the peer for the P2P tests
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
work=$log_dir
log() { echo "java-interop: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=servers.sh
source "$root/scripts/servers.sh"
server_start_timeout=$startup_timeout
trap 'stop_servers; rm -rf "$log_dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_interop_drive NAME [extra drive args]: a drive on its own data directory (under the
# log directory); sets drive_data, drive_port and drive_tls_port.
start_interop_drive() {
    local name=$1
    shift
    start_drive "$name" "$spindle_bin" "$@"
    drive_data=$work/$name/data
    log "$name pid $drive_pid listening on 127.0.0.1:$drive_port, TLS ${drive_tls_port:-none}"
}

# The peer first: the drive under test trusts the peer's (self-signed, generated at start)
# TLS certificate for pushes over TLS (p2p_tls_trust), as the reference simulator trusts any.
start_interop_drive peer
peer_port=$drive_port peer_tls_port=$drive_tls_port
peer_cert=$drive_data/tls/cert.pem
drive_args=()
if [[ -f $peer_cert ]]; then
    printf 'p2p_tls_trust = "%s"\n' "$peer_cert" >"$log_dir/drive.toml"
    drive_args=(--config "$log_dir/drive.toml")
else
    echo "java-interop: no $peer_cert: pushes over TLS will fail" >&2
fi
start_interop_drive drive ${drive_args[@]+"${drive_args[@]}"}
port=$drive_port tls_port=$drive_tls_port
# Dedicated to SecurityInteropTest (it skips without TLS: SECURITY and PINOP need TLS).
start_interop_drive admin
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
    tail_logs "$work/drive.out" "$work/drive.err" "$work/peer.out" "$work/peer.err" "$work/admin.out" "$work/admin.err"
    echo "(per-test client output: interop/java/target/surefire-reports/)" >&2
fi
exit "$status"
