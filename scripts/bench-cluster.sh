#!/usr/bin/env bash
# The cluster's costs against one drive's, side by side in one run: for each cluster size in
# DRIVES, a fresh etcd, that many drives and a coordinator on loopback (64 partitions,
# R = min(3, drives), W = majority), and a lone drive beside them; `spindle bench put|get`
# of COUNT 4 KiB values against the lone drive (WRITETHROUGH) and the cluster (every cluster
# write is WRITETHROUGH on its replicas), at low load (1 connection x depth 1: latency and
# client CPU per operation) and loaded (8 x 4: throughput). Prints a Markdown table (and writes
# it to OUT) with medians of REPEAT alternated rounds.
#
#   scripts/bench-cluster.sh [--spindle BIN] [--drives 1,2,4,8] [--count N] [--repeat N] [--out FILE]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spindle_bin=$root/target/release/spindle drives_list=1,2,4,8 count=5000 repeat=3 out=
while (($#)); do
    case $1 in
        --spindle) spindle_bin=$2; shift 2 ;;
        --drives) drives_list=$2; shift 2 ;;
        --count) count=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-cluster: $*" >&2; }
die() { log "$*"; exit 1; }
command -v etcd >/dev/null || die "etcd is missing (Debian package etcd-server; scripts/test.sh installs it)"
work=$(mktemp -d)
# shellcheck source=servers.sh
source "$(dirname "$0")/servers.sh"
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
results=$work/results.jsonl
: >"$results"

# bench LABEL DRIVES TARGET OP CONNS DEPTH: one measured run, appended as a JSON line.
bench() {
    local label=$1 n=$2 target=$3 op=$4 conns=$5 depth=$6
    local json
    json=$("$spindle_bin" bench "$op" --drive "$target" --count "$count" --value-size 4096 \
        --connections "$conns" --depth "$depth" --sync writethrough --json)
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(json.dumps({"label":sys.argv[2],"drives":int(sys.argv[3]),"op":sys.argv[4],"load":sys.argv[5],"ops":r["ops_per_second"],"p50":r["latency_us"]["p50"],"p99":r["latency_us"]["p99"],"cpu_us":r["bench_cpu_seconds"]*1e6/r["ops"],"errors":r["errors"]}))' \
        "$json" "$label" "$n" "$op" "$conns x $depth" >>"$results"
}

measure() { # LABEL DRIVES TARGET
    bench "$1" "$2" "$3" put 1 1
    bench "$1" "$2" "$3" get 1 1
    bench "$1" "$2" "$3" put 8 4
    bench "$1" "$2" "$3" get 8 4
}

IFS=, read -r -a sizes <<<"$drives_list"
for round in $(seq 1 "$repeat"); do
    for n in "${sizes[@]}"; do
        log "round $round: $n drives"
        start_drive "lone$round-$n" "$spindle_bin"
        lone=127.0.0.1:$drive_port
        client_port=$(free_port) peer_port=$(free_port)
        etcd_url=http://127.0.0.1:$client_port
        start_server "etcd$round-$n" '(ready) to serve client requests' sh -c "exec etcd --name b --data-dir '$work/etcd$round-$n' \
            --listen-client-urls $etcd_url --advertise-client-urls $etcd_url \
            --listen-peer-urls http://127.0.0.1:$peer_port --initial-advertise-peer-urls http://127.0.0.1:$peer_port \
            --initial-cluster b=http://127.0.0.1:$peer_port 2>&1"
        replicas=$((n < 3 ? n : 3))
        "$spindle_bin" cluster init --etcd "$etcd_url" --partitions 64 --replicas "$replicas" --write-quorum $((replicas / 2 + 1)) >/dev/null
        start_server "coord$round-$n" 'coordinator .* (for) cluster' sh -c "exec '$spindle_bin' cluster coordinator --etcd $etcd_url 2>&1"
        for i in $(seq 1 "$n"); do
            start_drive "d$round-$n-$i" "$spindle_bin"
            "$spindle_bin" cluster add-drive "d$i" "127.0.0.1:$drive_port" --etcd "$etcd_url" >/dev/null
        done
        # Alternate the lone drive and the cluster within the round.
        measure single "$n" "$lone"
        measure cluster "$n" "cluster:$etcd_url"
        stop_servers
    done
done

table=$(python3 - "$results" "$count" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(label, n, op, load, field):
    v = [r[field] for r in rows if r["label"] == label and r["drives"] == n and r["op"] == op and r["load"] == load]
    return statistics.median(v) if v else float("nan")
print(f"4 KiB values, {sys.argv[2]} operations per run; medians of the rounds; client CPU per operation from the bench process.")
print()
print("| drives | op | load | single drive ops/s | cluster ops/s | ratio | single p50 / p99 µs | cluster p50 / p99 µs | latency ratio (p50) | client CPU µs single / cluster | CPU ratio |")
print("|--:|---|---|--:|--:|--:|---|---|--:|---|--:|")
for n in sorted({r["drives"] for r in rows}):
    for op in ("put", "get"):
        for load in ("1 x 1", "8 x 4"):
            s, c = med("single", n, op, load, "ops"), med("cluster", n, op, load, "ops")
            sp50, cp50 = med("single", n, op, load, "p50"), med("cluster", n, op, load, "p50")
            sp99, cp99 = med("single", n, op, load, "p99"), med("cluster", n, op, load, "p99")
            scpu, ccpu = med("single", n, op, load, "cpu_us"), med("cluster", n, op, load, "cpu_us")
            print(f"| {n} | {op} | {load} | {s:,.0f} | {c:,.0f} | {c/s:.2f}× | {sp50:,.0f} / {sp99:,.0f} | {cp50:,.0f} / {cp99:,.0f} | {cp50/sp50:.2f}× | {scpu:.1f} / {ccpu:.1f} | {ccpu/scpu:.2f}× |")
errors = sum(r["errors"] for r in rows)
print()
print(f"errors over all runs: {errors}")
PY
)
echo "$table"
[ -z "$out" ] || printf '%s\n' "$table" >"$out"
