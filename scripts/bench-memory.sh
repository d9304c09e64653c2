#!/usr/bin/env bash
# A drive's memory under repeated large values: one `spindle drive` (fjall), ROUNDS rounds of
# COUNT x 1 MiB sequential WRITEBACK puts ended by FLUSHALLDATA, then gets of the same keys
# (8 connections x 2 in flight, as bench-compare.sh's 1 MiB runs). After every run it prints
# the drive's peak (VmHWM) and current (VmRSS) resident memory and the run's MB/s, so that
# memory held after the runs (allocator retention, memtables) shows round by round.
#
#   scripts/bench-memory.sh [--spindle BIN] [--client BIN] [--rounds N] [--count N] [--mixed]
#
# --spindle is the drive measured; --client (default: the same binary) drives it, so two
# builds are compared with the same load generator.
#
# --mixed replays instead, ROUNDS times, the Spindle runs of bench-compare.sh (200,000 x 120 B
# and x 4 KiB puts on 8 x 16, 4 KiB gets, COUNT x 1 MiB puts + FLUSH and gets on 8 x 2,
# 40,000 4 KiB WRITETHROUGH puts on 16 x 1) against one drive, prints the highest resident
# size sampled every 50 ms during each run, and at the end the CPU seconds each kind of drive
# thread used (fjall's flush and compaction workers, the writer, the runtime).
set -euo pipefail
cd "$(dirname "$0")/.."
spindle_bin=target/release/spindle client_bin= rounds=3 count=2000 mixed=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --spindle) spindle_bin=$2; shift ;;
    --client) client_bin=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --count) count=$2; shift ;;
    --mixed) mixed=1 ;;
    *) echo "bench-memory: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
client_bin=${client_bin:-$spindle_bin}
[[ -x $spindle_bin && -x $client_bin ]] || { echo "bench-memory: build first: cargo build --release -p spindle-cli" >&2; exit 1; }
work=$(mktemp -d)
log() { echo "bench-memory: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=servers.sh
source scripts/servers.sh
trap 'stop_servers; wait 2>/dev/null || true; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

start_drive drive "$spindle_bin"
pid=$drive_pid port=$drive_port

memory() { awk '/^VmHWM|^VmRSS/ {printf "%s %d MiB  ", $1, $2 / 1024}' "/proc/$pid/status"; }
run() { # OP EXTRA...
  "$client_bin" bench "$1" --drive "127.0.0.1:$port" --count "$count" --value-size 1048576 \
    --connections 8 --depth 2 "${@:2}" --json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["errors"]==0, r; print("%.0f MB/s" % r["megabytes_per_second"])'
}
if [[ $mixed = 0 ]]; then
  for ((r = 1; r <= rounds; r++)); do
    echo "round $r: put + FLUSH $(run put --flush)  $(memory)"
    echo "round $r: get         $(run get)  $(memory)"
  done
  exit 0
fi

(while kill -0 "$pid" 2>/dev/null; do awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; sleep 0.05; done) >"$work/rss" 2>/dev/null &
sampled() { # the highest resident size sampled since line $1 of the samples, MiB
  tail -n "+$(($1 + 1))" "$work/rss" | sort -n | tail -n 1 | awk '{printf "%d MiB", $1 / 1024}'
}
mixed_run() { # LABEL OP VALUE_SIZE COUNT CONNECTIONS DEPTH EXTRA...
  local from
  from=$(wc -l <"$work/rss")
  "$client_bin" bench "$2" --drive "127.0.0.1:$port" --value-size "$3" --count "$4" \
    --connections "$5" --depth "$6" "${@:7}" --json >/dev/null
  echo "round $r: $1  highest RSS $(sampled "$from")"
}
for ((r = 1; r <= rounds; r++)); do
  mixed_run "120 B puts         " put 120 200000 8 16
  mixed_run "4 KiB puts         " put 4096 200000 8 16
  mixed_run "4 KiB gets         " get 4096 200000 8 16
  mixed_run "1 MiB puts + FLUSH " put 1048576 "$count" 8 2 --flush
  mixed_run "1 MiB gets         " get 1048576 "$count" 8 2
  mixed_run "4 KiB WRITETHROUGH " put 4096 40000 16 1 --sync writethrough
done
echo "peak: $(memory)"
tick=$(getconf CLK_TCK)
for t in /proc/"$pid"/task/*; do
  echo "$(cat "$t/comm") $(awk '{print $14 + $15}' "$t/stat")"
done | awk -v tick="$tick" '{cpu[$1] += $2} END {for (n in cpu) printf "CPU seconds, %s: %.2f\n", n, cpu[n] / tick}' | sort
