#!/usr/bin/env bash
# A/B comparison of two builds of the S3 gateway over one cluster: etcd, a coordinator, three
# replicated drives for the manifests and a 4+2 pool of six drives, all from BIN_A, with a
# gateway from BIN_A and one from BIN_B over them (the default class the pool's; `--replicated`:
# STANDARD on the three drives instead). Each round measures every cell on each gateway, the
# order alternating from round to round, the other gateway paused (SIGSTOP), so that the
# machine's drift hits both alike. Printed per cell and gateway: the median over the rounds of
# MiB/s, the CPU per MiB of the gateway alone (from /proc) and of every server (gateway, drives,
# coordinator, etcd), and B's medians over A's. The load generator is CLIENT (default:
# target/release/spindle), whichever side is measured.
#
#   scripts/bench-s3-ab.sh BIN_A BIN_B [--rounds 3] [--duration 10s] [--concurrency 8]
#       [--cells "get:64MiB get:1MiB put:64MiB put:1MiB"] [--replicated]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ $# -ge 2 ] || { sed -n 2,13p "$0" >&2; exit 2; }
bin_a=$(realpath "$1") bin_b=$(realpath "$2") client=$(realpath "${CLIENT:-target/release/spindle}")
shift 2
rounds=3 duration=10s concurrency=8 cells="get:64MiB get:1MiB put:64MiB put:1MiB" replicated=0
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift ;;
    --duration) duration=$2; shift ;;
    --concurrency) concurrency=$2; shift ;;
    --cells) cells=$2; shift ;;
    --replicated) replicated=1 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
work=$(mktemp -d "$root/target/bench-s3-ab.XXXXXX")
log() { echo "bench-s3-ab: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=servers.sh
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
command -v etcd >/dev/null || apt_install etcd-server || die "could not install etcd"
access_key=spindlebench
secret_key=$(python3 -c 'import secrets; print(secrets.token_hex(16))')

start_etcd etcd
etcd_pid=$server_pid
"$bin_a" cluster init --etcd "$etcd_url" --partitions 64 --replicas 3 --write-quorum 2 >/dev/null
start_server coordinator 'coordinator .* (for) cluster' sh -c "exec '$bin_a' cluster coordinator --etcd $etcd_url --replace-after-ms 3600000 2>&1"
servers="$etcd_pid $server_pid"
for i in 1 2 3; do
  start_drive "meta$i" "$bin_a"
  servers+=" $drive_pid"
  "$bin_a" cluster add-drive "meta$i" "127.0.0.1:$drive_port" --etcd "$etcd_url" >/dev/null
done
# Every partition of the default pool on its three drives, all up: a gateway that starts
# before then answers 503 to every write.
deadline=$((SECONDS + 120))
until "$bin_a" cluster status --etcd "$etcd_url" --json | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if s["replicas_missing"] == 0 and s["pending_changes"] == 0 and all(d["state"] == "up" for d in s["drives"]) else 1)'; do
  ((SECONDS < deadline)) || die "the default pool was not placed in 120 s"
  sleep 0.5
done
class=()
if [ $replicated = 0 ]; then
  "$bin_a" cluster pool add cold --ec 4+2 --etcd "$etcd_url" >/dev/null
  for i in 1 2 3 4 5 6; do
    start_drive "cold$i" "$bin_a"
    servers+=" $drive_pid"
    "$bin_a" cluster add-drive "cold$i" "127.0.0.1:$drive_port" --pool cold --etcd "$etcd_url" >/dev/null
  done
  deadline=$((SECONDS + 120))
  until "$bin_a" cluster pool status cold --etcd "$etcd_url" --json | python3 -c 'import json,sys; p=json.load(sys.stdin)["pools"][0]; sys.exit(0 if p["placed"] == p["groups"] and all(d["up"] for d in p["drives"]) else 1)'; do
    ((SECONDS < deadline)) || die "the pool was not placed in 120 s"
    sleep 0.5
  done
  class=(--storage-class STANDARD_IA=cold --default-storage-class STANDARD_IA)
fi
declare -A gw_pid gw_url
for side in a b; do
  bin=$bin_a
  [ $side = b ] && bin=$bin_b
  port=$(free_port)
  start_server "gateway-$side" 'listening on [^0-9]*127\.0\.0\.1:([0-9]+)' sh -c 'exec "$0" "$@" 2>&1' "$bin" s3 \
    --cluster "etcd://${etcd_url#http://}" --listen "127.0.0.1:$port" --access-key "$access_key" --secret-key "$secret_key" \
    ${class[@]+"${class[@]}"} --sweep-grace-secs 10 --sweep-interval-secs 5
  gw_pid[$side]=$server_pid gw_url[$side]=http://127.0.0.1:$port
done
"$client" bench s3 --endpoint "${gw_url[a]}" --access-key "$access_key" --secret-key "$secret_key" --op put --size 1KiB --duration 1s >/dev/null 2>&1 || true

results=$work/results.tsv
: >"$results"
for round in $(seq 1 "$rounds"); do
  order="a b"
  ((round % 2 == 0)) && order="b a"
  for cell in $cells; do
    op=${cell%%:*} size=${cell#*:}
    for side in $order; do
      other=a
      [ $side = a ] && other=b
      kill -STOP "${gw_pid[$other]}"
      sync
      sleep 2
      json=$work/$side-$op-$size-$round.json
      pids=$(echo "${gw_pid[$side]} $servers" | tr ' ' ',')
      log "round $round: $side $op $size"
      if ! "$client" bench s3 --endpoint "${gw_url[$side]}" --access-key "$access_key" --secret-key "$secret_key" --label "$side" \
        --op "$op" --size "$size" --concurrency "$concurrency" --duration "$duration" --server-pid "$pids" --json "$json" >/dev/null 2>"$work/bench.err"; then
        # A run that failed is left out of the medians and counted (the summary says how many).
        cat "$work/bench.err" >&2
        log "$side $op $size failed in round $round"
        printf '%s\t%s\t%s\tfailed\n' "$op" "$size" "$side" >>"$results"
        kill -CONT "${gw_pid[$other]}"
        continue
      fi
      kill -CONT "${gw_pid[$other]}"
      python3 - "$json" "$side" "$op" "$size" >>"$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
side, op, size = sys.argv[2:5]
mib = r["mib_per_second"] * r["seconds"]
# The gateway is the first PID given.
gateway = r["server_cpu_seconds_each"][0] / mib if mib else float("nan")
print(f"{op}\t{size}\t{side}\t{r['mib_per_second']:.1f}\t{gateway:.5f}\t{r['server_cpu_seconds_per_mib'] or float('nan'):.5f}\t{r['errors']}")
PY
    done
  done
done
python3 - "$results" "$bin_a" "$bin_b" "$rounds" <<'PY'
import statistics, sys
lines = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
rows = [r for r in lines if r[3] != "failed"]
failed = [r for r in lines if r[3] == "failed"]
print(f"A = {sys.argv[2]}, B = {sys.argv[3]}; medians of {sys.argv[4]} rounds\n")
print("| op | object | gateway | MiB/s | gateway CPU s/MiB | all servers CPU s/MiB | errors |")
print("|---|--:|---|--:|--:|--:|--:|")
cells = []
for r in rows:
    if (r[0], r[1]) not in cells:
        cells.append((r[0], r[1]))
for op, size in cells:
    med = {}
    for side in "ab":
        mine = [r for r in rows if (r[0], r[1], r[2]) == (op, size, side)]
        if not mine:
            print(f"| {op.upper()} | {size} | {side.upper()} | every run failed | | | |")
            med[side] = [float("nan")] * 3
            continue
        med[side] = [statistics.median(float(r[i]) for r in mine) for i in (3, 4, 5)]
        errors = sum(int(r[6]) for r in mine)
        print(f"| {op.upper()} | {size} | {side.upper()} | {med[side][0]:.1f} | {med[side][1]:.5f} | {med[side][2]:.5f} | {errors} |")
    ratio = [b / a if a else float("nan") for a, b in zip(med["a"], med["b"])]
    print(f"| {op.upper()} | {size} | **B ÷ A** | {ratio[0]:.2f}× | {ratio[1]:.2f}× | {ratio[2]:.2f}× | |")
if failed:
    print("\nRuns that failed (left out of the medians): " + ", ".join(f"{r[2].upper()} {r[0]} {r[1]}" for r in failed))
PY
