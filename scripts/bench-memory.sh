#!/usr/bin/env bash
# A drive's memory under repeated large values: one `spindle drive` (fjall), ROUNDS rounds of
# COUNT x 1 MiB sequential WRITEBACK puts ended by FLUSHALLDATA, then gets of the same keys
# (8 connections x 2 in flight, as bench-compare.sh's 1 MiB runs). After every run it prints
# the drive's peak (VmHWM) and current (VmRSS) resident memory and the run's MB/s, so that
# memory held after the runs (allocator retention, memtables) shows round by round.
#
#   scripts/bench-memory.sh [--spindle BIN] [--client BIN] [--rounds N] [--count N]
#
# --spindle is the drive measured; --client (default: the same binary) drives it, so two
# builds are compared with the same load generator.
set -euo pipefail
cd "$(dirname "$0")/.."
spindle_bin=target/release/spindle client_bin= rounds=3 count=2000
while [[ $# -gt 0 ]]; do
  case $1 in
    --spindle) spindle_bin=$2; shift ;;
    --client) client_bin=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --count) count=$2; shift ;;
    *) echo "bench-memory: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
client_bin=${client_bin:-$spindle_bin}
[[ -x $spindle_bin && -x $client_bin ]] || { echo "bench-memory: build first: cargo build --release -p spindle-cli" >&2; exit 1; }
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"' EXIT

# shellcheck source=servers.sh
source scripts/servers.sh

"$spindle_bin" drive --data "$work/data" --port 0 --tls-port 0 >"$work/drive.out" 2>"$work/drive.err" &
pid=$!
port=$(wait_for "$work/drive.out" 'listening on 127\.0\.0\.1:([0-9]+)')
[[ -n $port ]] || { tail_logs "$work/drive.out" "$work/drive.err"; exit 1; }

memory() { awk '/^VmHWM|^VmRSS/ {printf "%s %d MiB  ", $1, $2 / 1024}' "/proc/$pid/status"; }
run() { # OP EXTRA...
  "$client_bin" bench "$1" --drive "127.0.0.1:$port" --count "$count" --value-size 1048576 \
    --connections 8 --depth 2 "${@:2}" --json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["errors"]==0, r; print("%.0f MB/s" % r["megabytes_per_second"])'
}
for ((r = 1; r <= rounds; r++)); do
  echo "round $r: put + FLUSH $(run put --flush)  $(memory)"
  echo "round $r: get         $(run get)  $(memory)"
done
