#!/usr/bin/env bash
# Installs whatever is missing, then runs every test:
#   1. the Rust workspace: unit and property tests, integration tests over real TCP against
#      spawned drives, the SIGKILL and power-cut durability tests, the fuzz-corpus replay;
#      later, clippy over every crate and target with every warning an error;
#   2. the Java interoperability suite (reference client com.seagate.kinetic:kinetic-client
#      0.8.0.4 from Maven Central) against a freshly started drive;
#   3. the official YCSB client with Spindle's Java binding, and a cross-check of the Rust YCSB
#      generators against YCSB's own;
#   4. smoke runs of the side-by-side benchmarks (Spindle, the Java simulator, redis-server;
#      the paper's evaluation also against the engine in-process, LevelDB and RocksDB; P2P
#      between two drives and between two simulators; a drive's memory under 1 MiB values);
#   5. the S3 gateway with real clients (awscli, s3cmd, rclone, boto3) over a local cluster,
#      a gateway killed mid-upload, and its memory over a 4 GiB transfer.
# Ends with one summary line: "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

apt_updated=
need_apt() {
  if [ -z "$apt_updated" ]; then
    apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# --- toolchains -------------------------------------------------------------------------
if ! command -v cargo >/dev/null; then
  [ -x "$HOME/.cargo/bin/cargo" ] || { echo "install Rust first: https://rustup.rs" >&2; exit 1; }
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v java >/dev/null || ! java -version 2>&1 | grep -qE 'version "(1[7-9]|[2-9][0-9])'; then
  need_apt openjdk-17-jdk-headless
fi
command -v mvn >/dev/null || need_apt maven
# A C toolchain: ring (TLS) compiles C and assembly, and jemalloc (the drive's allocator) is
# built from source with make.
{ command -v cc >/dev/null && command -v make >/dev/null; } || need_apt gcc make
command -v redis-server >/dev/null || need_apt redis-server redis-tools
# LevelDB and RocksDB, which the bench lab loads at run time as the paper's "LevelDB servers".
ldconfig -p | grep -q 'libleveldb\.so\.1' || need_apt libleveldb1d
ldconfig -p | grep -q 'librocksdb\.so\.' || need_apt librocksdb7.8

# The power-loss tests mount the project's FUSE file system (crates/powercut): /dev/fuse, and
# fusermount3 where the kernel's mount is not allowed; the directory-sync audit traces with strace.
command -v fusermount3 >/dev/null || need_apt fuse3
[ -e /dev/fuse ] || modprobe fuse 2>/dev/null || true
command -v strace >/dev/null || need_apt strace
# The cluster: its control plane is etcd (Debian's etcd-server, started by the tests
# themselves).
command -v etcd >/dev/null || need_apt etcd-server
# Nothing builds with protoc (the .proto files are compiled by protox, etcd's too: vendor/
# etcd-client): every build below has PROTOC pointing nowhere, as on a fresh machine.
export PROTOC=/nonexistent/protoc
command -v ip >/dev/null || need_apt iproute2
# Without /dev/fuse the power-loss tests would skip; here they must run (or fail).
export SPINDLE_REQUIRE_FUSE=1
# The cluster's partition test puts drives in network namespaces (root, iproute2): it must run here.
export SPINDLE_REQUIRE_NETNS=1

passed=0
failed=0
count_cargo() {
  # "test result: ok. 8 passed; 0 failed; ..."
  local p f
  # Only the summary lines: a test's own output may say "d3 failed".
  p=$(grep -E '^test result: ' "$1" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
  f=$(grep -E '^test result: ' "$1" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
  passed=$((passed + p)); failed=$((failed + f))
}
count_surefire() {
  # "Tests run: 38, Failures: 0, Errors: 0, Skipped: 0" (the last such line is the total)
  local line run fail err
  line=$(grep -E '^\[[A-Z]+\] Tests run: [0-9]+, Failures' "$1" | tail -1 || true)
  [ -n "$line" ] || { failed=$((failed + 1)); return; }
  run=$(echo "$line" | sed -E 's/.*Tests run: ([0-9]+).*/\1/')
  fail=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
  err=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
  passed=$((passed + run - fail - err)); failed=$((failed + fail + err))
}

status=0
# Each section's heading says when it started, so a slow suite shows in the log.
section() { echo "== $* [$((SECONDS / 60))m$((SECONDS % 60))s]"; }

echo "== cargo test (workspace)"
if ! cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$logs/cargo.log"; then status=1; fi
count_cargo "$logs/cargo.log"

section "Java interoperability (kinetic-client 0.8.0.4)"
cargo build --locked -p spindle-cli
if ! scripts/java-interop.sh "$root/target/debug/spindle" 2>&1 | tee "$logs/java.log"; then status=1; fi
count_surefire "$logs/java.log"

section "the official YCSB client (site.ycsb:core:0.17.0) with Spindle's Java binding"
if scripts/ycsb-java.sh "$root/target/debug/spindle" A E 2>&1 | tee "$logs/ycsb.log" | tail -5; [ "${PIPESTATUS[0]}" -eq 0 ]; then
  passed=$((passed + 1)); echo "ycsb java: ok"
else
  failed=$((failed + 1)); status=1; echo "ycsb java: FAILED"; tail -40 "$logs/ycsb.log"
fi

# One scripted check: its output goes to a log shown only on failure; it counts as one test.
check() { # NAME LOG COMMAND...
  local name=$1 log=$2
  shift 2
  if "$@" >"$log" 2>&1; then
    passed=$((passed + 1)); echo "$name: ok"
  else
    failed=$((failed + 1)); status=1; echo "$name: FAILED"; tail -40 "$log"
  fi
}
spindle=$root/target/debug/spindle

check "vendored crates are upstream + patch queue" "$logs/vendor.log" scripts/check-vendor.sh
check "the import-cycle finder's own tests" "$logs/module-cycles-test.log" python3 scripts/module_cycles_test.py
check "no import cycle between the modules of any crate" "$logs/module-cycles.log" scripts/module-cycles.py
check "no source file over 800 lines outside tests" "$logs/file-sizes.log" scripts/file-sizes.py
section "clippy, warnings as errors: every crate and target, then the drive-only build (no bench lab: it must compile and lint clean)"
# The lints are the workspace's (Cargo.toml [workspace.lints]) plus each crate root's attributes.
check "clippy" "$logs/clippy.log" cargo clippy --workspace --all-targets --locked -- -D warnings
check "clippy drive-only build" "$logs/clippy-drive-only.log" cargo clippy --locked -p spindle-cli --no-default-features -- -D warnings
# The drive-only build links neither the cluster's etcd/gRPC stack nor the S3 gateway's crates.
drive_only_tree() {
  local tree
  tree=$(cargo tree --locked -p spindle-cli --no-default-features -e normal,build --prefix none) || return 1
  if grep -E '^(spindle-cluster|spindle-s3|spindle-bench|etcd-client|tonic|s3s) ' <<<"$tree"; then
    echo "the drive-only build links the crates above"
    return 1
  fi
  echo "drive-only build: $(sort -u <<<"$tree" | wc -l) crates, none of the cluster's, the gateway's or the lab's"
}
check "drive-only build links no cluster, gateway or lab crate" "$logs/drive-only-tree.log" drive_only_tree

section "directory-sync audit (strace): every entry the drive creates or renames is synced"
check "fsync audit" "$logs/fsync-audit.log" scripts/fsync-audit.sh "$spindle"

section "YCSB generators: Rust against YCSB's own"
check "ycsb crosscheck" "$logs/crosscheck.log" scripts/ycsb-crosscheck.sh "$spindle"

section "benchmark smoke run (Spindle, Java simulator, redis-server)"
check "bench smoke" "$logs/bench.log" scripts/bench-compare.sh --quick --spindle "$spindle" --out "$logs/bench.md"

section "the Kinetic paper's evaluation, smoke run (Spindle, simulator, redis, engine, LevelDB, RocksDB)"
check "paper bench smoke" "$logs/paper.log" scripts/bench-paper.sh --quick --spindle "$spindle" --out "$logs/paper"

section "archival workloads smoke run (two drives, three envelopes)"
check "archive bench smoke" "$logs/archive.log" scripts/bench-archive.sh --quick --drives 2 --spindle "$spindle" --out "$logs/archive.md"

section "ACT certification smoke run (a drive and a file on the same disk)"
check "act bench smoke" "$logs/act.log" scripts/bench-act.sh --quick --spindle "$spindle" --out "$logs/act.md"

section "P2P benchmark smoke run (two drives, two Java simulators)"
check "p2p bench smoke" "$logs/p2p.log" scripts/bench-p2p.sh --quick --spindle "$spindle"

section "cluster against a lone drive, smoke run (etcd, three drives, a coordinator)"
check "cluster bench smoke" "$logs/cluster-bench.log" scripts/bench-cluster.sh --spindle "$spindle" --drives 3 --count 200 --repeat 1 --ycsb AE --ycsb-records 200 --ycsb-operations 200
check "secured cluster bench smoke" "$logs/cluster-secured-bench.log" scripts/bench-cluster.sh --spindle "$spindle" --secured --drives 3 --count 20 --repeat 1

section "live migration under load, smoke run (etcd, five drives, a coordinator; a join and a leave)"
check "migrate bench smoke" "$logs/migrate.log" scripts/bench-migrate.sh --spindle "$spindle" --records 2000 --rate 200 --partitions 32 --settle 2 --out "$logs/migrate.md"

section "S3 gateway with real clients: awscli, s3cmd, rclone, boto3 (the gateway's suite), a gateway killed mid-upload"
check "s3 clients" "$logs/s3-clients.log" scripts/s3-clients.sh "$spindle"

section "a deployment on three hosts (network namespaces): three etcd members, six drives, two coordinators, two gateways, all TLS and authenticated; strangers refused; the loss of an etcd member and of a host"
check "multi-host deployment" "$logs/deploy.log" scripts/deploy-test.sh "$spindle"

section "S3 gateway memory: 4 GiB up and down through a gateway over one drive, peak RSS under 512 MiB"
check "s3 memory" "$logs/s3-memory.log" scripts/s3-memory.sh "$spindle" --gib 4 --limit-mib 512

section "S3 benchmark smoke run over HTTPS (Spindle's gateway over one drive, single-node MinIO; PUT and GET)"
check "s3 bench smoke" "$logs/s3-bench.log" scripts/bench-s3.sh --quick --tls --versioning --spindle "$spindle" --out "$logs/s3-bench.md"

section "archival workloads against the S3 gateway, smoke run (over one drive, then into a 4+2 coded class)"
check "archive s3 smoke" "$logs/archive-s3.log" scripts/bench-archive.sh --quick --s3 --spindle "$spindle" --out "$logs/archive-s3.md"
check "archive s3 coded smoke" "$logs/archive-s3-ec.log" scripts/bench-archive.sh --quick --s3 --ec 4+2 --envelopes fitted --spindle "$spindle" --out "$logs/archive-s3-ec.md"

section "erasure-coded S3 against MinIO, smoke run (a 4+2 pool, six MinIO directories)"
check "ec bench smoke" "$logs/ec-bench.log" scripts/bench-ec.sh --quick --spindle "$spindle" --out "$logs/ec-bench.md"

section "memory under large values, smoke run (one drive, one round)"
check "memory bench smoke" "$logs/memory.log" scripts/bench-memory.sh --spindle "$spindle" --rounds 1 --count 20

echo
echo "all suites: $passed passed, $failed failed [$((SECONDS / 60))m$((SECONDS % 60))s]"
exit $status
