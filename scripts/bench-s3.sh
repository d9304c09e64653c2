#!/usr/bin/env bash
# S3: Spindle's gateway (`spindle s3` over one `spindle drive`) and MinIO (single node, one
# directory), side by side in one run, measured by the same load generator (`spindle bench s3`,
# warp's PUT and GET definitions). Both servers keep their data on the same disk (this script's
# work directory) and listen on loopback; for each cell (operation x object size) the two are
# measured one after the other, the order alternating from cell to cell, and the server not
# being measured is paused (SIGSTOP), so neither's background work (MinIO's scanner, the
# drive's compactions) runs on the other's time. Server CPU per MiB is read from /proc for
# MinIO's process and for the gateway plus its drive.
#
#   scripts/bench-s3.sh --spindle BIN [--quick] [--out FILE.md] [--results DIR]
#       [--servers minio,spindle] [--duration 20s] [--concurrency 8] [--settle 10] [--tls]
#       [--versioning]
#
# --versioning: the bucket is versioned on both servers (made and switched on with awscli from
# the S3 clients' venv, scripts/s3-clients.sh --install-only): every overwrite and delete keeps
# a version.
# --tls: both servers over HTTPS, with one certificate for 127.0.0.1 (from a throwaway CA made
# by `spindle cluster new-credentials` and `issue-cert`) that the load generator trusts.
#
# --settle S: before each measurement, sync and wait S seconds, so that no server pays for the
# writes of the one measured before it (on a VM the host's cache drains behind the guest).
#
# --servers may add minio-relay: the same MinIO reached through a TCP relay (`spindle bench
# relay`), so with one more loopback hop, as Spindle's gateway reaches its drive; its CPU is
# MinIO's plus the relay's.
#
# MinIO is taken from $MINIO_BIN, target/go-bin/minio, $HOME/go/bin/minio or PATH, and else
# installed into target/go-bin with `go install` (about 2.5 minutes on 2 cores). --quick is a
# smoke run of a few seconds per cell (1 MiB and 32 MiB objects, 2 workers). Writes the
# Markdown table to stdout (and FILE.md, with the JSON of every run beside it in FILE.json);
# exits 3 if any operation failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
spindle_bin= quick=0 out= results= servers=minio,spindle duration= concurrency=8 settle= tls=0 versioning=0
while [ $# -gt 0 ]; do
  case $1 in
    --spindle) spindle_bin=$2; shift ;;
    --quick) quick=1 ;;
    --out) out=$2; shift ;;
    --results) results=$2; shift ;;
    --servers) servers=$2; shift ;;
    --duration) duration=$2; shift ;;
    --concurrency) concurrency=$2; shift ;;
    --settle) settle=$2; shift ;;
    --tls) tls=1 ;;
    --versioning) versioning=1 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$spindle_bin" ]; then
  echo "usage: $0 --spindle BIN [--quick] [--out FILE.md] [--results DIR] [--servers minio,spindle] [--duration D] [--concurrency N]" >&2
  exit 2
fi
spindle_bin=$(realpath "$spindle_bin")
work=$(mktemp -d "$root/target/bench-s3.XXXXXX")
log() { echo "bench-s3: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=servers.sh
source scripts/servers.sh
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

want() { [[ ,$servers, == *,$1,* ]]; }
scheme=http tls_trust=() minio_tls=() spindle_tls=()
if ((tls)); then
  scheme=https
  "$spindle_bin" cluster new-credentials --cluster bench --credentials "$work/ca" >/dev/null
  "$spindle_bin" cluster issue-cert --credentials "$work/ca" --name 127.0.0.1 --out "$work/cert" >/dev/null
  mkdir -p "$work/minio-certs"
  cp "$work/cert/cert.pem" "$work/minio-certs/public.crt"
  cp "$work/cert/key.pem" "$work/minio-certs/private.key"
  tls_trust=(--tls-trust "$work/ca/ca.pem")
  minio_tls=(--certs-dir "$work/minio-certs")
  spindle_tls=(--tls-cert "$work/cert/cert.pem" --tls-key "$work/cert/key.pem")
fi
access_key=spindlebench
secret_key=$(python3 -c 'import secrets; print(secrets.token_hex(16))')

if [ $quick = 1 ]; then
  : "${duration:=2s}" "${settle:=0}"
  concurrency=2
  # A small prepared set keeps the GET cells' untimed uploads short; 32 MiB objects still go
  # up as multipart uploads of two parts.
  objects=(--objects 4)
  cells=("put 1MiB" "get 1MiB" "put 32MiB" "get 32MiB")
else
  : "${duration:=20s}" "${settle:=10}"
  objects=()
  cells=("put 1MiB" "get 1MiB" "put 64MiB" "get 64MiB")
fi

find_minio() {
  minio_bin=$("$root/scripts/minio-bin.sh") || die "no MinIO"
}

minio_pid= spindle_pids=
if want minio || want minio-relay; then
  find_minio
  minio_port=$(free_port) minio_console=$(free_port)
  mkdir -p "$work/minio-data"
  # Single node, single directory (MinIO's "single drive" mode); console, update check and
  # telemetry off, so only the S3 API costs CPU.
  # It says it is ready on stderr: merged into the log start_server watches.
  start_server minio 'API: https?:[^0-9]*127\.0\.0\.1:([0-9]+)' sh -c 'exec "$0" "$@" 2>&1' env MINIO_ROOT_USER=$access_key MINIO_ROOT_PASSWORD=$secret_key \
    MINIO_BROWSER=off MINIO_UPDATE=off \
    "$minio_bin" server --address "127.0.0.1:$minio_port" --console-address "127.0.0.1:$minio_console" ${minio_tls[@]+"${minio_tls[@]}"} "$work/minio-data"
  minio_pid=$server_pid
  minio_url=$scheme://127.0.0.1:$minio_port
  minio_version=$("$minio_bin" --version 2>/dev/null | head -n 1 | sed 's/^minio version //')
fi
relay_pid=
if want minio-relay; then
  # It says where it listens on stderr: merged into the log start_server watches.
  start_server minio-relay 'relaying on [^0-9]*127\.0\.0\.1:([0-9]+)' sh -c 'exec "$0" "$@" 2>&1' \
    "$spindle_bin" bench relay --listen 127.0.0.1:0 --to "127.0.0.1:$minio_port"
  relay_pid=$server_pid
  relay_url=$scheme://127.0.0.1:$server_match
fi
if want spindle; then
  "$spindle_bin" s3 --help >/dev/null 2>&1 || die "$spindle_bin has no 's3' command (the gateway): run with --servers minio"
  start_drive spindle-drive "$spindle_bin"
  drive_pid_=$drive_pid
  gateway_port=$(free_port)
  # The gateway says it is ready on stderr: merged into the log start_server watches.
  start_server spindle-s3 'listening on [^0-9]*127\.0\.0\.1:([0-9]+)' sh -c 'exec "$0" "$@" 2>&1' "$spindle_bin" s3 \
    --drive "127.0.0.1:$drive_port" --listen "127.0.0.1:$gateway_port" --access-key "$access_key" --secret-key "$secret_key" \
    ${spindle_tls[@]+"${spindle_tls[@]}"}
  spindle_pids="$server_pid,$drive_pid_"
  spindle_url=$scheme://127.0.0.1:$server_match
fi

if ((versioning)); then
  scripts/s3-clients.sh "$spindle_bin" --install-only >&2
  aws=$root/target/s3-venv/bin/aws
  ca=()
  ((tls)) && ca=(--ca-bundle "$work/ca/ca.pem")
  for url in ${minio_url:-} ${spindle_url:-}; do
    AWS_ACCESS_KEY_ID=$access_key AWS_SECRET_ACCESS_KEY=$secret_key AWS_DEFAULT_REGION=us-east-1 \
      "$aws" --endpoint-url "$url" ${ca[@]+"${ca[@]}"} s3api create-bucket --bucket spindle-bench >/dev/null
    AWS_ACCESS_KEY_ID=$access_key AWS_SECRET_ACCESS_KEY=$secret_key AWS_DEFAULT_REGION=us-east-1 \
      "$aws" --endpoint-url "$url" ${ca[@]+"${ca[@]}"} s3api put-bucket-versioning --bucket spindle-bench --versioning-configuration Status=Enabled
    log "versioning enabled on $url"
  done
fi

# Runs SERVER only: the other one paused.
only_server() { # minio|minio-relay|spindle
  local p
  for p in $minio_pid $relay_pid ${spindle_pids//,/ }; do kill -STOP "$p" 2>/dev/null || true; done
  case $1 in
    minio) kill -CONT "$minio_pid" ;;
    minio-relay) kill -CONT "$minio_pid" "$relay_pid" ;;
    spindle) for p in ${spindle_pids//,/ }; do kill -CONT "$p"; done ;;
  esac
}

failed=0
files=()
measure() { # SERVER OP SIZE
  local server=$1 op=$2 size=$3 url pids file
  case $server in
    minio) url=$minio_url pids=$minio_pid ;;
    minio-relay) url=$relay_url pids=$minio_pid,$relay_pid ;;
    spindle) url=$spindle_url pids=$spindle_pids ;;
  esac
  file=$work/$server-$op-$size.json
  only_server "$server"
  # Each server starts on a disk at rest: what the one before wrote is synced, and the disk
  # (on a VM, the host's cache behind it) is given a few seconds to write it out.
  sync
  sleep "$settle"
  log "$server: $op $size x $concurrency for $duration"
  if ! "$spindle_bin" bench s3 --endpoint "$url" --access-key "$access_key" --secret-key "$secret_key" \
    --label "$server" --op "$op" --size "$size" --concurrency "$concurrency" --duration "$duration" \
    ${objects[@]+"${objects[@]}"} ${tls_trust[@]+"${tls_trust[@]}"} --server-pid "$pids" --json "$file" >"$work/$server-$op-$size.md" 2>"$work/$server-$op-$size.err"; then
    failed=1
    log "$server $op $size failed:"
    cat "$work/$server-$op-$size.md" "$work/$server-$op-$size.err" >&2
  fi
  [[ -s $file ]] && files+=("$file")
  return 0
}

started=$(date +%s)
i=0
for c in "${cells[@]}"; do
  read -r op size <<<"$c"
  order=(minio minio-relay spindle)
  ((i % 2 == 1)) && order=(spindle minio-relay minio)
  for s in "${order[@]}"; do
    want "$s" && measure "$s" "$op" "$size"
  done
  i=$((i + 1))
done
((${#files[@]} > 0)) || die "no run produced a result"
table=$("$spindle_bin" bench s3-compare --baseline minio "${files[@]}")
echo "$table"

durability() {
  want minio-relay && echo "- minio-relay: the same MinIO behind \`spindle bench relay\` (a TCP relay through user space, 256 KiB copies each way), so with the loopback hop Spindle's gateway makes to its drive; its CPU is MinIO's plus the relay's."
  want minio && echo "- MinIO (\`minio --version\`: $minio_version; scripts/minio-bin.sh installs it if missing), single node on one directory (its \"single drive\" mode): object data written with O_DIRECT and fdatasync before the answer, metadata (xl.meta, small objects inline) likewise synced; directory entries of renames not synced (MINIO_FS_OSYNC off, the default)."
  want spindle && echo "- Spindle: \`spindle s3\` over one \`spindle drive\` (default engine), an object's chunks written back and made durable by one FLUSHALLDATA before its manifest is written through (WRITETHROUGH), so an acknowledged object is on disk whole. Server CPU is the gateway's plus the drive's."
  return 0
}
if [ -n "$results" ]; then
  mkdir -p "$results"
  cp "${files[@]}" "$results/"
fi
if [ -n "$out" ]; then
  {
    echo "# S3: Spindle's gateway and MinIO, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Reproduce: \`scripts/bench-s3.sh --spindle PATH$([ $quick = 1 ] && echo ' --quick')$([ $tls = 1 ] && echo ' --tls')$([ $versioning = 1 ] && echo ' --versioning') --servers $servers --duration $duration --concurrency $concurrency --settle $settle\` on a $(nproc)-core $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1) with $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); every server on 127.0.0.1 with its data on $(df --output=source,fstype "$work" | tail -n 1 | tr -s ' ' ' '), the load generator (\`spindle bench s3\`) on the same $(nproc) cores. Per cell: $concurrency workers, each with its own keep-alive connection and one request in flight, for $duration; GET reads a prepared set ($([ $quick = 1 ] && echo "4 objects" || echo "about 1 GiB, at most 2500 objects")) uploaded before the clock starts, whole bodies; objects of 16 MiB and more go up as multipart uploads in 16 MiB parts (a 64 MiB object: 4 parts, one after the other). Requests are SigV4 presigned (payload unsigned) HTTP/1.1$([ $tls = 1 ] && echo ' over TLS (both servers serve HTTPS with one certificate; the load generator is a rustls client)')$([ $versioning = 1 ] && echo '; the bucket is versioned on both servers (every overwrite and delete keeps a version)'). The server not measured is paused; before each measurement the disk is synced and left ${settle} s to settle. Took $(($(date +%s) - started)) s."
    echo
    durability
    echo
    echo "Ratios are Spindle ÷ MinIO: above 1 is better for MiB/s and obj/s, below 1 is better for latency, TTFB and CPU s/MiB."
    echo
    echo "$table"
  } >"$out"
  python3 -c 'import json, sys; print(json.dumps([json.load(open(f)) for f in sys.argv[1:]], indent=1))' "${files[@]}" >"${out%.md}.json"
fi
if [ $failed = 1 ] || grep -q '"errors": [1-9]' "${files[@]}"; then
  log "some operations failed"
  exit 3
fi
