#!/usr/bin/env bash
# ACT-style certification of Spindle and of the disk under it, side by side: a `spindle drive`
# on loopback (its own data directory, a random free port) certified in drive mode (GETs and
# PUTs of 1536 B records), and a file beside its data directory, on the same filesystem,
# certified in device mode (O_DIRECT record reads, 128 KiB large-block reads and writes).
# Both step the same ladder of ratings (1x = 2000 reads/s + 1000 writes/s) and stop at the
# first failure.
#
#   scripts/bench-act.sh --spindle BIN [--quick] [--out FILE] [--dir DIR] [--ratings 1,3,6,...]
#                        [--duration S] [--slice S] [--keys N] [--device-size SIZE] [--settle S]
#
# Builds nothing. --dir (default: a new directory under $TMPDIR or /tmp) holds the drive's
# data, the device file, the JSON results and the SVG figures; it is removed at the end unless
# given. Prints a Markdown table (and writes it to FILE).
set -euo pipefail
quick=0 spindle_bin= out= dir= ratings=1,3,6,12,24 duration=60 slice=10 keys=1000000 device_size=4GiB settle=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1; ratings=1,3; duration=3; slice=1; keys=20000; device_size=64MiB ;;
    --spindle) spindle_bin=$2; shift ;;
    --out) out=$2; shift ;;
    --dir) dir=$2; shift ;;
    --ratings) ratings=$2; shift ;;
    --duration) duration=$2; shift ;;
    --slice) slice=$2; shift ;;
    --keys) keys=$2; shift ;;
    --device-size) device_size=$2; shift ;;
    --settle) settle=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$spindle_bin" ] || { echo "usage: $0 --spindle PATH [--quick] [--out FILE]" >&2; exit 2; }
spindle_bin=$(realpath "$spindle_bin")
keep=1
if [ -z "$dir" ]; then dir=$(mktemp -d "${TMPDIR:-/tmp}/bench-act.XXXXXX"); keep=0; fi
mkdir -p "$dir"
work=$dir
log() { echo "bench-act: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=servers.sh
source "$(dirname "$0")/servers.sh"
cleanup() {
  stop_servers
  if [ $keep = 0 ]; then rm -rf "$dir"; else rm -f "$dir/device.bin"; rm -rf "$dir/drive"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_drive drive "$spindle_bin"
port=$drive_port

common=(--ratings "$ratings" --duration "$duration" --slice "$slice" --prep --settle "$settle")
echo "drive mode: spindle drive on 127.0.0.1:$port, $keys keys" >&2
"$spindle_bin" bench act drive --drive "127.0.0.1:$port" --keys "$keys" "${common[@]}" \
  --out "$dir/act-drive.json" --plot "$dir/act-drive.svg" >"$dir/act-drive.txt"
# The drive's page cache and CPU stay out of the device run.
stop_pid "$drive_pid" "spindle drive" 30
# Nor its data still being written back: the device run starts on an idle disk.
sync
echo "device mode: $device_size file beside the drive's data" >&2
"$spindle_bin" bench act device --device "$dir/device.bin" --size "$device_size" "${common[@]}" \
  --out "$dir/act-device.json" --plot "$dir/act-device.svg" >"$dir/act-device.txt"

table=$(python3 - "$dir/act-drive.json" "$dir/act-device.json" <<'PY'
import json, sys
print("| mode | target | rating | reads/s | writes/s | result | worst slice: % over 1 ms / 8 ms / 64 ms (judged histograms) | why it failed | load generator: % of wake-ups ≥ 1 ms late |")
print("|---|---|--:|--:|--:|---|---|---|--:|")
certified = []
for path in sys.argv[1:]:
    doc = json.load(open(path))
    mode = doc["mode"]
    target = "Spindle drive (fjall, loopback)" if mode == "drive" else f"file, O_DIRECT{'+O_DSYNC' if doc['device']['odsync'] else ''}, {doc['device']['bytes'] >> 20} MiB"
    for run in doc["runs"]:
        worst = []
        for name in sorted({h["histogram"] for s in run["outcome"]["slices"] for h in s["histograms"] if h["judged"]}):
            rows = [h for s in run["outcome"]["slices"] for h in s["histograms"] if h["histogram"] == name]
            m = [max(h["percent_over"][i] for h in rows) for i in (0, 3, 6)]
            worst.append(f"{name} {m[0]:.2f} / {m[1]:.2f} / {m[2]:.3f}")
        fails = run["verdict"]["failures"]
        why = []
        for f in sorted(fails, key=lambda f: (f.get("histogram", ""), f.get("threshold_ms", 0))):
            w = f"{f['histogram']} > {f['threshold_ms']} ms" if f["kind"] == "over-limit" else f["kind"] + (": " + f["reason"] if f["kind"] == "stopped" else "")
            if w not in why:
                why.append(w)
        why = "; ".join(why)
        rates = run["rates"]
        late = run["outcome"]["wake_lateness"]
        late_pct = 100.0 * sum(l["ops"] * l["percent_over"][0] / 100.0 for l in late) / max(1, sum(l["ops"] for l in late))
        print(f"| {mode} | {target} | {run['rating']}x | {rates['internal_reads_per_sec']:.0f} | {rates['internal_writes_per_sec']:.0f} | {'pass' if run['verdict']['passed'] else 'FAIL'} | {'; '.join(worst)} | {why} | {late_pct:.2f} |")
    certified.append(f"{mode}: {str(doc['certified_rating']) + 'x' if doc['certified_rating'] else 'none'}")
print()
print("Certified: " + ", ".join(certified) + ".")
PY
)
echo "$table"
if [ -n "$out" ]; then
  {
    echo "# ACT certification: Spindle drive and the disk under it, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Reproduce: \`scripts/bench-act.sh --spindle target/release/spindle$([ $quick = 1 ] && echo ' --quick') --ratings $ratings --duration $duration --slice $slice --keys $keys --device-size $device_size --settle $settle\`"
    echo "on $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(uname -r); drive and device file on $(df --output=source,fstype "$dir" | tail -n 1 | tr -s ' ')."
    echo "Each run: $duration s in $slice s slices; pass = in every slice < 5% over 1 ms, < 1% over 8 ms, < 0.1% over 64 ms; the ladder stops at the first failure. One run per rating; $settle s of rest after each preparation."
    echo "The last column is the load generator's own scheduling noise: of the operations whose thread was idle and slept until the due time, the share it woke 1 ms or more late. High values mean the machine, not the target, was slow."
    echo
    echo "$table"
  } >"$out"
fi
