#!/usr/bin/env bash
# The Kinetic paper's evaluation ("Kinetic Action", ICPADS 2017) on this machine, for Spindle
# and the systems a user would pick instead, in one run, ending in one report:
#
#   scripts/bench-paper.sh [--quick] [--scale quick|default|paper] [--repeat R]
#                          [--targets LIST] [--out DIR] [--spindle BIN]
#
# Every target runs `spindle bench paper` (value-size sweeps in sequential and random key
# order, key size, write modes, key-not-found latency, read-latency histograms, YCSB A-F at
# 4 KiB and 1 MiB records) with the same parameters:
#   spindle    a `spindle drive` (fjall engine) over loopback
#   simulator  the reference Java simulator (kinetic-simulator 0.8.0.4, scripts/java-simulator.sh)
#   redis      redis-server, persistence off (the in-memory ceiling; its "durable" modes are not)
#   embedded   Spindle's engine in the bench process (no protocol, no network)
#   leveldb    LevelDB 1.23 (Debian) in the bench process: the paper's "LevelDB server" store
#   rocksdb    RocksDB 7.8 (Debian) in the bench process
# LIST is a comma-separated subset (default: all six). While one target is measured the
# servers not being measured are paused (SIGSTOP), so an idle JVM takes no CPU from it.
#
# Writes DIR/<target>.json (versioned results with the machine) and DIR/report/ (Markdown,
# HTML, SVG figures) and prints the report's path. Servers listen on 127.0.0.1 only, on free
# ports, with data in a temporary directory under ${TMPDIR:-/tmp}; everything is stopped and
# removed on exit. --quick: tiny sizes, a smoke test of the whole pipeline (well under a minute
# for the in-process targets, a little more with the JVM).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
orig_args=("$@")
log() { echo "bench-paper: $*" >&2; }
die() {
    log "$*"
    exit 1
}

scale=default repeat=1 targets=spindle,simulator,redis,embedded,leveldb,rocksdb out= spindle_bin= sim_verbose=0
need_arg() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) scale=quick ;;
        --scale) need_arg "$@"; scale=$2; shift ;;
        --repeat) need_arg "$@"; repeat=$2; shift ;;
        --targets) need_arg "$@"; targets=$2; shift ;;
        --out) need_arg "$@"; out=$2; shift ;;
        --spindle) need_arg "$@"; spindle_bin=$2; shift ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
            exit 0
            ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done
[[ $scale =~ ^(quick|default|paper)$ ]] || die "--scale: quick, default or paper"
[[ $repeat =~ ^[1-9][0-9]*$ ]] || die "--repeat: not a positive number: $repeat"
IFS=, read -r -a wanted <<<"$targets"
for t in "${wanted[@]}"; do
    [[ $t =~ ^(spindle|simulator|redis|embedded|leveldb|rocksdb)$ ]] || die "unknown target: $t"
done
has() { [[ ",$targets," == *",$1,"* ]]; }

out=${out:-$root/bench-results/paper-$(date -u +%Y%m%d-%H%M%S)-$scale}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# shellcheck source=servers.sh
source "$root/scripts/servers.sh"

# What is missing gets installed (the servers and the libraries the bench process loads).
missing=()
if has redis; then command -v redis-server >/dev/null || missing+=(redis-server); fi
command -v redis-cli >/dev/null || missing+=(redis-tools)
if has leveldb; then ldconfig -p | grep -q 'libleveldb\.so\.1' || missing+=(libleveldb1d); fi
if has rocksdb; then ldconfig -p | grep -q 'librocksdb\.so\.' || missing+=(librocksdb7.8); fi
if has simulator; then command -v mvn >/dev/null || missing+=(maven default-jdk-headless); fi
if ((${#missing[@]})); then
    apt_install "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi

if [[ -z $spindle_bin ]]; then
    log "building spindle (cargo build --release -p spindle-cli)"
    (cd "$root" && cargo build --release -p spindle-cli >&2) || die "cargo build failed"
    spindle_bin=$root/target/release/spindle
fi
[[ -x $spindle_bin ]] || die "not an executable: $spindle_bin"
spindle_bin=$(cd "$(dirname "$spindle_bin")" && pwd)/$(basename "$spindle_bin")

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-paper.XXXXXX")
spindle_pid= sim_pid= redis_pid=
cleanup() {
    local rc=$?
    only all
    stop_pid "$spindle_pid" spindle 60
    stop_pid "$sim_pid" simulator 20
    stop_pid "$redis_pid" redis-server 20
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if has spindle; then start_spindle; fi
if has simulator; then start_simulator; fi
if has redis; then start_redis; fi

results=()
measure() { # NAME TARGET PAUSE
    local name=$1 target=$2
    only "$3"
    log "$name: spindle bench paper --drive $target --scale $scale --repeat $repeat"
    local started=$SECONDS
    "$spindle_bin" bench paper --drive "$target" --label "$name" --scale "$scale" --repeat "$repeat" --out "$out/$name.json" \
        2>"$out/$name.log" || {
        tail -n 20 "$out/$name.log" >&2
        die "$name failed (log: $out/$name.log)"
    }
    log "$name: done in $((SECONDS - started)) s"
    results+=("$out/$name.json")
}
# A pause target that matches no server: every server paused.
for t in "${wanted[@]}"; do
    case $t in
        spindle) measure spindle "127.0.0.1:$spindle_port" spindle ;;
        simulator) measure simulator "127.0.0.1:$sim_port" simulator ;;
        redis) measure redis "redis://127.0.0.1:$redis_port" redis ;;
        embedded) measure embedded "embedded:$work/embedded" none ;;
        leveldb) measure leveldb "leveldb:$work/leveldb" none ;;
        rocksdb) measure rocksdb "rocksdb:$work/rocksdb" none ;;
    esac
    # In-process stores are done with once measured: free the disk for the next target.
    rm -rf "$work/$t"
done
only all

"$spindle_bin" bench report "${results[@]}" --out "$out/report" >&2
{
    echo
    echo "Command: scripts/bench-paper.sh ${orig_args[*]}"
    echo "Spindle: $("$spindle_bin" --version)"
} >>"$out/report/report.md"
echo "$out/report/report.md"
