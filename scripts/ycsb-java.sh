#!/usr/bin/env bash
# Run the OFFICIAL YCSB client (site.ycsb.Client from site.ycsb:core:0.17.0, Maven Central) with
# Spindle's YCSB binding (interop/ycsb: spindle.ycsb.KineticClient, over the reference Kinetic
# Java client 0.8.0.4) against a drive started for the run.
#
#   scripts/ycsb-java.sh SPINDLE_BIN [WORKLOAD ...]      (workload letters A-F; default: A E)
#
# Environment: YCSB_RECORDS (500), YCSB_OPERATIONS (1000), YCSB_THREADS (2),
# YCSB_KEEP_LOGS=1 (keep and print the log directory), SPINDLE_STARTUP_TIMEOUT (60 s).
#
# Steps: starts a drive (scripts/servers.sh's start_drive: `SPINDLE_BIN drive --data DIR --port 0
# --tls-port 0 --listen 127.0.0.1`) and waits for its "spindle drive listening on" line; builds interop/ycsb with
# `mvn test -Dkinetic.port=PORT` (the codec unit tests and the binding tests against the drive;
# writes target/classpath.txt); then for each workload runs
#   java --add-opens ... -cp CLASSES:CLASSPATH site.ycsb.Client -load|-t -db spindle.ycsb.KineticClient
#        -P interop/ycsb/workloads/workloadX -p recordcount=N -p operationcount=N -threads T
#        -p dataintegrity=true -p kinetic.host=127.0.0.1 -p kinetic.port=PORT
# (dataintegrity=true: YCSB writes deterministic field values and verifies every read, so a
# record that does not round-trip shows as [VERIFY] Return=UNEXPECTED_STATE), and checks each
# phase's output: "[OVERALL], Throughput(ops/sec)" present, no FAILED operation, every
# "Return=" line OK, and the OK count equal to recordcount (load) / operationcount (run).
# Every workload loads the same records again (an insert overwrites), on the one drive.
# Stops the drive and removes its directory (also on error or interrupt). Exits 0 only if all passed.
# The first run lets mvn download YCSB core, the Kinetic client and JUnit from Maven Central.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 SPINDLE_BIN [WORKLOAD ...]" >&2
    exit 2
fi
spindle_bin=$1
shift
if [[ ! -x $spindle_bin ]]; then
    echo "ycsb-java: not an executable: $spindle_bin" >&2
    exit 2
fi
workloads=("$@")
[[ ${#workloads[@]} -eq 0 ]] && workloads=(A E)
for w in "${workloads[@]}"; do
    [[ $w =~ ^[A-Fa-f]$ ]] || { echo "ycsb-java: workload letters are A to F, not '$w'" >&2; exit 2; }
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
project=$root/interop/ycsb
records=${YCSB_RECORDS:-500}
operations=${YCSB_OPERATIONS:-1000}
threads=${YCSB_THREADS:-2}
startup_timeout=${SPINDLE_STARTUP_TIMEOUT:-60}
# Netty 4.0.17 inside the Kinetic client needs these on Java 17 (see interop/java/pom.xml).
jvm_flags=(--add-opens java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED
    -Djava.net.preferIPv4Stack=true)

log_dir=$(mktemp -d -t spindle-ycsb-log.XXXXXX)
work=$log_dir
log() { echo "ycsb-java: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=servers.sh
source "$root/scripts/servers.sh"
server_start_timeout=$startup_timeout
cleanup() {
    stop_servers
    if [[ ${YCSB_KEEP_LOGS:-} == 1 ]]; then
        log "logs kept in $log_dir"
    else
        rm -rf "$log_dir"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

show_drive_log() {
    tail_logs "$log_dir/drive.out" "$log_dir/drive.err"
}

started=$SECONDS
start_drive drive "$spindle_bin"
port=$drive_port data_dir=$work/drive/data
log "drive pid $drive_pid listening on 127.0.0.1:$port (data in $data_dir)"

# Build the binding and test it against the drive; target/classpath.txt is the runtime classpath.
if ! mvn -B -q --no-transfer-progress -f "$project/pom.xml" test \
    -Dkinetic.host=127.0.0.1 -Dkinetic.port="$port" >"$log_dir/mvn.log" 2>&1; then
    cat "$log_dir/mvn.log" >&2
    echo "ycsb-java: building or testing interop/ycsb failed (reports: interop/ycsb/target/surefire-reports/)" >&2
    show_drive_log
    exit 1
fi
tests=$(cat "$project"/target/surefire-reports/*.txt | sed -n -E 's/^Tests run: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+), Skipped: ([0-9]+).*/\1 \2 \3 \4/p' \
    | awk '{r+=$1; f+=$2+$3; s+=$4} END {printf "%d run, %d failed, %d skipped", r, f, s}')
echo "ycsb-java: interop/ycsb built; binding tests against the drive: $tests" >&2
classpath=$project/target/classes:$(cat "$project/target/classpath.txt")

# check_phase LOG EXPECTED_TRANSACTIONS: YCSB's text output of one phase.
check_phase() {
    local log=$1 expected=$2
    python3 - "$log" "$expected" <<'PY'
import re, sys
log, expected = sys.argv[1], int(sys.argv[2])
problems, ops, ok = [], {}, {}
throughput = None
for line in open(log, encoding="utf-8", errors="replace"):
    m = re.match(r"^\[([^\]]+)\], ([^,]+), (.*)$", line.strip())
    if not m:
        continue
    name, metric, value = m.groups()
    if name == "OVERALL" and metric == "Throughput(ops/sec)":
        throughput = float(value)
    if name.endswith("-FAILED"):
        problems.append(line.strip())
    if metric == "Operations":
        ops[name] = int(value)
    if metric.startswith("Return="):
        if metric != "Return=OK":
            problems.append(line.strip())
        else:
            ok[name] = int(value)
if throughput is None:
    problems.append("no '[OVERALL], Throughput(ops/sec)' line")
# A read-modify-write is measured as a READ and an UPDATE (each with its Return= line) plus a
# READ-MODIFY-WRITE latency (Operations only, no Return= line): count it once.
transactions = sum(ok.get(n, 0) for n in ("READ", "UPDATE", "INSERT", "SCAN")) - ops.get("READ-MODIFY-WRITE", 0)
if transactions != expected:
    problems.append(f"{transactions} transactions returned OK, expected {expected}")
summary = ", ".join(f"{n} {c}" for n, c in sorted(ops.items()) if n not in ("CLEANUP",))
print(f"{throughput or 0:.0f} ops/s; {summary}")
for p in problems:
    print("PROBLEM: " + p)
sys.exit(1 if problems else 0)
PY
}

failures=0
for w in "${workloads[@]}"; do
    letter=${w,,}
    for phase in load run; do
        flag=-t
        expected=$operations
        if [[ $phase == load ]]; then
            flag=-load
            expected=$records
        fi
        log=$log_dir/workload$letter-$phase.log
        t0=$SECONDS
        set +e
        java "${jvm_flags[@]}" -cp "$classpath" site.ycsb.Client "$flag" \
            -db spindle.ycsb.KineticClient -P "$project/workloads/workload$letter" \
            -p recordcount="$records" -p operationcount="$operations" -threads "$threads" \
            -p dataintegrity=true -p kinetic.host=127.0.0.1 -p kinetic.port="$port" \
            >"$log" 2>"$log.err"
        status=$?
        set -e
        verdict=$(check_phase "$log" "$expected") && ok=1 || ok=0
        if [[ $status -ne 0 ]]; then
            ok=0
            verdict="$verdict
PROBLEM: site.ycsb.Client exited with status $status"
        fi
        if [[ $ok == 1 ]]; then
            echo "ycsb-java: workload ${w^^} $phase OK ($((SECONDS - t0))s): $(head -n 1 <<<"$verdict")"
        else
            failures=$((failures + 1))
            echo "ycsb-java: workload ${w^^} $phase FAILED ($((SECONDS - t0))s): $verdict" >&2
            echo "--- YCSB output ---" >&2
            cat "$log" >&2
            echo "--- YCSB stderr (last 30 lines) ---" >&2
            tail -n 30 "$log.err" >&2
        fi
    done
done

if [[ $failures -ne 0 ]]; then
    show_drive_log
    echo "ycsb-java: $failures phase(s) failed" >&2
    exit 1
fi
echo "ycsb-java: all ${#workloads[@]} workload(s) passed (load + run, official YCSB 0.17.0 client) in $((SECONDS - started))s"
