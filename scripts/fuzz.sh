#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) on this machine's stable toolchain and
# minimises the corpus afterwards. New corpus entries in fuzz/corpus are worth committing: the
# ordinary test suite replays them (crates/drive/tests/fuzz_corpus.rs).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# cargo-fuzz drives libFuzzer; RUSTC_BOOTSTRAP=1 lets the stable compiler accept the
# sanitizer flags it passes.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frame meta_record drive_raw drive_commands settings journal s3_records cluster_entries)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
for t in "${targets[@]}"; do
  echo "== fuzzing $t for ${seconds}s"
  cargo fuzz run -O "$t" -- -max_total_time="$seconds" -rss_limit_mb=4096 -print_final_stats=1 2>&1 | grep -E 'stat::number_of_executed_units|Done|ERROR|panicked' || true
  cargo fuzz cmin -O "$t" >/dev/null 2>&1
done
echo "corpus: $(find fuzz/corpus -type f | wc -l) inputs"
