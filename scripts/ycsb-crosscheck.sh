#!/usr/bin/env bash
# Cross-check Spindle's YCSB generators (Rust, crates/bench/src/ycsb) against YCSB's own
# (site.ycsb:core:0.17.0): operation mix and key popularity must agree.
#
#   scripts/ycsb-crosscheck.sh SPINDLE_BIN [CASE ...]
#
# A CASE is WORKLOAD:RECORDS:OPERATIONS (default cases: A:1000:1000 D:1000:1000 E:1000:1000
# F:1000:1000 A:100000:100000 D:100000:100000). Environment: CROSSCHECK_DRAWS (1000000),
# CROSSCHECK_TOP (20).
#
# For each case, both sides draw D operations, and a record number for each non-INSERT one, as a
# YCSB run over RECORDS loaded records with operationcount OPERATIONS would, with the key space
# held at RECORDS records (an INSERT is counted but does not grow it):
#   Rust: SPINDLE_BIN bench ycsb-sample --workload W --records N --operations N --draws D --top K
#   Java: spindle.ycsb.GeneratorSample (interop/ycsb): YCSB's CoreWorkload.init from
#         interop/ycsb/workloads/workloadW, then operationchooser.nextString() and
#         CoreWorkload.nextKeynum() (ScrambledZipfianGenerator for zipfian, SkewedLatestGenerator
#         over the acknowledged insert counter for latest), --mode frozen.
# Both print {"operations": {"Read": n, ...}, "top_records": [{"record": r, "count": c}, ...]}.
# Pass criteria per case: every operation's share within 1 percentage point; at least 80% of
# the top-K records the same on both sides; the same hottest record, its share of the key
# draws within 10% (relative). Uniform request distribution is not covered: `spindle bench
# ycsb-sample` takes only a core workload letter, and no core workload is uniform.
# Prints a comparison table; exits 1 on any mismatch.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    echo "usage: $0 SPINDLE_BIN [WORKLOAD:RECORDS:OPERATIONS ...]" >&2
    exit 2
fi
spindle_bin=$1
shift
if [[ ! -x $spindle_bin ]]; then
    echo "ycsb-crosscheck: not an executable: $spindle_bin" >&2
    exit 2
fi
cases=("$@")
[[ ${#cases[@]} -eq 0 ]] && cases=(A:1000:1000 D:1000:1000 E:1000:1000 F:1000:1000 A:100000:100000 D:100000:100000)
for c in "${cases[@]}"; do
    [[ $c =~ ^[A-Fa-f]:[0-9]+:[0-9]+$ ]] || { echo "ycsb-crosscheck: a case is W:RECORDS:OPERATIONS, not '$c'" >&2; exit 2; }
done
draws=${CROSSCHECK_DRAWS:-1000000}
top=${CROSSCHECK_TOP:-20}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
project=$root/interop/ycsb
work=$(mktemp -d -t spindle-ycsb-crosscheck.XXXXXX)
trap 'rm -rf "$work"' EXIT

started=$SECONDS
# Compile (no tests needed here) and write target/classpath.txt.
if ! mvn -B -q --no-transfer-progress -f "$project/pom.xml" process-classes >"$work/mvn.log" 2>&1; then
    cat "$work/mvn.log" >&2
    echo "ycsb-crosscheck: building interop/ycsb failed" >&2
    exit 1
fi
classpath=$project/target/classes:$(cat "$project/target/classpath.txt")

i=0
for c in "${cases[@]}"; do
    IFS=: read -r w records operations <<<"$c"
    w=${w^^}
    "$spindle_bin" bench ycsb-sample --workload "$w" --records "$records" --operations "$operations" \
        --draws "$draws" --top "$top" >"$work/$i.rust.json"
    java -cp "$classpath" spindle.ycsb.GeneratorSample --workloads "$project/workloads" --workload "$w" \
        --records "$records" --operations "$operations" --draws "$draws" --top "$top" --mode frozen \
        >"$work/$i.java.json"
    echo "$w $records $operations $work/$i.rust.json $work/$i.java.json" >>"$work/cases"
    i=$((i + 1))
done

set +e
python3 - "$work/cases" "$draws" "$top" <<'PY'
import json, sys

cases_file, draws, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
OP_SHARE_TOLERANCE = 0.01      # absolute, 1 percentage point
TOP_OVERLAP_MIN = 0.80         # fraction of the top-K records in common
HOTTEST_REL_TOLERANCE = 0.10   # relative difference of the hottest record's share

failed = 0
for line in open(cases_file):
    w, records, operations, rust_file, java_file = line.split()
    rust, java = json.load(open(rust_file)), json.load(open(java_file))
    problems = []
    print(f"\n== workload {w}: records={records} operations={operations} draws={draws} "
          f"(request distribution: {java.get('requestdistribution', '?')})")
    print(f"   {'operation':<16} {'Rust':>9} {'YCSB':>9} {'diff (pp)':>10}")
    for op in sorted(set(rust["operations"]) | set(java["operations"])):
        r = rust["operations"].get(op, 0) / draws
        j = java["operations"].get(op, 0) / draws
        bad = abs(r - j) > OP_SHARE_TOLERANCE
        print(f"   {op:<16} {100*r:8.2f}% {100*j:8.2f}% {100*(r-j):+10.2f}{'  <-- MISMATCH' if bad else ''}")
        if bad:
            problems.append(f"{op} share {100*r:.2f}% vs {100*j:.2f}%")

    def key_draws(side):
        return draws - side["operations"].get("Insert", 0)
    rk, jk = key_draws(rust), key_draws(java)
    rtop = [e["record"] for e in rust["top_records"][:top]]
    jtop = [e["record"] for e in java["top_records"][:top]]
    k = min(top, len(rtop), len(jtop))
    common = set(rtop[:k]) & set(jtop[:k])
    overlap = len(common) / k if k else 0.0
    print(f"   top-{k} records in common: {len(common)}/{k} ({100*overlap:.0f}%)"
          f"{'  <-- MISMATCH' if overlap < TOP_OVERLAP_MIN else ''}")
    if overlap < TOP_OVERLAP_MIN:
        problems.append(f"top-{k} overlap {100*overlap:.0f}% < {100*TOP_OVERLAP_MIN:.0f}%")

    rs = rust["top_records"][0]["count"] / rk
    js = java["top_records"][0]["count"] / jk
    rel = abs(rs - js) / js
    same = rust["top_records"][0]["record"] == java["top_records"][0]["record"]
    print(f"   hottest record: Rust {rust['top_records'][0]['record']} ({100*rs:.3f}% of key draws), "
          f"YCSB {java['top_records'][0]['record']} ({100*js:.3f}%): relative diff {100*rel:.1f}%"
          f"{'' if same and rel <= HOTTEST_REL_TOLERANCE else '  <-- MISMATCH'}")
    if not same:
        problems.append("different hottest record")
    if rel > HOTTEST_REL_TOLERANCE:
        problems.append(f"hottest share {100*rs:.3f}% vs {100*js:.3f}%")

    # Side by side: the first records of each ranking with both sides' shares.
    rmap = {e["record"]: e["count"] / rk for e in rust["top_records"]}
    jmap = {e["record"]: e["count"] / jk for e in java["top_records"]}
    print(f"   {'rank':>4} {'Rust record':>12} {'share':>8} {'YCSB record':>12} {'share':>8}")
    for n in range(min(5, k)):
        print(f"   {n+1:>4} {rtop[n]:>12} {100*rmap[rtop[n]]:7.3f}% {jtop[n]:>12} {100*jmap[jtop[n]]:7.3f}%")
    if problems:
        failed += 1
        print("   RESULT: MISMATCH: " + "; ".join(problems))
    else:
        print("   RESULT: match")

total = sum(1 for _ in open(cases_file))
print(f"\nycsb-crosscheck: {total - failed} of {total} cases match")
sys.exit(1 if failed else 0)
PY
status=$?
set -e
echo "ycsb-crosscheck: done in $((SECONDS - started))s" >&2
exit $status
