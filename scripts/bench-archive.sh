#!/usr/bin/env bash
# Archival workloads across N Spindle drives on this machine: starts N `spindle drive`
# processes on loopback (each with its own data directory and a capacity quota, on free
# ports), runs `spindle bench archive run` across them (files placed by key hash), writes a
# Markdown table, and stops the drives.
#
#   scripts/bench-archive.sh --spindle PATH [--quick] [--drives N] [--quota BYTES]
#                            [--levels PCT,PCT,..] [--out FILE.md] [--json FILE] [--plots DIR]
#                            [-- extra bench args]
#
# --quick: a smoke run (small quota, two levels, few reads), well under a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
spindle_bin= quick=0 drives=1 quota= out= json= plots= levels=
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --spindle) spindle_bin=$2; shift ;;
    --quick) quick=1 ;;
    --drives) drives=$2; shift ;;
    --quota) quota=$2; shift ;;
    --levels) levels=$2; shift ;;
    --out) out=$2; shift ;;
    --json) json=$2; shift ;;
    --plots) plots=$2; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$spindle_bin" ]; then
  echo "usage: $0 --spindle PATH [--quick] [--drives N] [--quota BYTES] [--out FILE.md] [--json FILE] [--plots DIR] [-- extra args]" >&2
  exit 2
fi
if [ $quick = 1 ]; then
  : "${quota:=$((32 << 20))}" "${levels:=10,20}"
  args=(--levels "$levels" --bootstrap 10 --resample-files 2000 --file-reads 50 --fragment-reads 50 --batch-bytes $((4 << 20)))
else
  : "${quota:=$((1 << 30))}" "${levels:=25,50,75}"
  args=(--levels "$levels" --resample-files 2000)
fi
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

wait_for() { # FILE REGEX -> first capture group
  for _ in $(seq 1 600); do
    local v
    v=$(sed -n -E "s/.*$2.*/\\1/p" "$1" 2>/dev/null | head -n 1)
    [ -n "$v" ] && { echo "$v"; return; }
    sleep 0.1
  done
  echo "timed out waiting for $1" >&2
  cat "$1" "${1%.out}.err" >&2 || true
  exit 1
}

drive_args=()
for i in $(seq 1 "$drives"); do
  mkdir -p "$work/d$i"
  "$spindle_bin" drive --data "$work/d$i" --port 0 --tls-port 0 --listen 127.0.0.1 --capacity-bytes "$quota" >"$work/d$i.out" 2>"$work/d$i.err" &
  pids+=($!)
done
for i in $(seq 1 "$drives"); do
  drive_args+=(--drive "127.0.0.1:$(wait_for "$work/d$i.out" 'listening on 127\.0\.0\.1:([0-9]+)')")
done

[ -n "$json" ] && args+=(--out "$json")
[ -n "$plots" ] && args+=(--plots "$plots")
started=$(date +%s)
table=$("$spindle_bin" bench archive run "${drive_args[@]}" "${args[@]}" "${extra[@]}" --table)
echo "$table"
if [ -n "$out" ]; then
  {
    echo "# Archival workloads: $drives drive(s), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Reproduce: \`scripts/bench-archive.sh --spindle PATH$([ $quick = 1 ] && echo ' --quick') --drives $drives --quota $quota --levels $levels${extra[*]:+ -- ${extra[*]}}\` on a $(nproc)-core machine; every drive on 127.0.0.1 with a quota of $quota bytes; took $(($(date +%s) - started)) s."
    echo
    echo "$table"
  } >"$out"
fi
