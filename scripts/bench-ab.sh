#!/usr/bin/env bash
# A/B comparison of two spindle builds, alternating runs so that the machine's drift hits both
# alike. Each round starts a fresh drive from BIN_A, then from BIN_B, and measures a put run
# then a get run with the given `spindle bench` options; the client is always CLIENT (default:
# target/release/spindle), so only the server differs. Besides ops/s it prints the drive's CPU
# time per operation (from /proc, 10 ms ticks), which moves less with the machine's noise; the
# put figure is read 1 s after the run, so it includes the flushes the puts caused.
# PRELOAD=SIZE first puts the same keys with SIZE-byte values (not measured): small puts over
# large values, the overwrite case.
#
#   scripts/bench-ab.sh BIN_A BIN_B ROUNDS [spindle bench options...]
#   e.g. scripts/bench-ab.sh /tmp/spindle-old target/release/spindle 3 --count 200000 --value-size 120
#        PRELOAD=4096 scripts/bench-ab.sh OLD NEW 2 --count 200000 --value-size 120
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,15p "$0"; exit 2; }
a=$1 b=$2 rounds=$3
shift 3
client=${CLIENT:-$(dirname "$0")/../target/release/spindle}
ops() { python3 -c 'import json,sys; print(int(json.load(sys.stdin)["ops_per_second"]))'; }
count=$(printf '%s\n' "$@" | grep -A1 -x -- --count | tail -1)
[[ $count =~ ^[0-9]+$ ]] || count=10000 # spindle bench's default
# The same options with the value size replaced, for PRELOAD.
preload_args=()
skip=0
for arg in "$@"; do
  if [ $skip = 1 ]; then skip=0; continue; fi
  if [ "$arg" = --value-size ]; then skip=1; continue; fi
  preload_args+=("$arg")
done
log() { echo "bench-ab: $*" >&2; }
die() { log "$*"; exit 1; }
work=$(mktemp -d)
# shellcheck source=servers.sh
source "$(dirname "$0")/servers.sh"
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
per_op() { python3 -c "import sys; print(round((int(sys.argv[2]) - int(sys.argv[1])) * 1e4 / int(sys.argv[3]), 2))" "$@"; }
for round in $(seq 1 "$rounds"); do
  for side in a b; do
    if [ $side = a ]; then bin=$a; else bin=$b; fi
    start_drive "$side$round" "$bin"
    pid=$drive_pid addr=127.0.0.1:$drive_port
    if [ -n "${PRELOAD:-}" ]; then
      "$client" bench put --drive "$addr" "${preload_args[@]}" --value-size "$PRELOAD" >/dev/null
      sleep 1
    fi
    c0=$(cpu_ticks "$pid")
    put=$("$client" bench put --drive "$addr" --json "$@" | ops)
    sleep 1
    c1=$(cpu_ticks "$pid")
    get=$("$client" bench get --drive "$addr" --json "$@" | ops)
    c2=$(cpu_ticks "$pid")
    echo "$bin put $put get $get drive-cpu-us/put $(per_op "$c0" "$c1" "$count") drive-cpu-us/get $(per_op "$c1" "$c2" "$count")"
    stop_pid "$pid" "drive $side" 10
    rm -rf "$work/$side$round"
  done
done
