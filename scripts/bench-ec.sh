#!/usr/bin/env bash
# Erasure-coded S3 storage, side by side in one run: Spindle's gateway writing a 4+2 pool of
# drives (`spindle cluster pool`, its manifests on three replicated drives) and MinIO, single
# node over six drive directories on the same disk (it codes them with its default parity),
# measured by the same load generator (`spindle bench s3`), and the same MinIO behind a TCP
# relay (the loopback hop Spindle's gateway makes to its drives) as a floor in the healthy
# cells. Before each cell every server is left to settle, then the servers not measured are
# paused (SIGSTOP) and the disk synced, the order alternating from cell to cell; server CPU
# per MiB is read from /proc (Spindle: the gateway, every drive, the coordinator and etcd).
#
#   scripts/bench-ec.sh --spindle BIN [--quick] [--out FILE.md] [--duration 20s]
#       [--concurrency 8] [--settle 10] [--transition-objects 10000]
#
# Measured:
# - PUT and GET of 1 MiB and 64 MiB objects; raw bytes on disk per byte stored (the data
#   directories' growth over the bytes a PUT run left, which the run keeps);
# - GET with two drives down: Spindle's two pool drives SIGKILLed, MinIO restarted without two
#   of its six directories;
# - Spindle's rebuild of a drive lost for good (its positions rebuilt on the spare, unthrottled),
#   beside the disk's sequential write rate measured by dd in the same run;
# - a lifecycle transition of a bucket of small objects from STANDARD to the coded class
#   (Spindle only: MinIO moves objects only to a remote tier).
# Writes the Markdown report to stdout (and FILE.md, with every run's JSON beside it); exits 3
# if any operation failed. Everything it starts is stopped on exit, failure and interrupt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
spindle_bin= quick=0 out= duration= concurrency=8 settle= transition_objects=
while [ $# -gt 0 ]; do
  case $1 in
    --spindle) spindle_bin=$2; shift ;;
    --quick) quick=1 ;;
    --out) out=$2; shift ;;
    --duration) duration=$2; shift ;;
    --concurrency) concurrency=$2; shift ;;
    --settle) settle=$2; shift ;;
    --transition-objects) transition_objects=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$spindle_bin" ] || { sed -n '2,24p' "$0" >&2; exit 2; }
spindle_bin=$(realpath "$spindle_bin")
work=$(mktemp -d "$root/target/bench-ec.XXXXXX")
log() { echo "bench-ec: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=servers.sh
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

if [ $quick = 1 ]; then
  : "${duration:=2s}" "${settle:=0}" "${transition_objects:=200}"
  concurrency=2 objects=(--objects 4) big=32MiB
else
  : "${duration:=20s}" "${settle:=10}" "${transition_objects:=10000}"
  objects=() big=64MiB
fi
access_key=spindlebench
secret_key=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
scripts/s3-clients.sh "$spindle_bin" --install-only >&2
python=$root/target/s3-venv/bin/python
command -v etcd >/dev/null || apt_install etcd-server || die "could not install etcd"

# MinIO: single node, six directories (its erasure mode; MINIO_CI_CD lets it take directories
# of one disk).
minio_bin=$("$root/scripts/minio-bin.sh") || die "no MinIO"
minio_port=$(free_port) minio_console=$(free_port)
mkdir -p "$work"/minio/d{1..6}
start_minio() { # NAME (its log's name: a restart takes another)
  start_server "$1" 'API: https?:[^0-9]*127\.0\.0\.1:([0-9]+)' sh -c 'exec "$0" "$@" 2>&1' env MINIO_ROOT_USER=$access_key MINIO_ROOT_PASSWORD=$secret_key \
    MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CI_CD=on \
    "$minio_bin" server --address "127.0.0.1:$minio_port" --console-address "127.0.0.1:$minio_console" "$work/minio/d{1...6}"
  minio_pid=$server_pid
}
start_minio minio
minio_url=http://127.0.0.1:$minio_port
# The same MinIO behind a TCP relay (`spindle bench relay`): one more loopback hop, as the
# gateway makes to its drives, so a floor for the comparison (its CPU is MinIO's plus the
# relay's).
start_server minio-relay 'relaying on [^0-9]*127\.0\.0\.1:([0-9]+)' sh -c 'exec "$0" "$@" 2>&1' \
  "$spindle_bin" bench relay --listen 127.0.0.1:0 --to "127.0.0.1:$minio_port"
relay_pid=$server_pid
relay_url=http://127.0.0.1:$server_match
minio_version=$("$minio_bin" --version 2>/dev/null | head -n 1 | sed 's/^minio version //')

# Spindle: etcd, a coordinator, three replicated drives for the manifests, a 4+2 pool of six
# drives and a spare (the rebuild's target), and a gateway whose default class is the pool's.
start_etcd etcd
"$spindle_bin" cluster init --etcd "$etcd_url" --partitions 64 --replicas 3 --write-quorum 2 >/dev/null
etcd_pid=$server_pid
# Drives down are never replaced on their own here (an hour): the degraded cells read with two
# drives down and no rebuild beside them; the rebuild is asked for by removing a drive.
start_server coordinator 'coordinator .* (for) cluster' sh -c "exec '$spindle_bin' cluster coordinator --etcd $etcd_url \
  --replace-after-ms 3600000 --migrate-mib-s 0 --sweep-interval-ms 2000 2>&1"
coordinator_pid=$server_pid
spindle_pids="$etcd_pid,$coordinator_pid"
for i in 1 2 3; do
  start_drive "meta$i" "$spindle_bin"
  spindle_pids+=",$drive_pid"
  "$spindle_bin" cluster add-drive "meta$i" "127.0.0.1:$drive_port" --etcd "$etcd_url" >/dev/null
done
"$spindle_bin" cluster pool add cold --ec 4+2 --etcd "$etcd_url" >/dev/null
declare -A pool_pid pool_port
for i in 1 2 3 4 5 6 7; do
  start_drive "cold$i" "$spindle_bin"
  pool_pid[$i]=$drive_pid pool_port[$i]=$drive_port
  spindle_pids+=",$drive_pid"
  "$spindle_bin" cluster add-drive "cold$i" "127.0.0.1:$drive_port" --pool cold --etcd "$etcd_url" >/dev/null
done
pool_json() { "$spindle_bin" cluster pool status cold --etcd "$etcd_url" --json; }
deadline=$((SECONDS + 120))
until pool_json | python3 -c 'import json,sys; p=json.load(sys.stdin)["pools"][0]; sys.exit(0 if p["placed"] == p["groups"] and all(d["up"] for d in p["drives"]) and p["groups_to_rebuild"] == 0 else 1)'; do
  ((SECONDS < deadline)) || die "the pool was not placed in 120 s"
  sleep 0.5
done
gateway_port=$(free_port)
start_server spindle-s3 'listening on [^0-9]*127\.0\.0\.1:([0-9]+)' sh -c 'exec "$0" "$@" 2>&1' "$spindle_bin" s3 \
  --cluster "etcd://${etcd_url#http://}" --listen "127.0.0.1:$gateway_port" --access-key "$access_key" --secret-key "$secret_key" \
  --storage-class STANDARD_IA=cold --default-storage-class STANDARD_IA --sweep-grace-secs 10 --sweep-interval-secs 5
spindle_pids+=",$server_pid"
spindle_url=http://127.0.0.1:$gateway_port

only_server() { # minio|minio-relay|spindle
  local p
  for p in $minio_pid $relay_pid ${spindle_pids//,/ }; do kill -STOP "$p" 2>/dev/null || true; done
  case $1 in
    minio) kill -CONT "$minio_pid" ;;
    minio-relay) kill -CONT "$minio_pid" "$relay_pid" ;;
    spindle) for p in ${spindle_pids//,/ }; do kill -CONT "$p" 2>/dev/null || true; done ;;
  esac
}
resume_all() { for p in $minio_pid $relay_pid ${spindle_pids//,/ }; do kill -CONT "$p" 2>/dev/null || true; done; }
data_bytes() { # minio|spindle
  case $1 in
    minio) du -sb "$work/minio" | cut -f1 ;;
    spindle) du -sb "$work"/cold* | awk '{ s += $1 } END { print s }' ;;
  esac
}

failed=0 files=()
measure() { # SERVER OP SIZE LABEL [bench flags]
  local server=$1 op=$2 size=$3 label=$4 url pids file
  shift 4
  case $server in
    minio) url=$minio_url pids=$minio_pid ;;
    minio-relay) url=$relay_url pids=$minio_pid,$relay_pid ;;
    spindle) url=$spindle_url pids=$spindle_pids ;;
  esac
  file=$work/$label-$op-$size.json
  # Every server finishes its background work (Spindle's gateway sweeps deleted objects)
  # before the measured one runs alone. MinIO moves deleted objects to a trash it purges
  # slowly (22 GiB of it after the raw run): emptied here, as its purge would, or a full
  # run's cells do not fit the disk.
  find "$work"/minio/d*/.minio.sys/tmp/.trash -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null || true
  sleep "$settle"
  only_server "$server"
  sync
  log "$label: $op $size x $concurrency for $duration"
  if ! "$spindle_bin" bench s3 --endpoint "$url" --access-key "$access_key" --secret-key "$secret_key" \
    --label "$label" --op "$op" --size "$size" --concurrency "$concurrency" --duration "$duration" \
    ${objects[@]+"${objects[@]}"} --server-pid "$pids" --json "$file" "$@" >"$work/$label-$op-$size.md" 2>"$work/$label-$op-$size.err"; then
    failed=1
    log "$label $op $size failed:"
    cat "$work/$label-$op-$size.md" "$work/$label-$op-$size.err" >&2
  fi
  [[ -s $file ]] && files+=("$file")
  resume_all
  return 0
}
started=$(date +%s)

# Raw bytes per byte: a PUT run whose objects are kept, against the directories' growth.
declare -A raw
for s in minio spindle; do
  sync
  before=$(data_bytes $s)
  measure $s put "$big" "$s-raw" --no-cleanup --bucket "raw-$s"
  sync
  sleep 2
  after=$(data_bytes $s)
  stored=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["objects_per_second"] * r["seconds"] * r["spec"]["object_bytes"])' "$work/$s-raw-put-$big.json" 2>/dev/null || echo 0)
  raw[$s]=$(python3 -c "print(f'{($after - $before) / $stored:.2f}' if $stored > 0 else 'n/a')")
  log "$s: ${raw[$s]} raw bytes per byte stored"
done
# MinIO's raw run is deleted again (a full run's cells need the disk it takes); Spindle's stays
# as the data the rebuild below rebuilds.
empty_bucket() { # URL BUCKET
  "$python" - "$1" "$2" "$access_key" "$secret_key" <<'PY'
import sys
import boto3
from botocore.config import Config
url, bucket, ak, sk = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=url, aws_access_key_id=ak, aws_secret_access_key=sk, region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
    keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
    if keys:
        s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
PY
}
resume_all
empty_bucket "$minio_url" raw-minio

i=0
for c in "put 1MiB" "get 1MiB" "put $big" "get $big"; do
  read -r op size <<<"$c"
  order=(minio minio-relay spindle)
  ((i % 2 == 1)) && order=(spindle minio-relay minio)
  # GET runs keep their objects under a known prefix: the degraded runs read them again.
  keep=()
  [ "$op" = get ] && keep=(--prefix "get-$size" --no-cleanup)
  for s in "${order[@]}"; do measure "$s" "$op" "$size" "$s" ${keep[@]+"${keep[@]}"}; done
  i=$((i + 1))
done

# Two drives down. Spindle: two pool drives killed (their groups read from parity). MinIO:
# restarted without two of its six directories.
kill -KILL "${pool_pid[1]}" "${pool_pid[2]}"
spindle_pids=$(tr ',' '\n' <<<"$spindle_pids" | grep -vx -e "${pool_pid[1]}" -e "${pool_pid[2]}" | paste -sd,)
stop_pid "$minio_pid" minio 20
mv "$work/minio/d1" "$work/minio.d1.off"
mv "$work/minio/d2" "$work/minio.d2.off"
mkdir -p "$work/minio/d1" "$work/minio/d2"
start_minio minio-degraded
for c in "get 1MiB" "get $big"; do
  read -r op size <<<"$c"
  for s in spindle minio; do
    measure "$s" "$op" "$size" "$s-degraded" --prefix "get-$size" --prepared --no-cleanup
  done
done

# Rebuild: cold2 back with its data, cold1 lost for good (removed by the operator). The
# coordinator gives cold1's positions to the spare and rebuilds them there from the others,
# unthrottled; the disk's own write rate is measured first, with dd.
dd if=/dev/zero of="$work/dd.bin" bs=1M count=1024 oflag=direct conv=fdatasync 2>"$work/dd.err" || true
disk_mib_s=$(sed -n 's/.*, \([0-9.]*\) \([MG]\)B\/s$/\1 \2/p' "$work/dd.err" | awk '{ print ($2 == "G" ? $1 * 1000 : $1) * 1000000 / 1048576 }')
dd if="$work/dd.bin" of=/dev/null bs=1M iflag=direct 2>"$work/dd-read.err" || true
disk_read_mib_s=$(sed -n 's/.*, \([0-9.]*\) \([MG]\)B\/s$/\1 \2/p' "$work/dd-read.err" | awk '{ print ($2 == "G" ? $1 * 1000 : $1) * 1000000 / 1048576 }')
rm -f "$work/dd.bin"
start_server cold2-back 'spindle drive listening on 127\.0\.0\.1:([0-9]+)' "$spindle_bin" drive --data "$work/cold2/data" \
  --port "${pool_port[2]}" --tls-port 0 --listen 127.0.0.1
spindle_pids+=",$server_pid"
# MinIO (healing its two emptied directories by now) is paused while the rebuild runs.
kill -STOP "$minio_pid" "$relay_pid"
"$spindle_bin" cluster remove-drive cold1 --wait-secs 0 --etcd "$etcd_url" >/dev/null
wait_rebuild() {
  pool_json | python3 -c 'import json,sys; p=json.load(sys.stdin)["pools"][0]; r=p["rebuild"] or {}; sys.exit(0 if p["groups_to_rebuild"] == 0 and r.get("finished") and r.get("groups_done", 0) > 0 else 1)'
}
deadline=$((SECONDS + 1800))
until wait_rebuild; do
  ((SECONDS < deadline)) || die "the rebuild did not finish in 30 minutes"
  sleep 1
done
# Every drive of the pool is on the one disk here, so a rebuild's floor is that disk reading
# DATA (4) shards and writing one for each shard rebuilt: 1 / (4 / read rate + 1 / write rate).
rebuild=$(pool_json | python3 -c '
import json, sys
r = json.load(sys.stdin)["pools"][0]["rebuild"]
write, read = (float(x) if x else 0.0 for x in sys.argv[1:3])
secs = (r["updated_ms"] - r["started_ms"]) / 1000
mib, rate, shards, groups = r["bytes"] / 1048576, r["mib_per_sec"], r["shards"], r["groups_done"]
floor = 1 / (4 / read + 1 / write) if read > 0 and write > 0 else 0
ratio = f"{rate / write:.2f}x the write rate, {rate / floor:.2f}x the shared disk floor of {floor:.0f} MiB/s" if floor else "no disk rate"
print(f"{mib:.0f} MiB in {secs:.1f} s, {rate:.0f} MiB/s ({ratio}), {shards} shards over {groups} groups")' "$disk_mib_s" "$disk_read_mib_s")
log "rebuild: $rebuild (disk: write ${disk_mib_s} MiB/s, read ${disk_read_mib_s} MiB/s)"
resume_all

# A lifecycle transition of a bucket of small objects, STANDARD to the coded class, by a
# gateway whose lifecycle day is a second.
tx_port=$(free_port) tx_metrics=$(free_port)
start_server spindle-s3-lifecycle 'listening on [^0-9]*127\.0\.0\.1:([0-9]+)' sh -c 'exec "$0" "$@" 2>&1' "$spindle_bin" s3 \
  --cluster "etcd://${etcd_url#http://}" --listen "127.0.0.1:$tx_port" --access-key "$access_key" --secret-key "$secret_key" \
  --storage-class STANDARD_IA=cold --lifecycle-interval-secs 1 --lifecycle-day-secs 1 --metrics-listen "127.0.0.1:$tx_metrics"
transition=$("$python" - "$tx_port" "$access_key" "$secret_key" "$transition_objects" "$tx_metrics" <<'PY'
import sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor
import boto3
from botocore.config import Config
port, ak, sk, n, metrics = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id=ak, aws_secret_access_key=sk,
                  region_name="us-east-1", config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))
s3.create_bucket(Bucket="transition")
body = bytes(range(256)) * 64  # 16 KiB
with ThreadPoolExecutor(16) as pool:
    list(pool.map(lambda i: s3.put_object(Bucket="transition", Key=f"o{i:06d}", Body=body, StorageClass="STANDARD"), range(n)))
def moved():
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=30).read().decode()
    return next((float(l.split()[1]) for l in text.splitlines() if l.startswith("spindle_s3_lifecycle_transitioned_total")), 0.0)
start = time.monotonic()
s3.put_bucket_lifecycle_configuration(Bucket="transition", LifecycleConfiguration={"Rules": [
    {"ID": "cool", "Status": "Enabled", "Filter": {"Prefix": ""}, "Transitions": [{"Days": 1, "StorageClass": "STANDARD_IA"}]}]})
while moved() < n:
    assert time.monotonic() - start < 3600, f"{moved()} of {n} objects moved in an hour"
    time.sleep(0.5)
took = time.monotonic() - start
head = s3.head_object(Bucket="transition", Key=f"o{n - 1:06d}")
assert head.get("StorageClass") == "STANDARD_IA", head
print(f"{n} objects of 16 KiB in {took:.1f} s ({n / took:.0f} objects/s; the first second is the rule's one-day wait)")
PY
) || { failed=1; transition="failed"; }
log "transition: $transition"

table=$("$spindle_bin" bench s3-compare --baseline minio "${files[@]}")
report() {
  echo "# Erasure-coded S3: Spindle's 4+2 pool and MinIO on six directories, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Reproduce: \`scripts/bench-ec.sh --spindle PATH$([ $quick = 1 ] && echo ' --quick') --duration $duration --concurrency $concurrency --settle $settle --transition-objects $transition_objects\` on a $(nproc)-core $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1), every server on 127.0.0.1 with its data on one disk ($(df --output=source,fstype "$work" | tail -n 1 | tr -s ' ' ' ')). Took $(($(date +%s) - started)) s."
  echo
  echo "- Spindle: \`spindle s3\` over a cluster: manifests on three replicated drives (R=3, W=2), object data as 1 MiB stripes in a 4+2 pool of seven drives (six per stripe, one more so writes go on with one down), every shard written through before a PUT is answered. Server CPU: gateway, drives, coordinator, etcd."
  echo "- MinIO $minio_version, single node over six directories (its erasure mode, default parity)."
  echo "- minio-relay: the same MinIO behind \`spindle bench relay\` (a TCP relay through user space), so with the loopback hop Spindle's gateway makes to its drives: the floor for a server one hop in front of its disks. Its CPU is MinIO's plus the relay's."
  echo
  echo "Raw bytes on disk per byte stored (the $big PUT run's objects kept): Spindle ${raw[spindle]}, MinIO ${raw[minio]}."
  echo
  echo "Rebuild of one lost drive (its positions rebuilt on the others, unthrottled): $rebuild; the disk's sequential rates in the same run (dd, 1 GiB, O_DIRECT; the write with fdatasync): write ${disk_mib_s} MiB/s, read ${disk_read_mib_s} MiB/s. Every drive of the pool is on that one disk, which reads four shards and writes one for each shard rebuilt: the floor is 1 / (4 / read + 1 / write)."
  echo
  echo "Lifecycle transition STANDARD → STANDARD_IA (Spindle): $transition."
  echo
  echo "Labels: \`-degraded\` runs have two drives down (Spindle: two of the pool's drives SIGKILLed; MinIO: restarted without two of its six directories). Ratios are Spindle ÷ MinIO."
  echo
  echo "$table"
}
report
[ -z "$out" ] || { report >"$out"; python3 -c 'import json, sys; print(json.dumps([json.load(open(f)) for f in sys.argv[1:]], indent=1))' "${files[@]}" >"${out%.md}.json"; }
if [ $failed = 1 ] || grep -q '"errors": [1-9]' "${files[@]}"; then
  log "some operations failed"
  exit 3
fi
