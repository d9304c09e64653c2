#!/usr/bin/env bash
# Large values side by side in one run (issue 20's targets), repeated and alternated:
#   - the disk: `dd` of COUNT MiB with fdatasync on the same filesystem as the drives' data;
#     and the disk's own latency under the puts' shape with fio (installed from Debian when
#     missing): 16 writers of 1 MiB buffered writes (the puts' 8 connections x depth 2), COUNT
#     MiB in all, then fsync: each write's p50/p99, the floor for the puts' tail;
#   - Spindle: COUNT sequential 1 MiB WRITEBACK puts ended by FLUSHALLDATA (8 connections x
#     depth 2) on a fresh drive, then COUNT 1 MiB gets; then three rounds overwriting every key
#     (garbage for the value log's collector, which runs during them) and the wait until live
#     data is at least half of the value log on disk;
#   - RocksDB with its blob files, in this process (`rocksdb-blob:`), the same puts.
# Medians of REPEAT rounds go to OUT (Markdown) with every round's figures.
#
#   scripts/bench-large-values.sh [--repeat N] [--count N] [--spindle BIN] [--out FILE]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repeat=3 count=2000 spindle_bin=$root/target/release/spindle out=
while (($#)); do
    case $1 in
        --repeat) repeat=$2; shift 2 ;;
        --count) count=$2; shift 2 ;;
        --spindle) spindle_bin=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-large-values: $*" >&2; }
die() { log "$*"; exit 1; }
work=$(mktemp -d)
# shellcheck source=servers.sh
source "$(dirname "$0")/servers.sh"
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
[[ -x $spindle_bin ]] || die "no spindle binary at $spindle_bin (cargo build --release -p spindle-cli)"
ldconfig -p | grep -q 'librocksdb\.so\.' || apt_install librocksdb7.8
command -v fio >/dev/null || apt_install fio

mib=1048576
results=$work/results.tsv
: >"$results"
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$results"; } # ROUND WHAT VALUE
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }

proc_cpu_ms() { # PID -> CPU milliseconds (user + system) so far
    awk '{printf "%d\n", ($14 + $15) * 1000 / '"$(getconf CLK_TCK)"'}' "/proc/$1/stat"
}

bench() { # TARGET OP OUT.json [--sync ...]
    local target=$1 op=$2 json=$3
    shift 3
    "$spindle_bin" bench "$op" --drive "$target" --count "$count" --value-size "$mib" --connections 8 --depth 2 --json "$@" >"$json"
}

# Bytes a logged record adds to its value: the record head (magic, head CRC, key length,
# value length, value CRC: 18 bytes) and the benchmark's 16-byte key.
record_overhead=$((18 + 16))
# Live bytes / value log bytes on disk (the live set is COUNT values and their record heads).
live_share() { # DATA_DIR
    local on_disk
    on_disk=$(find "$1/engine/values" -name '*.vlog' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
    python3 -c "print(f'{$count * ($mib + $record_overhead) / max($on_disk, 1):.3f}')"
}

for ((r = 1; r <= repeat; r++)); do
    log "round $r of $repeat: dd"
    dd_out=$(dd if=/dev/zero of="$work/dd.bin" bs=1M count="$count" conv=fdatasync 2>&1 | tail -n 1)
    rm -f "$work/dd.bin"
    record "$r" dd_mb_s "$(sed -E 's/.* s, ([0-9.]+) (MB|GB)\/s.*/\1 \2/' <<<"$dd_out" | awk '{print ($2 == "GB") ? $1 * 1000 : $1}')"

    log "round $r: fio"
    mkdir -p "$work/fio"
    fio --name=puts-shape --directory="$work/fio" --rw=write --bs=1M --ioengine=psync --numjobs=16 \
        --size=$((count / 16))M --end_fsync=1 --group_reporting --output-format=json >"$work/fio.json"
    rm -rf "$work/fio"
    record "$r" fio_write_mb_s "$(field "$work/fio.json" 'round(d["jobs"][0]["write"]["bw"] * 1024 / 1e6, 1)')"
    record "$r" fio_write_p50_ms "$(field "$work/fio.json" 'round(d["jobs"][0]["write"]["clat_ns"]["percentile"]["50.000000"] / 1e6, 1)')"
    record "$r" fio_write_p99_ms "$(field "$work/fio.json" 'round(d["jobs"][0]["write"]["clat_ns"]["percentile"]["99.000000"] / 1e6, 1)')"

    log "round $r: spindle"
    rm -rf "$work/spindle"
    start_drive spindle "$spindle_bin"
    cpu0=$(proc_cpu_ms "$drive_pid")
    bench "127.0.0.1:$drive_port" put "$work/put.json" --sync writeback --flush
    cpu1=$(proc_cpu_ms "$drive_pid")
    record "$r" spindle_put_mb_s "$(field "$work/put.json" 'round(d["megabytes_per_second"], 1)')"
    record "$r" spindle_put_p50_ms "$(field "$work/put.json" 'round(d["latency_us"]["p50"] / 1000, 1)')"
    record "$r" spindle_put_p99_ms "$(field "$work/put.json" 'round(d["latency_us"]["p99"] / 1000, 1)')"
    record "$r" spindle_put_cpu_ms "$(python3 -c "print(round(($cpu1 - $cpu0) / $count, 2))")"
    bench "127.0.0.1:$drive_port" get "$work/get.json"
    record "$r" spindle_get_mb_s "$(field "$work/get.json" 'round(d["megabytes_per_second"], 1)')"
    for churn in 1 2 3; do
        bench "127.0.0.1:$drive_port" put "$work/churn.json" --sync writeback --flush
        record "$r" "spindle_overwrite${churn}_mb_s" "$(field "$work/churn.json" 'round(d["megabytes_per_second"], 1)')"
        record "$r" "spindle_overwrite${churn}_p99_ms" "$(field "$work/churn.json" 'round(d["latency_us"]["p99"] / 1000, 1)')"
    done
    record "$r" live_share_after_churn "$(live_share "$work/spindle/data")"
    t0=$EPOCHREALTIME
    while python3 -c "import sys; sys.exit(0 if $(live_share "$work/spindle/data") < 0.5 else 1)" &&
        python3 -c "import sys; sys.exit(0 if $EPOCHREALTIME - $t0 < 120 else 1)"; do
        sleep 0.5
    done
    share=$(live_share "$work/spindle/data")
    record "$r" live_share_after_gc "$share"
    record "$r" gc_seconds "$(python3 -c "print(round($EPOCHREALTIME - $t0, 1))")"
    stop_servers

    log "round $r: rocksdb with blob files"
    rm -rf "$work/rocksdb"
    bench "rocksdb-blob:$work/rocksdb" put "$work/rocks.json" --sync writeback --flush
    record "$r" rocksdb_blob_put_mb_s "$(field "$work/rocks.json" 'round(d["megabytes_per_second"], 1)')"
    record "$r" rocksdb_blob_put_p99_ms "$(field "$work/rocks.json" 'round(d["latency_us"]["p99"] / 1000, 1)')"
    rm -rf "$work/rocksdb"
done

report=$(python3 - "$results" "$repeat" "$count" "$(git -C "$root" rev-parse --short HEAD)" <<'EOF'
import collections, statistics, sys, datetime
rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, what, value = line.rstrip("\n").split("\t")
    rows[what][int(r)] = float(value)
repeat, count, build = int(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"# Large values, {datetime.datetime.now():%Y-%m-%d %H:%M} (build {build})\n")
print(f"{count} x 1 MiB, 8 connections x depth 2; medians of {repeat} alternated rounds.\n")
print("| figure | median | rounds |")
print("|---|--:|---|")
for what, by_round in rows.items():
    values = [by_round[k] for k in sorted(by_round)]
    print(f"| {what} | {statistics.median(values):g} | {', '.join(f'{v:g}' for v in values)} |")
med = {w: statistics.median(v.values()) for w, v in rows.items()}
print()
print(f"- Spindle puts / the disk's dd rate: {med['spindle_put_mb_s'] / med['dd_mb_s']:.2f}x (target >= 0.8)")
print(f"- Spindle puts / RocksDB with blob files: {med['spindle_put_mb_s'] / med['rocksdb_blob_put_mb_s']:.2f}x (target >= 1)")
churn = statistics.median([med[f'spindle_overwrite{i}_mb_s'] for i in (1, 2, 3)])
print(f"- overwrite rounds (collector running) / first puts: {churn / med['spindle_put_mb_s']:.2f}x (target >= 0.7)")
print(f"- live data / value log on disk after the collector: {med['live_share_after_gc']:.2f} (target >= 0.5)")
print(f"- put p99 {med['spindle_put_p99_ms']:g} ms (target < 20); the disk's own p99 for 1 MiB writes from 16 writers (fio): {med['fio_write_p99_ms']:g} ms")
EOF
)
echo "$report"
if [[ -n $out ]]; then echo "$report" >"$out"; log "wrote $out"; fi
