#!/usr/bin/env bash
# The cluster's costs against one drive's, side by side in one run: for each cluster size in
# DRIVES, a fresh etcd, that many drives and a coordinator on loopback (64 partitions,
# R = min(3, drives), W = majority), and a lone drive beside them; `spindle bench put|get`
# of COUNT 4 KiB values against the lone drive (WRITETHROUGH) both through the load
# generator's raw pipeline and through the Rust client's request API (`client:`, the path the
# cluster client takes: the like-for-like baseline), and against the cluster (every cluster
# write is WRITETHROUGH on its replicas), at low load (1 connection x depth 1: latency and
# client CPU per operation) and loaded (8 x 4: throughput; the loaded puts overwrite the keys
# the first run wrote, from a new process that never saw their versions, and a last loaded
# run, `insert`, puts new keys). Beside them, the floor under replication on the cluster's own
# drives (`spindle bench` targets fanout: and fanout-read:, each key on R of them picked by its
# hash, as placement spreads keys: a put stored on all R and answered at a majority, with no
# cluster logic; fanout-read first reads the version from R-W+1, as a linearizable
# multi-writer put must), conditional puts (`cluster-cas:`) and batches of one operation
# (`cluster-batch:`) beside plain ones. Prints Markdown tables (and writes them to OUT)
# with medians of REPEAT alternated rounds. With --ycsb LETTERS, YCSB's core
# workloads (load, then run; 8 threads, 1 KiB records) against the lone drive and the cluster of
# --ycsb-drives drives (default: the largest size), also alternated, in a second table.
# With --secured, instead: what security costs. For each size, a plaintext cluster (open
# drives, plain etcd) and a secured one beside it (the cluster's credentials and CA, etcd over
# TLS with the cluster's user, drives provisioned by add-drive and reached over TLS only), and
# `spindle bench put|get` of COUNT 1 MiB values against each, alternated, at 1 x 1 and 4 x 2.
#
#   scripts/bench-cluster.sh [--spindle BIN] [--drives 1,2,4,8] [--count N] [--repeat N] [--out FILE]
#                            [--ycsb ABCDEF] [--ycsb-drives N] [--ycsb-records N] [--ycsb-operations N]
#                            [--secured]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spindle_bin=$root/target/release/spindle drives_list=1,2,4,8 count=5000 repeat=3 out=
ycsb= ycsb_drives= ycsb_records=5000 ycsb_operations=5000 secured=0
while (($#)); do
    case $1 in
        --spindle) spindle_bin=$2; shift 2 ;;
        --drives) drives_list=$2; shift 2 ;;
        --count) count=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --ycsb) ycsb=$2; shift 2 ;;
        --ycsb-drives) ycsb_drives=$2; shift 2 ;;
        --ycsb-records) ycsb_records=$2; shift 2 ;;
        --ycsb-operations) ycsb_operations=$2; shift 2 ;;
        --secured) secured=1; shift ;;
        -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
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

# bench LABEL DRIVES TARGET OP CONNS DEPTH [NAME [OPTIONS...]]: one measured run of
# $value_size-byte values (4 KiB unless set), appended as a JSON line (NAME: the row's name,
# default OP).
bench() {
    local label=$1 n=$2 target=$3 op=$4 conns=$5 depth=$6 name=${7:-$4}
    shift $(($# < 7 ? $# : 7))
    local json busy
    busy=$(machine_busy)
    json=$("$spindle_bin" bench "$op" --drive "$target" --count "$count" --value-size "${value_size:-4096}" \
        --connections "$conns" --depth "$depth" --sync writethrough --json "$@")
    busy=$(($(machine_busy) - busy))
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(json.dumps({"label":sys.argv[2],"drives":int(sys.argv[3]),"op":sys.argv[4],"load":sys.argv[5],"ops":r["ops_per_second"],"p50":r["latency_us"]["p50"],"p99":r["latency_us"]["p99"],"cpu_us":r["bench_cpu_seconds"]*1e6/r["ops"],"machine_cpu_us":int(sys.argv[6])*1e6/int(sys.argv[7])/r["ops"],"errors":r["errors"]}))' \
        "$json" "$label" "$n" "$name" "$conns x $depth" "$busy" "$(getconf CLK_TCK)" >>"$results"
}

# The machine's busy CPU time so far, in clock ticks (every core: user, nice, system, irq,
# softirq): around a run, what it cost everything on the machine, servers included.
machine_busy() {
    awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat
}

# ycsb LABEL DRIVES TARGET WORKLOAD: load and run phases; the run phase appended as a JSON line.
ycsb() {
    local label=$1 n=$2 target=$3 w=$4
    "$spindle_bin" bench ycsb --drive "$target" --workload "$w" --records "$ycsb_records" --operations "$ycsb_operations" \
        --threads 8 --json | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r["phase"] != "run":
        continue
    ops = {k: {"p50": v.get("p50_us"), "p99": v["p99_us"], "n": v["operations"], "failures": v["failures"]} for k, v in r["operations"].items()}
    print(json.dumps({"label": sys.argv[1], "drives": int(sys.argv[2]), "op": "ycsb-" + sys.argv[3], "ops": r["throughput_ops_per_second"], "by_op": ops}))
' "$label" "$n" "$w" >>"$results"
}

measure() { # LABEL DRIVES TARGET
    bench "$1" "$2" "$3" put 1 1
    bench "$1" "$2" "$3" get 1 1
    bench "$1" "$2" "$3" put 8 4
    bench "$1" "$2" "$3" get 8 4
    # New keys (another key length): a cluster put of a new key is one round trip.
    bench "$1" "$2" "$3" put 8 4 insert --key-size 20
}

IFS=, read -r -a sizes <<<"$drives_list"
if ((secured)); then
    # shellcheck source=bench-cluster-secured.sh
    source "$root/scripts/bench-cluster-secured.sh"
    exit 0
fi
for round in $(seq 1 "$repeat"); do
    for n in "${sizes[@]}"; do
        log "round $round: $n drives"
        start_drive "lone$round-$n" "$spindle_bin"
        lone=127.0.0.1:$drive_port
        start_etcd "etcd$round-$n"
        replicas=$((n < 3 ? n : 3))
        "$spindle_bin" cluster init --etcd "$etcd_url" --partitions 64 --replicas "$replicas" --write-quorum $((replicas / 2 + 1)) >/dev/null
        start_server "coord$round-$n" 'coordinator .* (for) cluster' sh -c "exec '$spindle_bin' cluster coordinator --etcd $etcd_url 2>&1"
        members=()
        for i in $(seq 1 "$n"); do
            start_drive "d$round-$n-$i" "$spindle_bin"
            members+=("127.0.0.1:$drive_port")
            "$spindle_bin" cluster add-drive "d$i" "127.0.0.1:$drive_port" --etcd "$etcd_url" >/dev/null
        done
        # Alternate the lone drive and the cluster within the round.
        measure single "$n" "$lone"
        measure client "$n" "client:$lone"
        measure cluster "$n" "cluster:$etcd_url"
        # Conditional puts beside them: new keys "if absent" (one round each), and overwrites of
        # keys another process wrote (refused "if absent", then on the version the refusal named:
        # two rounds, as a client that did not know the version pays).
        # Each run of new keys takes a key length of its own, so that its keys are new.
        bench cluster "$n" "cluster:$etcd_url" put 1 1 new --key-size 22
        bench cluster-cas "$n" "cluster-cas:$etcd_url" put 1 1 new --key-size 23
        bench cluster "$n" "cluster:$etcd_url" put 8 4 new --key-size 24
        bench cluster-cas "$n" "cluster-cas:$etcd_url" put 8 4 new --key-size 25
        bench cluster-cas "$n" "cluster-cas:$etcd_url" put 8 4 put
        # Batches beside them, each put a batch of one operation (its entries carry their
        # members; its writer leaves the batch's record before acknowledging it): new keys,
        # then overwrites of the 8 x 4 run's keys from new processes, as batches and as plain
        # puts (each meets a batch on top its process never saw, and leaves its record first).
        bench cluster-batch "$n" "cluster-batch:$etcd_url" put 1 1 new --key-size 26
        bench cluster-batch "$n" "cluster-batch:$etcd_url" put 8 4 new --key-size 27
        bench cluster-batch "$n" "cluster-batch:$etcd_url" put 8 4 put --key-size 27
        bench cluster "$n" "cluster:$etcd_url" put 8 4 over-batch --key-size 27
        fanout="$(IFS=,; echo "${members[*]}")@$replicas"
        for label in fanout fanout-read; do
            bench "$label" "$n" "$label:$fanout" put 1 1
            bench "$label" "$n" "$label:$fanout" put 8 4
            bench "$label" "$n" "$label:$fanout" get 8 4
        done
        if [ -n "$ycsb" ] && [ "$n" = "${ycsb_drives:-${sizes[-1]}}" ]; then
            for w in $(echo "$ycsb" | grep -o .); do
                log "round $round: YCSB $w on the lone drive and on $n drives"
                ycsb single "$n" "$lone" "$w"
                ycsb cluster "$n" "cluster:$etcd_url" "$w"
            done
        fi
        stop_servers
    done
done

table=$(python3 - "$results" "$count" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ycsb_rows = [r for r in rows if r["op"].startswith("ycsb-")]
rows = [r for r in rows if not r["op"].startswith("ycsb-")]
def med(label, n, op, load, field):
    v = [r[field] for r in rows if r["label"] == label and r["drives"] == n and r["op"] == op and r["load"] == load]
    return statistics.median(v) if v else float("nan")
print(f"4 KiB values, {sys.argv[2]} operations per run; medians of the rounds; client CPU per operation from the bench process.")
print("A lone drive through the raw pipeline (`raw`) and through the client's request API (`client`, the cluster client's own path: the ratios are to it).")
print()
print("| drives | op | load | ops/s raw / client / cluster | cluster ÷ client | p50 µs raw / client / cluster | p99 µs client / cluster | p50 ratio | client CPU µs raw / client / cluster | CPU ratio |")
print("|--:|---|---|---|--:|---|---|--:|---|--:|")
for n in sorted({r["drives"] for r in rows}):
    for op in ("put", "insert", "get"):
        for load in ("1 x 1", "8 x 4"):
            if not any(r["op"] == op and r["load"] == load for r in rows):
                continue
            f = lambda label, field: med(label, n, op, load, field)
            r, s, c = f("single", "ops"), f("client", "ops"), f("cluster", "ops")
            print(f"| {n} | {op} | {load} | {r:,.0f} / {s:,.0f} / {c:,.0f} | {c/s:.2f}× "
                  f"| {f('single', 'p50'):,.0f} / {f('client', 'p50'):,.0f} / {f('cluster', 'p50'):,.0f} "
                  f"| {f('client', 'p99'):,.0f} / {f('cluster', 'p99'):,.0f} | {f('cluster', 'p50') / f('client', 'p50'):.2f}× "
                  f"| {f('single', 'cpu_us'):.1f} / {f('client', 'cpu_us'):.1f} / {f('cluster', 'cpu_us'):.1f} | {f('cluster', 'cpu_us') / f('client', 'cpu_us'):.2f}× |")
if any(r["label"] == "fanout" for r in rows):
    print()
    print("The floor under replication, on the cluster's drives (each key on R of them, picked by its hash), against the lone drive through the same client API: `fanout` stores on all R and answers at a majority; `fanout-read` reads the version from R − W + 1 first (what a linearizable multi-writer put cannot skip). ops/s, and ratio to the lone drive.")
    print()
    print("| drives | op | load | client | fanout | fanout-read | cluster | fanout ÷ client | fanout-read ÷ client | cluster ÷ client | cluster ÷ fanout-read |")
    print("|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for n in sorted({r["drives"] for r in rows}):
        for op, load in (("put", "1 x 1"), ("put", "8 x 4"), ("get", "8 x 4")):
            f = lambda label: med(label, n, op, load, "ops")
            c, fo, fr, cl = f("client"), f("fanout"), f("fanout-read"), f("cluster")
            print(f"| {n} | {op} | {load} | {c:,.0f} | {fo:,.0f} | {fr:,.0f} | {cl:,.0f} | {fo/c:.2f}× | {fr/c:.2f}× | {cl/c:.2f}× | {cl/fr:.2f}× |")
if any(r["label"] == "cluster-cas" for r in rows):
    print()
    print("Conditional puts against unconditional ones on the same cluster, same round: `new` keys (\"if absent\": one round of read, prepare and accept, against a put's read and accept), `put` overwrites of keys another process wrote (refused, then on the version named: two rounds). ops/s, p50 µs and client CPU µs per put.")
    print()
    print("| drives | op | load | put ops/s | conditional ops/s | ratio | put p50 | conditional p50 | put CPU | conditional CPU |")
    print("|--:|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for n in sorted({r["drives"] for r in rows}):
        for op, load in (("new", "1 x 1"), ("new", "8 x 4"), ("put", "8 x 4")):
            f = lambda label, field: med(label, n, op, load, field)
            u, c = f("cluster", "ops"), f("cluster-cas", "ops")
            print(f"| {n} | {op} | {load} | {u:,.0f} | {c:,.0f} | {c/u:.2f}× | {f('cluster', 'p50'):,.0f} | {f('cluster-cas', 'p50'):,.0f} | {f('cluster', 'cpu_us'):.1f} | {f('cluster-cas', 'cpu_us'):.1f} |")
if any(r["label"] == "cluster-batch" for r in rows):
    print()
    print("Batches of one operation against puts on the same cluster, same round: `new` keys, `put` overwrites from a new process (a put over a put, a batch over a batch), and `over-batch` (a put over keys a batch wrote last, from a new process, set against a put over a put). ops/s, p50 µs and client CPU µs per operation.")
    print()
    print("| drives | op | load | put ops/s | batch ops/s | ratio | put p50 | batch p50 | put CPU | batch CPU |")
    print("|--:|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for n in sorted({r["drives"] for r in rows}):
        for op, load, other, other_op in (("new", "1 x 1", "cluster-batch", "new"), ("new", "8 x 4", "cluster-batch", "new"), ("put", "8 x 4", "cluster-batch", "put"), ("put", "8 x 4", "cluster", "over-batch")):
            u = lambda field: med("cluster", n, op, load, field)
            b = lambda field: med(other, n, other_op, load, field)
            name = other_op if other == "cluster" else op
            print(f"| {n} | {name} | {load} | {u('ops'):,.0f} | {b('ops'):,.0f} | {b('ops')/u('ops'):.2f}× | {u('p50'):,.0f} | {b('p50'):,.0f} | {u('cpu_us'):.1f} | {b('cpu_us'):.1f} |")
errors = sum(r["errors"] for r in rows)
print()
print(f"errors over all runs: {errors}")
if ycsb_rows:
    n = ycsb_rows[0]["drives"]
    print()
    print(f"YCSB core workloads (run phase, 8 threads), the lone drive against {n} drives; medians of the rounds; p99 per operation in µs.")
    print()
    print("| workload | single ops/s | cluster ops/s | ratio | single p99 | cluster p99 | failures (cluster) |")
    print("|---|--:|--:|--:|---|---|--:|")
    for op in sorted({r["op"] for r in ycsb_rows}):
        got = {label: [r for r in ycsb_rows if r["op"] == op and r["label"] == label] for label in ("single", "cluster")}
        s = statistics.median(r["ops"] for r in got["single"])
        c = statistics.median(r["ops"] for r in got["cluster"])
        def p99(label):
            names = sorted({k for r in got[label] for k in r["by_op"]})
            return ", ".join(f"{k} {statistics.median(r['by_op'][k]['p99'] for r in got[label] if k in r['by_op']):,.0f}" for k in names)
        failures = sum(v["failures"] for r in got["cluster"] for v in r["by_op"].values())
        print(f"| {op[5:]} | {s:,.0f} | {c:,.0f} | {c/s:.2f}× | {p99('single')} | {p99('cluster')} | {failures} |")
PY
)
echo "$table"
[ -z "$out" ] || printf '%s\n' "$table" >"$out"
