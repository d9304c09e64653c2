#!/usr/bin/env bash
# Runs one test many times, in loops side by side (so the test races with its own copies for
# the two cores, as on a busy machine), and counts the runs that failed: how a race that a test
# catches only now and then is shown, and shown fixed, with figures the docs can cite.
#
#   scripts/repeat-test.sh CRATE TEST_TARGET TEST_NAME [RUNS] [LOOPS]   (default: 45 runs, 3 loops)
#
# e.g. scripts/repeat-test.sh spindle-engine value_log collection_under_concurrent_writes_keeps_every_last_write
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 3 ]]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
crate=$1 target=$2 name=$3 runs=${4:-45} loops=${5:-3}
bin=$(cargo test --locked -q -p "$crate" --test "$target" --no-run --message-format=json \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$target")
[[ -x $bin ]] || { echo "no test binary for $crate --test $target" >&2; exit 1; }
out=$(mktemp -d)
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$out"; }
trap stop EXIT
trap 'exit 130' INT TERM
per=$(( (runs + loops - 1) / loops ))
for l in $(seq "$loops"); do
  (
    for i in $(seq "$per"); do
      if "$bin" --exact "$name" -q > "$out/$l-$i.log" 2>&1; then echo ok; else echo failed; fi
    done > "$out/loop-$l"
  ) &
  pids+=($!)
done
wait "${pids[@]}"
pids=()
total=$(cat "$out"/loop-* | wc -l)
failed=$(cat "$out"/loop-* | grep -c failed || true)
echo "$name: failed $failed of $total runs ($loops loops side by side)"
for f in "$out"/*-*.log; do
  if grep -q "FAILED\|panicked" "$f"; then grep -m3 "panicked\|Error" "$f"; break; fi
done
