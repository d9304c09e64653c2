#!/usr/bin/env bash
# The directory-sync audit: runs a drive under strace through a workload that makes every kind
# of file the drive keeps (settings, TLS identity, journals and their rotation, tables, blob
# files of large values, an erase), kills it with SIGKILL, and lists every directory entry the
# drive created or renamed without a later fsync of its directory (scripts/fsync-audit.py).
# Exit status 1 if there is one: a power cut could take that entry back.
#
#   scripts/fsync-audit.sh [SPINDLE_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
spindle=${1:-target/debug/spindle}
command -v strace >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null; }
work=$(mktemp -d)
pid= drive=
cleanup() {
  # The drive is strace's child: killing strace alone would leave it running, detached.
  [[ -z $drive ]] || kill -KILL "$drive" 2>/dev/null || true
  if [[ -n $pid ]]; then
    pkill -KILL -P "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

: >"$work/drive.out"
# Small memtables: flushes, tables and journal rotations within a short run.
printf 'memtable_bytes = 1048576\nreserved_bytes = 0\n' >"$work/drive.toml"
strace -f -tt -y -qq -o "$work/trace" \
  -e trace=open,openat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,rmdir,fsync,fdatasync \
  "$spindle" drive --port 0 --tls-port 0 --data "$work/data" --config "$work/drive.toml" >"$work/drive.out" 2>"$work/drive.err" &
pid=$!
for _ in $(seq 600); do
  grep -q 'listening on' "$work/drive.out" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/drive.err"; exit 1; }
  sleep 0.1
done
drive=$(pgrep -P "$pid" | head -n 1)
[[ -n $drive ]] || { echo "no drive under strace" >&2; exit 1; }
port=$(sed -nE 's/.*listening on 127\.0\.0\.1:([0-9]+) tls 127\.0\.0\.1:([0-9]+).*/\1/p' "$work/drive.out")
tls=$(sed -nE 's/.*listening on 127\.0\.0\.1:([0-9]+) tls 127\.0\.0\.1:([0-9]+).*/\2/p' "$work/drive.out")
d="--drive 127.0.0.1:$port"
t="--drive 127.0.0.1:$tls --tls-trust $work/data/tls/cert.pem"

"$spindle" bench put $d --count 3000 --value-size 512 --sync writethrough --connections 2 --depth 4 >/dev/null
"$spindle" bench put $d --count 60 --value-size 1048576 --sync writeback --connections 2 --depth 2 --flush >/dev/null
"$spindle" bench put $d --count 40 --value-size 262144 --sync writethrough --connections 2 --depth 2 --seed 2 >/dev/null
"$spindle" admin cluster-version 0 $t >/dev/null
"$spindle" admin pin erase --new 1234 $t >/dev/null
"$spindle" admin erase --pin 1234 $t >/dev/null
"$spindle" bench put $d --count 20 --value-size 1048576 --sync writethrough --connections 1 --depth 1 >/dev/null

# Let the background flush of the last writes finish: a file still being written when the
# drive is killed was never promised.
sleep 3
kill -KILL "$drive"
wait "$pid" 2>/dev/null || true
pid= drive=
[[ -z ${KEEP_TRACE:-} ]] || cp "$work/trace" "$KEEP_TRACE"
python3 scripts/fsync-audit.py "$work/trace" --root "$work/data"
