#!/usr/bin/env bash
# The simulator's proof that it bites: each earlier linearizability bug, put back as a cargo
# feature of spindle-cluster (never in a product build), is run over seeds until the
# simulator catches it. Prints, per mutant, the first seed that caught it or the seeds it
# survived.
#
#   scripts/sim-mutants.sh [SEEDS] [OPS]      (default: 20 seeds, from 1, of 400 operations per client)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-20}
ops=${2:-400}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-18s %s\n' mutant result
for mutant in cas retag writeback epoch; do
  cargo build --locked -q -p spindle-sim --features "mutant-$mutant"
  cp target/debug/spindle-sim "$out/sim-$mutant"
  if "$out/sim-$mutant" --seeds "$seeds" --from 1 --ops "$ops" > "$out/$mutant.log" 2>&1; then
    printf '%-18s survived %s seeds\n' "$mutant" "$seeds"
  else
    caught=$(grep -m1 -o 'seed [0-9]* FAILED' "$out/$mutant.log" | grep -o '[0-9]*')
    printf '%-18s caught by seed %s (seeds run from 1)\n' "$mutant" "$caught"
  fi
done
