#!/usr/bin/env bash
# The Kinetic paper's P2P experiment, Spindle and the reference Java simulator side by side:
# for each value size, N pairs are loaded on a source drive, then moved to a target drive once
# by a client putting them and once by the source pushing them (PEER2PEERPUSH). Two Spindle
# drives and two simulators (scripts/java-simulator.sh: loopback only, heartbeat off) run on
# this machine; the pair not being measured is paused (SIGSTOP).
#
#   scripts/bench-p2p.sh [--quick] [--repeat R] [--spindle BIN] [--out FILE]
#
# Prints a Markdown table (and writes it to FILE) with MB/s of client put and of push per
# system, push/put per system, and Spindle push / simulator push.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
quick=0 spindle_bin= out= repeat=3
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1; repeat=1 ;;
    --repeat) repeat=$2; shift ;;
    --spindle) spindle_bin=$2; shift ;;
    --out) out=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$spindle_bin" ]; then
  cargo build --release -p spindle-cli >&2
  spindle_bin=$root/target/release/spindle
fi
work=$(mktemp -d)
log() { echo "bench-p2p: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=servers.sh
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

start_drive spindle-a "$spindle_bin"
sa_pid=$drive_pid sa_port=$drive_port
start_drive spindle-b "$spindle_bin"
sb_pid=$drive_pid sb_port=$drive_port
# The first start of a simulator builds its launcher with Maven.
server_start_timeout=900
ready='kinetic simulator listening on 127\.0\.0\.1:([0-9]+)'
mkdir -p "$work/sim-a" "$work/sim-b"
start_server sim-a "$ready" scripts/java-simulator.sh 0 0 "$work/sim-a"
ja_pid=$server_pid ja_port=$server_match
start_server sim-b "$ready" scripts/java-simulator.sh 0 0 "$work/sim-b"
jb_pid=$server_pid jb_port=$server_match
only() { # spindle|simulator
  local run stop
  if [ "$1" = spindle ]; then run="$sa_pid $sb_pid"; stop="$ja_pid $jb_pid"; else run="$ja_pid $jb_pid"; stop="$sa_pid $sb_pid"; fi
  for p in $stop; do kill -STOP "$p"; done
  for p in $run; do kill -CONT "$p"; done
}

if [ $quick = 1 ]; then
  cases=("64 1024" "16 1048576")
else
  cases=("512 1024" "512 65536" "512 1048576" "2048 1048576" "25000 1024")
fi
rows=()
for c in "${cases[@]}"; do
  read -r count size <<<"$c"
  # The simulator is slow with many small values: cap its count, compare MB/s.
  sim_count=$count
  [ "$count" -gt 2000 ] && sim_count=2000
  s= j=
  for _ in $(seq 1 "$repeat"); do
    only spindle
    s="$s$("$spindle_bin" bench p2p --source "127.0.0.1:$sa_port" --target "127.0.0.1:$sb_port" --count "$count" --value-size "$size" --json)
"
    only simulator
    j="$j$("$spindle_bin" bench p2p --source "127.0.0.1:$ja_port" --target "127.0.0.1:$jb_port" --count "$sim_count" --value-size "$size" --json)
"
  done
  rows+=("$(python3 - "$s" "$j" <<'PY'
import json, statistics, sys
def median_run(text):
    runs = [json.loads(l) for l in text.splitlines() if l.strip()]
    out = dict(runs[0])
    for k in ("client_put_mb_per_second", "push_mb_per_second", "push_over_put"):
        out[k] = statistics.median(r[k] for r in runs)
    out["push_failures"] = sum(r["push_failures"] for r in runs)
    return out
s, j = median_run(sys.argv[1]), median_run(sys.argv[2])
def f(x): return f"{x:,.1f}"
fail = s["push_failures"] + j["push_failures"]
print(f"| {s['spec']['count']:,} (sim {j['spec']['count']:,}) | {s['spec']['value_size']:,} | {f(s['client_put_mb_per_second'])} | {f(s['push_mb_per_second'])} | {s['push_over_put']:.2f}x | {f(j['client_put_mb_per_second'])} | {f(j['push_mb_per_second'])} | {j['push_over_put']:.2f}x | {s['push_mb_per_second'] / max(j['push_mb_per_second'], 1e-9):.1f}x | {fail} |")
PY
)")
done
table=$(
  echo "| pairs | value B | Spindle put MB/s | Spindle push MB/s | push/put | simulator put MB/s | simulator push MB/s | push/put | Spindle push / simulator push | failed ops |"
  echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  printf '%s\n' "${rows[@]}"
)
echo "$table"
if [ -n "$out" ]; then
  {
    echo "# P2P: client put vs drive push, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Reproduce: \`scripts/bench-p2p.sh$([ $quick = 1 ] && echo ' --quick')\` on a $(nproc)-core machine; every drive on 127.0.0.1, the pair not measured paused; medians of $repeat runs."
    echo
    echo "$table"
  } >"$out"
fi
# Any operation that failed to copy makes the run fail.
if printf '%s\n' "${rows[@]}" | awk -F'|' '{ gsub(/[ ,]/, "", $11); if ($11 + 0 > 0) bad = 1 } END { exit !bad }'; then
  echo "bench-p2p: some pushed operations failed" >&2
  exit 3
fi
