#!/usr/bin/env bash
# Is the load generator ever the bottleneck? 4 KiB gets, 8 connections x 16 in flight, from one
# `spindle bench` process against: a `spindle drive` (fjall), a `spindle drive --engine memory`
# (the protocol path alone), Spindle's engine in the bench process (embedded:DIR) and an
# in-process memory store (memory:, the generator's own ceiling). Prints a Markdown table with
# ops/s and the bench process's CPU per operation (ops per CPU-second: the rate one core of
# load generator sustains), medians of --repeat rounds.
#
# With --pin the drives run on CPU 1 and the bench on CPU 0 (taskset), so that on a 2-core
# machine the load generator and the server it measures each have a core of their own instead
# of taking CPU from each other.
#
#   scripts/bench-loadgen.sh [--spindle BIN] [--count N] [--repeat R] [--pin]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "bench-loadgen: $*" >&2; }
die() {
    log "$*"
    exit 1
}
spindle_bin=$root/target/release/spindle count=150000 repeat=3 server_cpu=() bench_cpu=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --spindle) spindle_bin=$2; shift ;;
        --count) count=$2; shift ;;
        --repeat) repeat=$2; shift ;;
        --pin) server_cpu=(taskset -c 1) bench_cpu=(taskset -c 0) ;;
        *) die "unknown argument: $1" ;;
    esac
    shift
done
[[ -x $spindle_bin ]] || die "build first: cargo build --release -p spindle-cli (or --spindle BIN)"
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-loadgen.XXXXXX")
# shellcheck source=servers.sh
source "$root/scripts/servers.sh"
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
drive_prefix=(${server_cpu[@]+"${server_cpu[@]}"})
start_drive fjall "$spindle_bin"
fjall=$drive_port
start_drive memory "$spindle_bin" --engine memory
memory=$drive_port

# Per target and round: the keys put (unmeasured), then the measured gets, in one process.
measure() { # TARGET -> "ops_per_second ops_per_cpu_second"
    "${bench_cpu[@]}" "$spindle_bin" bench get --preload --drive "$1" --count "$count" --value-size 4096 --json |
        python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["errors"]==0, r; print(r["ops_per_second"], r["ops_per_bench_cpu_second"])'
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "| target | 4 KiB gets/s (median of $repeat) | bench ops per CPU-second | gets/s vs the fjall drive | bench ops per CPU-second vs the fjall drive's gets/s |"
echo "|---|--:|--:|--:|--:|"
declare -A ops cpu rounds
# Rounds alternate between the targets, so that the machine's drift hits all of them alike.
for ((r = 0; r < repeat; r++)); do
    for name in "fjall drive" "memory drive" "embedded" "memory:"; do
        case $name in
            "fjall drive") t=127.0.0.1:$fjall ;;
            "memory drive") t=127.0.0.1:$memory ;;
            embedded) t=embedded:$work/embedded ;;
            memory:) t=memory: ;;
        esac
        rounds[$name]+="$(measure "$t")"$'\n'
    done
done
for name in "fjall drive" "memory drive" "embedded" "memory:"; do
    ops[$name]=$(printf '%s' "${rounds[$name]}" | awk 'NF {print $1}' | median)
    cpu[$name]=$(printf '%s' "${rounds[$name]}" | awk 'NF {print $2}' | median)
done
for name in "fjall drive" "memory drive" "embedded" "memory:"; do
    printf '| %s | %.0f | %.0f | %.2fx | %.2fx |\n' "$name" "${ops[$name]}" "${cpu[$name]}" \
        "$(echo "${ops[$name]} / ${ops["fjall drive"]}" | bc -l)" "$(echo "${cpu[$name]} / ${ops["fjall drive"]}" | bc -l)"
done
