#!/usr/bin/env bash
# A/B comparison of two spindle builds, alternating runs so that the machine's drift hits both
# alike. Each round starts a fresh drive from BIN_A, then from BIN_B, and measures a put run
# then a get run with the given `spindle bench` options; the client is always CLIENT (default:
# target/release/spindle), so only the server differs.
#
#   scripts/bench-ab.sh BIN_A BIN_B ROUNDS [spindle bench options...]
#   e.g. scripts/bench-ab.sh /tmp/spindle-old target/release/spindle 3 --count 200000 --value-size 120
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,8p "$0"; exit 2; }
a=$1 b=$2 rounds=$3
shift 3
client=${CLIENT:-$(dirname "$0")/../target/release/spindle}
ops() { python3 -c 'import json,sys; print(int(json.load(sys.stdin)["ops_per_second"]))'; }
for _ in $(seq 1 "$rounds"); do
  for bin in "$a" "$b"; do
    dir=$(mktemp -d)
    "$bin" drive --data "$dir/data" --port 0 --tls-port 0 >"$dir/out" 2>/dev/null &
    pid=$!
    for _ in $(seq 1 100); do grep -q 'listening on' "$dir/out" && break; sleep 0.1; done
    addr=$(grep -o '127.0.0.1:[0-9]*' "$dir/out" | head -1)
    put=$("$client" bench put --drive "$addr" --json "$@" | ops)
    get=$("$client" bench get --drive "$addr" --json "$@" | ops)
    echo "$bin put $put get $get"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
  done
done
