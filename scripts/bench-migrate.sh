#!/usr/bin/env bash
# Live migration under load, as Shadowfax measures scale-out: a fresh etcd, four drives and a
# coordinator on loopback (PARTITIONS partitions, R=3, W=2, moves limited to LIMIT MiB/s), and
# `spindle bench p2p` between two further drives for the drive-to-drive push rate this machine
# gives, in the same run. Then `spindle bench migrate`: RECORDS records of SIZE bytes loaded,
# YCSB A offered at RATE operations/s, a fifth drive added, then the first removed. Writes the
# tables (Markdown), the JSON and the timeline plot (SVG) next to OUT.
#
#   scripts/bench-migrate.sh [--spindle BIN] [--records N] [--value-size B] [--rate OPS]
#                            [--limit MIB_S] [--partitions N] [--settle S] [--out FILE.md]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spindle_bin=$root/target/release/spindle records=20000 value_size=4096 rate=500 limit=64 partitions=256 settle=5 out=
while (($#)); do
    case $1 in
        --spindle) spindle_bin=$2; shift 2 ;;
        --records) records=$2; shift 2 ;;
        --value-size) value_size=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        --limit) limit=$2; shift 2 ;;
        --partitions) partitions=$2; shift 2 ;;
        --settle) settle=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-migrate: $*" >&2; }
die() { log "$*"; exit 1; }
command -v etcd >/dev/null || die "etcd is missing (Debian package etcd-server; scripts/test.sh installs it)"
work=$(mktemp -d)
# shellcheck source=servers.sh
source "$(dirname "$0")/servers.sh"
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# The push rate of two lone drives, with the move's own shape: values of SIZE, 200 keys a request.
start_drive p2p-source "$spindle_bin"
p2p_source=127.0.0.1:$drive_port
start_drive p2p-target "$spindle_bin"
p2p_target=127.0.0.1:$drive_port
p2p_count=$((records < 5000 ? records : 5000))
log "bench p2p: $p2p_count x $value_size B"
p2p=$("$spindle_bin" bench p2p --source "$p2p_source" --target "$p2p_target" --count "$p2p_count" \
    --value-size "$value_size" --keys-per-request 200 --requests-in-flight 1 --json)

start_etcd etcd
"$spindle_bin" cluster init --etcd "$etcd_url" --partitions "$partitions" --replicas 3 --write-quorum 2 >/dev/null
start_server coordinator 'coordinator .* (for) cluster' sh -c "exec '$spindle_bin' cluster coordinator --etcd $etcd_url \
    --migrate-mib-s $limit --sweep-grace-ms 2000 --sweep-interval-ms 1000 2>&1"
for i in 0 1 2 3; do
    start_drive "d$i" "$spindle_bin"
    "$spindle_bin" cluster add-drive "d$i" "127.0.0.1:$drive_port" --etcd "$etcd_url" >/dev/null
done
start_drive d4 "$spindle_bin"
new_drive=127.0.0.1:$drive_port
# Wait for the four drives' placement to settle before loading.
for _ in $(seq 1 300); do
    status=$("$spindle_bin" cluster status --etcd "$etcd_url" --json)
    python3 -c 'import json,sys; s=json.loads(sys.argv[1]); sys.exit(0 if s.get("move") is None and all(d["partitions"] > 0 and d["state"] == "up" for d in s["drives"]) and len(s["drives"]) == 4 else 1)' "$status" && break
    sleep 0.2
done

result=$work/migrate.json
log "bench migrate: $records x $value_size B, YCSB A at $rate ops/s, add d4, remove d0, moves at $limit MiB/s"
"$spindle_bin" bench migrate --etcd "$etcd_url" --records "$records" --value-size "$value_size" --rate "$rate" \
    --settle-secs "$settle" --add "d4=$new_drive" --remove d0 --out "$result" --plot "$work/migrate.svg" >"$work/migrate.md"

table=$(python3 - "$result" "$p2p" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p2p = json.loads(sys.argv[2])
push = p2p["push_mb_per_second"]  # MB/s (10^6)
s = r["spec"]
print(f"YCSB A offered at {s['rate']:.0f} ops/s by {s['threads']} clients over {s['records']} records of {s['value_size']} B; "
      f"client-visible errors: {r['errors']}.")
print()
print("| stretch | seconds | ops/s | of before | p50 ms | p99 ms | errors |")
print("|---|--:|--:|--:|--:|--:|--:|")
before = r["stretches"][0]["ops_per_second"] or 1
for st in r["stretches"]:
    print(f"| {st['name']} | {st['seconds']:.1f} | {st['ops_per_second']:.0f} | {st['ops_per_second'] / before:.2f} | "
          f"{st['p50_us'] / 1000:.2f} | {st['p99_us'] / 1000:.2f} | {st['errors']} |")
print()
print(f"`spindle bench p2p` in the same run ({p2p['spec']['count']} x {p2p['spec']['value_size']} B, 200 keys a push): {push:.1f} MB/s.")
print()
print("| move | partitions | start to flip s | MB pushed | ideal MB | moved ÷ ideal | fair share MB | MB/s | ÷ p2p rate | limit MiB/s | caught up |")
print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for m in r["moves"]:
    took = max(m["flipped_at"] - m["started_at"], 1e-3)
    rate = m["bytes"] / took / 1e6
    limit = f"{m['rate_limit'] / 2**20:.0f}" if m["rate_limit"] else "none"
    print(f"| {m['kind']} {m['drive']} | {m['partitions']} | {took:.1f} | {m['bytes'] / 1e6:.1f} | {m['ideal_bytes'] / 1e6:.1f} | "
          f"{m['bytes'] / max(m['ideal_bytes'], 1):.2f} | {m['fair_share_bytes'] / 1e6:.1f} | {rate:.1f} | {rate / push:.2f} | {limit} | {m['caught_up']} |")
PY
)
echo "$table"
if [ -n "$out" ]; then
    printf '%s\n' "$table" >"$out"
    cp "$result" "${out%.md}.json"
    cp "$work/migrate.svg" "${out%.md}.svg"
fi
