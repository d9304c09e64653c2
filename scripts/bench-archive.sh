#!/usr/bin/env bash
# Archival workloads across N Spindle drives on this machine. For each envelope (small, fitted,
# large) it starts N fresh `spindle drive` processes on loopback (own data directory, a
# capacity quota, free ports), runs `spindle bench archive run` across them (files placed by
# key hash), and stops them; then it merges the runs into one Markdown table (and plots). With
# --repeat R it does all that R times and reports, per row, the run with the median MB/s.
# Fresh drives per envelope: the engine does not hand back the space of deleted files at once,
# so an envelope run after another on the same drive would start from a fuller drive.
#
#   scripts/bench-archive.sh --spindle PATH [--quick] [--drives N] [--quota BYTES]
#       [--levels PCT,PCT,..] [--envelopes small,fitted,large] [--repeat R] [--out FILE.md]
#       [--results DIR] [--plots DIR] [--s3 [--ec DATA+PARITY]] [-- extra `bench archive run` args]
#
# --quick: a smoke run (small quota, two levels, few reads), well under a minute.
# --s3: the same through Spindle's S3 gateway (`spindle s3`) over one fresh drive per envelope:
# files become objects (multipart from 16 MiB), `bench archive run --s3` measures over HTTP.
# --ec DATA+PARITY (with --s3): the gateway over a cluster instead (etcd, a coordinator, three
# replicated drives for the manifests), every object in a storage class kept by an erasure-coded
# pool of DATA+PARITY+1 drives, each with the quota; the capacity the bench fills is the pool's
# usable share of their quotas.
set -euo pipefail
cd "$(dirname "$0")/.."
spindle_bin= quick=0 s3=0 ec= drives=1 quota= out= results= plots= levels= envelopes=small,fitted,large repeat=1
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --spindle) spindle_bin=$2; shift ;;
    --quick) quick=1 ;;
    --s3) s3=1 ;;
    --ec) ec=$2; shift ;;
    --drives) drives=$2; shift ;;
    --quota) quota=$2; shift ;;
    --levels) levels=$2; shift ;;
    --envelopes) envelopes=$2; shift ;;
    --repeat) repeat=$2; shift ;;
    --out) out=$2; shift ;;
    --results) results=$2; shift ;;
    --plots) plots=$2; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$spindle_bin" ]; then
  echo "usage: $0 --spindle PATH [--quick] [--drives N] [--quota BYTES] [--levels PCT,..] [--envelopes E,..] [--out FILE.md] [--results DIR] [--plots DIR] [-- extra args]" >&2
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
log() { echo "bench-archive: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=servers.sh
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

start_drives() { # NAME -> sets drive_args
  drive_args=()
  for i in $(seq 1 "$drives"); do
    start_drive "$1-d$i" "$spindle_bin" --capacity-bytes "$quota"
    drive_args+=(--drive "127.0.0.1:$drive_port")
  done
}

# --s3: one drive with the quota and the gateway over it; the bench reaches it over HTTP.
s3_key=archivebench
s3_secret=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
start_gateway() { # NAME -> sets drive_args
  start_drive "$1-d1" "$spindle_bin" --capacity-bytes "$quota"
  local port
  port=$(free_port)
  # The gateway says it is ready on stderr: merged into the log start_server watches.
  start_server "$1-s3" 'listening on [^0-9]*127\.0\.0\.1:([0-9]+)' sh -c 'exec "$0" "$@" 2>&1' "$spindle_bin" s3 \
    --drive "127.0.0.1:$drive_port" --listen "127.0.0.1:$port" --access-key "$s3_key" --secret-key "$s3_secret"
  drive_args=(--s3 "http://127.0.0.1:$server_match" --access-key "$s3_key" --secret-key "$s3_secret" --capacity-bytes "$quota")
}
# --ec: the gateway over a cluster whose default class is an erasure-coded pool.
start_ec_gateway() { # NAME -> sets drive_args
  local port i width=$((${ec%+*} + ${ec#*+})) etcd_at
  start_etcd "$1-etcd"
  etcd_at=$etcd_url
  "$spindle_bin" cluster init --etcd "$etcd_at" --partitions 64 --replicas 3 --write-quorum 2 >/dev/null
  start_server "$1-coordinator" 'coordinator .* (for) cluster' sh -c "exec '$spindle_bin' cluster coordinator --etcd $etcd_at --sweep-interval-ms 2000 2>&1"
  for i in 1 2 3; do
    start_drive "$1-meta$i" "$spindle_bin"
    "$spindle_bin" cluster add-drive "meta$i" "127.0.0.1:$drive_port" --etcd "$etcd_at" >/dev/null
  done
  "$spindle_bin" cluster pool add cold --ec "$ec" --etcd "$etcd_at" >/dev/null
  for i in $(seq 1 $((width + 1))); do
    start_drive "$1-cold$i" "$spindle_bin" --capacity-bytes "$quota"
    "$spindle_bin" cluster add-drive "cold$i" "127.0.0.1:$drive_port" --pool cold --etcd "$etcd_at" >/dev/null
  done
  local deadline=$((SECONDS + 120))
  until "$spindle_bin" cluster pool status cold --etcd "$etcd_at" --json | python3 -c 'import json,sys; p=json.load(sys.stdin)["pools"][0]; sys.exit(0 if p["placed"] == p["groups"] and all(d["up"] for d in p["drives"]) else 1)'; do
    ((SECONDS < deadline)) || die "the pool was not placed in 120 s"
    sleep 0.5
  done
  port=$(free_port)
  start_server "$1-s3" 'listening on [^0-9]*127\.0\.0\.1:([0-9]+)' sh -c 'exec "$0" "$@" 2>&1' "$spindle_bin" s3 \
    --cluster "etcd://${etcd_at#http://}" --listen "127.0.0.1:$port" --access-key "$s3_key" --secret-key "$s3_secret" \
    --storage-class STANDARD_IA=cold --default-storage-class STANDARD_IA
  # What the pool holds of its drives' quotas: DATA of every DATA+PARITY bytes.
  drive_args=(--s3 "http://127.0.0.1:$server_match" --access-key "$s3_key" --secret-key "$s3_secret"
    --capacity-bytes $((quota * (width + 1) * ${ec%+*} / width)))
}
if [ -n "$ec" ]; then
  [ $s3 = 1 ] || die "--ec needs --s3 (the coded class is the gateway's)"
  [[ $ec =~ ^[0-9]+\+[0-9]+$ ]] || die "--ec takes DATA+PARITY, e.g. 4+2"
fi
if [ $s3 = 1 ]; then
  [ "$drives" = 1 ] || die "--s3 runs the gateway over one drive"
  "$spindle_bin" s3 --help >/dev/null 2>&1 || die "$spindle_bin has no 's3' command (the gateway)"
fi

started=$(date +%s)
files=()
for r in $(seq 1 "$repeat"); do
  for envelope in ${envelopes//,/ }; do
    name=$envelope-$r
    if [ -n "$ec" ]; then start_ec_gateway "$name"; elif [ $s3 = 1 ]; then start_gateway "$name"; else start_drives "$name"; fi
    "$spindle_bin" bench archive run "${drive_args[@]}" "${args[@]}" --envelopes "$envelope" --out "$work/$name.json" "${extra[@]}" 2>"$work/$name.err" || {
      cat "$work/$name.err" >&2
      exit 1
    }
    stop_servers
    rm -rf "${work:?}/$name" "${work:?}/$name"-*
    files+=("$work/$name.json")
  done
done
# The model as the first run printed it (everything before its progress lines).
model=$(awk '/^ *(small|fitted|large) +[0-9]/ { exit } { print }' "$work/${envelopes%%,*}-1.err")
table=$("$spindle_bin" bench archive plot "${files[@]}" ${plots:+--plots "$plots"})
echo "$table"
if [ -n "$results" ]; then
  mkdir -p "$results"
  cp "${files[@]}" "$results/"
fi
if [ -n "$out" ]; then
  {
    echo "# Archival workloads: $([ -n "$ec" ] && echo "an erasure-coded pool ($ec, $(( ${ec%+*} + ${ec#*+} + 1 )) drives)" || echo "$drives drive(s)")$([ $s3 = 1 ] && echo ' through the S3 gateway'), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Reproduce: \`scripts/bench-archive.sh --spindle PATH$([ $quick = 1 ] && echo ' --quick')$([ $s3 = 1 ] && echo ' --s3')$([ -n "$ec" ] && echo " --ec $ec") --drives $drives --quota $quota --levels $levels --envelopes $envelopes --repeat $repeat${extra[*]:+ -- ${extra[*]}}\` on a $(nproc)-core machine; every drive on 127.0.0.1 with a quota of $quota bytes, fresh drives for each envelope; per row the run with the median MB/s of $repeat; took $(($(date +%s) - started)) s."
    echo
    echo "$model"
    echo
    echo "$table"
  } >"$out"
fi
