#!/usr/bin/env bash
# The simulator's proof that it bites: each earlier linearizability bug, put back as a cargo
# feature of spindle-cluster (never in a product build), is run over seeds until the
# simulator catches it: first the default runs, then runs with more member changes
# (`--churn`), then runs whose links also fail at random (`--lossy`); the epoch mutant last
# in runs of one move after another with operations paused between choosing their map and
# their first request (`--moves --churn --slow --stale-views`, eight operations a client at
# once over 64 keys); the
# gateway's mutant in runs with S3 gateways (`--s3`, then `--s3 --stalls`). Prints, per mutant, the first seed that caught it or the seeds it survived.
#
#   scripts/sim-mutants.sh [SEEDS] [OPS]      (default: 40 seeds from 1, 400 operations per client)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-40}
ops=${2:-400}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-18s %s\n' mutant result
for mutant in cas retag writeback epoch intent; do
  cargo build --release --locked -q -p spindle-sim --features "mutant-$mutant"
  cp target/release/spindle-sim "$out/sim-$mutant"
  # The gateway's mutant needs the gateways; the cluster's run in the three key-value
  # profiles, the epoch mutant in a fourth as well.
  profiles=("" "--churn" "--lossy")
  # The gateway's with writes paused between decision and requests too: a paused swap is the
  # window in which a sweeper that trusts the clocks dooms an intent just refreshed.
  if [[ $mutant == intent ]]; then profiles=("--s3" "--s3 --stalls"); fi
  if [[ $mutant == epoch ]]; then profiles+=("--moves --churn --slow --stale-views --concurrency 8 --keys 64"); fi
  labels=()
  for profile in "${profiles[@]}"; do labels+=("${profile:-default}"); done
  result="survived $seeds seeds in each of: $(IFS=,; echo "${labels[*]}")"
  for profile in "${profiles[@]}"; do
    # shellcheck disable=SC2086 # a profile is flags split at spaces, or none
    if ! "$out/sim-$mutant" $profile --seeds "$seeds" --from 1 --ops "$ops" > "$out/$mutant.log" 2>&1; then
      caught=$(grep -m1 -o 'seed [0-9]* FAILED' "$out/$mutant.log" | grep -o '[0-9]*')
      result="caught by seed $caught${profile:+ with $profile} (seeds from 1)"
      break
    fi
  done
  printf '%-18s %s\n' "$mutant" "$result"
done
# The product's own build again, so that target/release/spindle-sim has no mutant in it.
cargo build --release --locked -q -p spindle-sim
