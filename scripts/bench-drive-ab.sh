#!/usr/bin/env bash
# A/B comparison of two builds of the drive serving GETs: one drive from BIN_A and one from
# BIN_B, each loaded with the same COUNT values of SIZE bytes (default: a 4+2 shard of a 1 MiB
# stripe, 262,160 bytes), then read back at random by `spindle bench get` from CLIENT (default
# BIN_A), six passes a round, the side that goes first alternating by round. Printed per round
# and side: MB/s of the last pass and the drive's CPU per GiB served (from /proc); then each
# side's medians and B's over A's.
#
#   scripts/bench-drive-ab.sh BIN_A BIN_B [--rounds 6] [--count 2000] [--size 262160]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ $# -ge 2 ] || { sed -n 2,9p "$0" >&2; exit 2; }
bin_a=$(realpath "$1") bin_b=$(realpath "$2") client=$(realpath "${CLIENT:-$1}")
shift 2
rounds=6 count=2000 size=262160 passes=6
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --count) count=$2; shift ;;
    --size) size=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$root/target"
work=$(mktemp -d "$root/target/bench-drive-ab.XXXXXX")
log() { echo "bench-drive-ab: $*" >&2; }
# shellcheck source=servers.sh
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

declare -A pid port
for side in a b; do
  bin=$bin_a
  [ $side = b ] && bin=$bin_b
  start_drive "drive-$side" "$bin"
  pid[$side]=$drive_pid port[$side]=$drive_port
  "$client" bench put --drive "127.0.0.1:$drive_port" --count "$count" --value-size "$size" --connections 4 --depth 4 --flush >/dev/null
done
sync

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
results=$work/results.tsv
: >"$results"
for round in $(seq 1 "$rounds"); do
  order="a b"
  ((round % 2 == 0)) && order="b a"
  for side in $order; do
    before=$(cpu_ticks "${pid[$side]}")
    for _ in $(seq 1 "$passes"); do
      json=$("$client" bench get --drive "127.0.0.1:${port[$side]}" --count "$count" --value-size "$size" --connections 4 --depth 4 --order random --json)
    done
    after=$(cpu_ticks "${pid[$side]}")
    python3 - "$json" "$((after - before))" "$(getconf CLK_TCK)" "$((passes * count * size))" "$round" "$side" >>"$results" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
ticks, hz, moved, rnd, side = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
if r["errors"]:
    sys.exit(f"{side}: {r['errors']} errors in round {rnd}")
print(f"{rnd}\t{side}\t{r['megabytes_per_second']:.0f}\t{ticks / hz / (moved / 2**30):.4f}")
PY
  done
done
python3 - "$results" "$bin_a" "$bin_b" "$rounds" "$size" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
print(f"A = {sys.argv[2]}, B = {sys.argv[3]}; GETs of {sys.argv[5]}-byte values, medians of {sys.argv[4]} rounds\n")
print("| round | side | MB/s | drive CPU s/GiB |")
print("|--:|---|--:|--:|")
for r in rows:
    print(f"| {r[0]} | {r[1].upper()} | {r[2]} | {r[3]} |")
med = {s: [statistics.median(float(r[i]) for r in rows if r[1] == s) for i in (2, 3)] for s in "ab"}
print(f"\n| | MB/s | drive CPU s/GiB |\n|---|--:|--:|")
for s in "ab":
    print(f"| {s.upper()} | {med[s][0]:.0f} | {med[s][1]:.4f} |")
print(f"| **B ÷ A** | {med['b'][0] / med['a'][0]:.2f}× | {med['b'][1] / med['a'][1]:.2f}× |")
PY
