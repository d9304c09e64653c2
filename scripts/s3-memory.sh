#!/usr/bin/env bash
# The S3 gateway streams with bounded memory: a GIB-GiB object goes up (multipart, as awscli
# sends anything large) and comes back down through a gateway over one drive, and the
# gateway's peak resident memory (VmHWM) stays under LIMIT MiB. Contents are checked by MD5
# on both sides; nothing is written to local disk but the drive's data.
#
#   scripts/s3-memory.sh SPINDLE_BIN [--gib 4] [--limit-mib 512]
#
# Uses the awscli that scripts/s3-clients.sh installs (target/s3-venv), installing it first if
# missing. Every process started here is stopped on exit, failure and interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
spindle_bin=${1:?usage: scripts/s3-memory.sh SPINDLE_BIN [--gib N] [--limit-mib N]}
shift
gib=4 limit_mib=512
while [[ $# -gt 0 ]]; do
  case $1 in
    --gib) gib=$2; shift 2 ;;
    --limit-mib) limit_mib=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
log() { echo "[s3-memory] $*" >&2; }
die() { log "$*"; exit 1; }
work=$(mktemp -d)
source scripts/servers.sh
watcher=
cleanup() {
  [[ -n $watcher ]] && kill "$watcher" 2>/dev/null || true
  stop_servers
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

aws=$root/target/s3-venv/bin/aws
if [[ ! -x $aws ]]; then
  log "installing the S3 clients (scripts/s3-clients.sh --install-only)"
  scripts/s3-clients.sh "$spindle_bin" --install-only
fi
[[ -x $aws ]] || die "no awscli at $aws"

start_drive drive "$spindle_bin"
start_server gateway 'listening on 127\.0\.0\.1:([0-9]+)' sh -c "exec '$spindle_bin' s3 --drive 127.0.0.1:$drive_port \
    --listen 127.0.0.1:0 --access-key memtest --secret-key memtest-secret 2>&1"
gateway_pid=$server_pid
# `sh -c exec` keeps the PID: the gateway itself.
export AWS_ACCESS_KEY_ID=memtest AWS_SECRET_ACCESS_KEY=memtest-secret AWS_DEFAULT_REGION=us-east-1
export AWS_CONFIG_FILE=$work/aws.conf
printf '[default]\ns3 =\n    addressing_style = path\n    multipart_chunksize = 64MB\n    max_concurrent_requests = 4\n' >"$AWS_CONFIG_FILE"
s3() { local verb=$1; shift; "$aws" --endpoint-url "http://127.0.0.1:$server_match" s3 "$verb" "$@"; }

# Samples the gateway's resident memory while the transfers run (VmHWM gives the peak too).
( while kill -0 "$gateway_pid" 2>/dev/null; do grep VmRSS "/proc/$gateway_pid/status" >>"$work/rss" 2>/dev/null || true; sleep 0.5; done ) &
watcher=$!

bytes=$((gib << 30))
s3 mb s3://memory
log "uploading $gib GiB"
start=$SECONDS
head -c "$bytes" /dev/urandom | tee >(md5sum | cut -d' ' -f1 >"$work/up.md5") |
  s3 cp --only-show-errors - s3://memory/big --expected-size "$bytes"
log "upload took $((SECONDS - start)) s"
start=$SECONDS
s3 cp --only-show-errors s3://memory/big - | md5sum | cut -d' ' -f1 >"$work/down.md5"
log "download took $((SECONDS - start)) s"
sleep 0.5
up=$(cat "$work/up.md5") down=$(cat "$work/down.md5")
[[ $up == "$down" ]] || die "contents differ: up $up, down $down"
hwm_kib=$(awk '/VmHWM/ {print $2}' "/proc/$gateway_pid/status")
rss_max_kib=$(awk '{print $2}' "$work/rss" | sort -n | tail -1)
log "gateway peak resident memory: $((hwm_kib / 1024)) MiB (sampled max $((rss_max_kib / 1024)) MiB), limit $limit_mib MiB"
((hwm_kib / 1024 < limit_mib)) || die "the gateway's peak resident memory $((hwm_kib / 1024)) MiB is over $limit_mib MiB"
echo "s3 memory: $gib GiB up and down, md5 $up, peak RSS $((hwm_kib / 1024)) MiB < $limit_mib MiB: ok"
