#!/usr/bin/env bash
# Side-by-side benchmark on this machine, in one run: Spindle vs the reference Java Kinetic
# simulator (kinetic-simulator 0.8.0.4, through scripts/java-simulator.sh) vs redis-server.
#
#   scripts/bench-compare.sh [--quick] [--out FILE] [--spindle BIN] [options]
#
# Experiments (Spindle and the simulator are driven by the same `spindle bench put|get` client
# with the same parameters; redis by redis-benchmark at the same connection count, pipeline
# depth and value size):
#   (a) 120 B and 4 KiB WRITEBACK puts, then gets; 8 connections x depth 16.
#   (b) 1 MiB sequential-key WRITEBACK puts ended by FLUSHALLDATA (timed), then 1 MiB gets;
#       8 connections x depth 2.
#   (c) 4 KiB WRITETHROUGH puts: 1 connection x depth 1 vs 16 connections x depth 1 (group
#       commit); Spindle and the simulator.
#   (d) peak resident memory (VmHWM) of each server after the runs.
#
# Prints a Markdown report (one table per experiment, ratios, memory, counts, the command line
# that reproduces it) to stdout and to --out (default bench-results/compare-DATE.md), and writes
# every measurement as one JSON line to the same name with .jsonl (also embedded in the report).
#
# It installs what is missing: redis-server/redis-tools (and a JDK/Maven/python3 if absent) from
# Debian with apt-get, the simulator launcher with Maven (first use of java-simulator.sh), and
# builds target/release/spindle if it is missing or older than the sources (unless --spindle).
# Every server listens on 127.0.0.1 only, on a free port, with data in a temporary directory;
# all of them are stopped and the directory removed on exit. Each bench run is bounded by
# --run-timeout. Exit status: 0 all runs fine, 3 some run failed or had errors (the report
# says what failed, with the server's log tail), 1 set-up failure.
#
# Options:
#   --quick                 tiny counts, a smoke test of the whole pipeline (seconds)
#   --out FILE              report file (raw JSON lines go to FILE with .md replaced by .jsonl)
#   --spindle BIN           use this spindle binary (no build)
#   --repeat R              run every put/get pair R times and report medians (default 1)
#   --run-timeout S         limit for one bench run in seconds (default 300; quick 60)
#   --tmp-dir DIR           where the temporary data directories go (default ${TMPDIR:-/tmp})
#   --keep-tmp              keep the temporary directory (data and server logs)
#   --sim-verbose           run the simulator with INFO logging
#   --small-count N         (a) puts/gets per size for Spindle and redis   (default 200000)
#   --sim-small-count N     (a) for the simulator                          (default 30000)
#   --large-count N         (b) 1 MiB puts/gets for Spindle and redis      (default 2000)
#   --sim-large-count N     (b) for the simulator                          (default 500)
#   --wt1-count N           (c) 1-connection WRITETHROUGH puts, Spindle    (default 8000)
#   --wt16-count N          (c) 16-connection WRITETHROUGH puts, Spindle   (default 40000)
#   --sim-wt1-count N       (c) 1-connection, simulator                    (default 3000)
#   --sim-wt16-count N      (c) 16-connection, simulator                   (default 5000)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
orig_args=("$@")
started_epoch=$(date +%s)
SECONDS=0

log() { echo "bench-compare: $*" >&2; }
die() {
    log "$*"
    exit 1
}

quick=0 out= spindle_bin= repeat=1 run_timeout= tmp_base=${TMPDIR:-/tmp} keep_tmp=0 sim_verbose=0
declare -A count=(
    [small]=200000 [sim_small]=30000
    [large]=2000 [sim_large]=500
    [wt1]=8000 [wt16]=40000 [sim_wt1]=3000 [sim_wt16]=5000
)
declare -A count_set=()

need_arg() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) quick=1 ;;
        --out) need_arg "$@"; out=$2; shift ;;
        --spindle) need_arg "$@"; spindle_bin=$2; shift ;;
        --repeat) need_arg "$@"; repeat=$2; shift ;;
        --run-timeout) need_arg "$@"; run_timeout=$2; shift ;;
        --tmp-dir) need_arg "$@"; tmp_base=$2; shift ;;
        --keep-tmp) keep_tmp=1 ;;
        --sim-verbose) sim_verbose=1 ;;
        --small-count | --sim-small-count | --large-count | --sim-large-count | \
            --wt1-count | --wt16-count | --sim-wt1-count | --sim-wt16-count)
            need_arg "$@"
            name=${1#--}
            name=${name%-count}
            name=${name//-/_}
            [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1: not a positive count: $2"
            count[$name]=$2
            count_set[$name]=1
            shift
            ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
            exit 0
            ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done
[[ $repeat =~ ^[1-9][0-9]*$ ]] || die "--repeat: not a positive number: $repeat"

if ((quick)); then
    declare -A quick_counts=(
        [small]=3000 [sim_small]=1000 [large]=40 [sim_large]=20
        [wt1]=200 [wt16]=800 [sim_wt1]=100 [sim_wt16]=200
    )
    for k in "${!quick_counts[@]}"; do
        [[ -n ${count_set[$k]:-} ]] || count[$k]=${quick_counts[$k]}
    done
    run_timeout=${run_timeout:-60}
fi
run_timeout=${run_timeout:-300}
[[ $run_timeout =~ ^[1-9][0-9]*$ ]] || die "--run-timeout: not a positive number of seconds"

stamp=$(date -u +%Y%m%d-%H%M%S)
if [[ -z $out ]]; then
    suffix=
    if ((quick)); then suffix=-quick; fi
    out=$root/bench-results/compare-$stamp$suffix.md
fi
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
jsonl=${out%.md}.jsonl
[[ $jsonl != "$out" ]] || jsonl=$out.jsonl

# ---------------------------------------------------------------------------------------------
# Tools

# shellcheck source=servers.sh
source "$root/scripts/servers.sh"

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-benchmark >/dev/null && command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v java >/dev/null || missing+=(default-jdk-headless)
command -v mvn >/dev/null || missing+=(maven)
command -v python3 >/dev/null || missing+=(python3)
if ((${#missing[@]})); then
    apt_install "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi
for t in redis-server redis-benchmark redis-cli java mvn python3 timeout; do
    command -v "$t" >/dev/null || die "$t not found after installation"
done

# Spindle: build unless given, or when the binary is older than any source.
if [[ -z $spindle_bin ]]; then
    spindle_bin=$root/target/release/spindle
    if [[ ! -x $spindle_bin ]] ||
        [[ -n $(find "$root/crates" "$root/Cargo.toml" "$root/Cargo.lock" -type f \
            -not -path '*/target/*' -newer "$spindle_bin" -print -quit) ]]; then
        log "building spindle (cargo build --release -p spindle-cli)"
        (cd "$root" && cargo build --release -p spindle-cli >&2) || die "cargo build failed"
    fi
fi
[[ -x $spindle_bin ]] || die "not an executable: $spindle_bin"
spindle_bin=$(cd "$(dirname "$spindle_bin")" && pwd)/$(basename "$spindle_bin")

# ---------------------------------------------------------------------------------------------
# Servers

mkdir -p "$tmp_base"
work=$(mktemp -d "$tmp_base/bench-compare.XXXXXX")
spindle_pid= sim_pid= redis_pid=
spindle_port= sim_port= redis_port=

cleanup() {
    local rc=$?
    only all
    stop_pid "$spindle_pid" spindle 60
    stop_pid "$sim_pid" simulator 20
    stop_pid "$redis_pid" redis-server 20
    spindle_pid= sim_pid= redis_pid=
    if ((keep_tmp)); then
        log "kept $work"
    else
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
# Helper (JSON lines, redis CSV, the report)

helper=$work/helper.py
cat >"$helper" <<'PY'
import csv, io, json, os, statistics, sys

def key(i):
    return b"key:%012d" % i

def cmd_wrap(a):
    # a: meta json (string), stdout file, stderr file, rc
    meta = json.loads(a[0])
    rc = int(a[3])
    raw = open(a[1], encoding="utf-8", errors="replace").read().strip()
    err = open(a[2], encoding="utf-8", errors="replace").read()
    line = dict(meta, exit=rc)
    res = None
    for l in raw.splitlines():
        try:
            res = json.loads(l)
        except ValueError:
            pass
    if res is not None:
        line.update(ops_per_second=res["ops_per_second"], megabytes_per_second=res["megabytes_per_second"],
                    seconds=res["seconds"], errors=res["errors"],
                    latency_us={"p50": res["latency_us"]["p50"], "p99": res["latency_us"]["p99"],
                                "max": res["latency_us"]["max"]},
                    raw=res)
    line["ok"] = rc == 0 and res is not None and res["errors"] == 0
    if not line["ok"]:
        line["stderr_tail"] = err[-3000:]
        if rc == 124:
            line["stderr_tail"] += "\n(killed by the run timeout)"
    print(json.dumps(line))

def cmd_redis(a):
    meta = json.loads(a[0])
    rc = int(a[2])
    text = open(a[1], encoding="utf-8", errors="replace").read()
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    header = None
    found = {}
    for r in rows:
        if r[0] == "test":
            header = r
            continue
        if r[0] in ("SET", "GET") and len(r) >= 2:
            found[r[0]] = dict(zip(header, r)) if header else {"test": r[0], "rps": r[1]}
    size = meta["value_size"]
    for test, op in (("SET", "put"), ("GET", "get")):
        line = {k: v for k, v in meta.items() if not k.startswith(("put_", "get_"))}
        line.update(op=op, exit=rc, server_cpu_ms=meta[op + "_server_cpu_ms"], client_cpu_ms=meta[op + "_client_cpu_ms"])
        row = found.get(test)
        if row is not None:
            ops = float(row["rps"])
            lat = {}
            for k, name in (("p50_latency_ms", "p50"), ("p99_latency_ms", "p99"), ("max_latency_ms", "max")):
                if k in row:
                    lat[name] = round(float(row[k]) * 1000)
            line.update(ops_per_second=ops, megabytes_per_second=ops * size / 1e6, errors=0,
                        seconds=meta["count"] / ops if ops else None, latency_us=lat, raw=row)
        line["ok"] = rc == 0 and row is not None
        if not line["ok"]:
            line["stderr_tail"] = text[-3000:]
        print(json.dumps(line))

def cmd_fill(a):
    # RESP for SET key:%012d <size bytes> for every key redis-benchmark -r COUNT can draw.
    size, n = int(a[0]), int(a[1])
    value = b"x" * size
    out = sys.stdout.buffer
    vhead = b"$%d\r\n" % size
    for i in range(n):
        k = key(i)
        out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n" % (len(k), k))
        out.write(vhead)
        out.write(value)
        out.write(b"\r\n")
    out.flush()

def fmt_ops(v):
    return f"{v:,.0f}"

def fmt_mb(v):
    return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"

def fmt_ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.2f}×"

def cmd_render(a):
    jsonl, metafile = a[0], a[1]
    lines = [json.loads(l) for l in open(jsonl) if l.strip()]
    meta = json.load(open(metafile))
    # Group repeats: median of ops/s; failed if any repeat failed.
    groups = {}
    for l in lines:
        if l["experiment"] == "w":
            continue
        k = (l["experiment"], l["system"], l["op"], l["value_size"], l["connections"], l["depth"])
        groups.setdefault(k, []).append(l)

    def get(exp, system, op, size, conns, depth):
        g = groups.get((exp, system, op, size, conns, depth))
        if not g:
            return None
        failed = [l for l in g if not l["ok"]]
        okv = [l for l in g if l.get("ops_per_second") is not None and l["ok"]]
        r = {"count": g[0]["count"], "runs": len(g), "failed": failed,
             "cmd": g[0].get("cmd", "")}
        if okv:
            r["ops"] = statistics.median(l["ops_per_second"] for l in okv)
            r["mb"] = statistics.median(l["megabytes_per_second"] for l in okv)
            p50 = [l["latency_us"].get("p50") for l in okv if l.get("latency_us", {}).get("p50") is not None]
            p99 = [l["latency_us"].get("p99") for l in okv if l.get("latency_us", {}).get("p99") is not None]
            r["p50"] = statistics.median(p50) if p50 else None
            r["p99"] = statistics.median(p99) if p99 else None
        return r

    def cells(r):
        if r is None:
            return ["n/a", "n/a"]
        if r["failed"]:
            f = r["failed"][0]
            why = f"exit {f['exit']}" if f["exit"] != 0 else f"{f.get('errors')} errors"
            if "ops" in r:
                return [f"**FAILED** ({why}; {fmt_ops(r['ops'])} in ok runs)", "–"]
            if f.get("ops_per_second") is not None:
                return [f"**FAILED** ({why}; nominal {fmt_ops(f['ops_per_second'])})", "–"]
            return [f"**FAILED** ({why})", "–"]
        return [fmt_ops(r["ops"]), fmt_mb(r["mb"])]

    def val(r):
        return None if r is None or r["failed"] or "ops" not in r else r["ops"]

    def lat(r):
        if r is None or "ops" not in r or r.get("p50") is None:
            return "–"
        return f"{r['p50']:,.0f} / {r['p99']:,.0f}" if r.get("p99") is not None else f"{r['p50']:,.0f}"

    o = []
    w = o.append
    title = "Spindle vs Kinetic simulator vs redis" + (" (--quick smoke run)" if meta["quick"] else "")
    w(f"# {title}, {meta['date']}")
    w("")
    w(f"- Machine: {meta['nproc']} cores, {meta['mem']}, kernel {meta['kernel']}; data directories on "
      f"{meta['fstype']} ({meta['tmp_base']}). Clients and servers share these cores; all traffic on 127.0.0.1.")
    w(f"- Spindle: `{meta['spindle_bin']}` (built {meta['spindle_mtime']}); repository at run time: {meta['git']}; "
      f"started as `spindle {meta['spindle_flags']}` (fjall engine).")
    w(f"- Simulator: kinetic-simulator 0.8.0.4 via scripts/java-simulator.sh (loopback, no heartbeat), {meta['java']}; "
      f"one JVM for the whole run; both Kinetic servers get an untimed warm-up (4 KiB puts and gets) first.")
    w(f"- redis: {meta['redis']}, `--save '' --appendonly no` (memory only, no durability), measured by redis-benchmark "
      f"(one client thread) with `-r COUNT` random keys; before each GET run the whole keyspace is stored with "
      f"`redis-cli --pipe` (untimed), so every GET hits.")
    w(f"- Kinetic runs: `spindle bench put|get --json`, 16-byte sequential keys, the same parameters for Spindle and the "
      f"simulator; the simulator gets lower counts (it is slower) — ops/s are comparable, counts are listed below. "
      f"MB/s = 10^6 value bytes per second. "
      + ("Figures are medians of %d runs." % meta["repeat"] if meta["repeat"] > 1 else "One run per figure: this machine drifts up to 2× hour to hour, compare within a report.")
      )
    w(f"- Wall time: {meta['elapsed_s']} s in all ({meta['bench_s']} s of benchmark runs).")
    w("")
    w("Reproduce:")
    w("")
    w("```")
    w(meta["reproduce"])
    w("```")
    w("")

    sysnames = [("spindle", "Spindle"), ("simulator", "simulator"), ("redis", "redis")]

    # (a)
    w("## (a) Small values: WRITEBACK puts then gets, 8 connections × depth 16")
    w("")
    w("| value | op | Spindle ops/s | Spindle MB/s | simulator ops/s | simulator MB/s | redis ops/s | redis MB/s | Spindle/simulator | Spindle/redis |")
    w("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for size, sname in ((120, "120 B"), (4096, "4 KiB")):
        for op in ("put", "get"):
            rs = [get("a", s, op, size, 8, 16) for s, _ in sysnames]
            row = [sname, op if op == "get" else "put (WRITEBACK)"]
            for r in rs:
                row += cells(r)
            row += [fmt_ratio(val(rs[0]), val(rs[1])), fmt_ratio(val(rs[0]), val(rs[2]))]
            w("| " + " | ".join(row) + " |")
    w("")

    # (b)
    w("## (b) 1 MiB values: sequential-key WRITEBACK puts ended by FLUSHALLDATA, then gets; 8 connections × depth 2")
    w("")
    w("| op | Spindle ops/s | Spindle MB/s | simulator ops/s | simulator MB/s | redis ops/s | redis MB/s | Spindle/simulator | Spindle/redis |")
    w("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for op, oname in (("put", "put + FLUSH (redis: SET, no flush)"), ("get", "get")):
        rs = [get("b", s, op, 1048576, 8, 2) for s, _ in sysnames]
        row = [oname]
        for r in rs:
            row += cells(r)
        row += [fmt_ratio(val(rs[0]), val(rs[1])), fmt_ratio(val(rs[0]), val(rs[2]))]
        w("| " + " | ".join(row) + " |")
    w("")

    # (c)
    w("## (c) 4 KiB WRITETHROUGH puts: 1 connection vs 16 connections (depth 1: group commit)")
    w("")
    w("| connections × depth | Spindle ops/s | Spindle MB/s | Spindle p50 / p99 µs | simulator ops/s | simulator MB/s | simulator p50 / p99 µs | Spindle/simulator |")
    w("|---|--:|--:|--:|--:|--:|--:|--:|")
    c = {}
    for conns in (1, 16):
        rs = [get("c", s, "put", 4096, conns, 1) for s in ("spindle", "simulator")]
        c[conns] = rs
        row = [f"{conns} × 1"] + cells(rs[0]) + [lat(rs[0])] + cells(rs[1]) + [lat(rs[1])]
        row += [fmt_ratio(val(rs[0]), val(rs[1]))]
        w("| " + " | ".join(row) + " |")
    w("| **16-conn / 1-conn** | **" + fmt_ratio(val(c[16][0]), val(c[1][0])) + "** | | | "
      + fmt_ratio(val(c[16][1]), val(c[1][1])) + " | | | |")
    w("")

    # (d)
    w("## (d) Peak resident memory after all runs (VmHWM from /proc/PID/status)")
    w("")
    w("| server | VmHWM | VmRSS at the end |")
    w("|---|--:|--:|")
    for s, name in sysnames:
        m = meta["memory"].get(s, {})
        def mib(kb):
            return f"{int(kb) / 1024:,.0f} MiB" if kb else "n/a"
        w(f"| {name}{' (JVM)' if s == 'simulator' else ''} | {mib(m.get('VmHWM'))} | {mib(m.get('VmRSS'))} |")
    w("")
    sp = meta["memory"].get("spindle", {})
    if sp.get("VmHWM"):
        w(f"**Spindle peak RSS: {int(sp['VmHWM']) / 1024:,.0f} MiB.**")
        w("")

    # Latency details
    w("## Every run: latency and CPU")
    w("")
    w("p50 / p99 latency (redis: from redis-benchmark's ms figures); CPU µs per operation of the server process and "
      "of the benchmark client (`spindle bench` or redis-benchmark), from /proc/PID/stat and `times` (10 ms ticks). "
      "Client and server share the 2 cores, so a heavy client lowers every figure of its system.")
    w("")
    w("| exp | system | op | value | conns × depth | count | ops/s | p50 / p99 µs | server CPU µs/op | client CPU µs/op |")
    w("|---|---|---|--:|---|--:|--:|--:|--:|--:|")
    def cpu(k, field):
        g = [l for l in groups[k] if l.get(field) is not None]
        if not g:
            return "–"
        return f"{statistics.median(l[field] * 1000 / l['count'] for l in g):,.1f}"
    for k in groups:
        exp, s, op, size, conns, depth = k
        r = get(*k)
        w(f"| {exp} | {s} | {op} | {size:,} | {conns} × {depth} | {r['count']:,} | "
          f"{cells(r)[0]} | {lat(r)} | {cpu(k, 'server_cpu_ms')} | {cpu(k, 'client_cpu_ms')} |")
    w("")

    # Counts
    w("## Counts used")
    w("")
    cn = meta["counts"]
    w("| experiment | Spindle | simulator | redis |")
    w("|---|--:|--:|--:|")
    w(f"| (a) per size, puts and gets | {cn['small']:,} | {cn['sim_small']:,} | {cn['small']:,} (`-n`, `-r`) |")
    w(f"| (b) 1 MiB puts and gets | {cn['large']:,} | {cn['sim_large']:,} | {cn['large']:,} (`-n`, `-r`) |")
    w(f"| (c) 1 connection | {cn['wt1']:,} | {cn['sim_wt1']:,} | – |")
    w(f"| (c) 16 connections | {cn['wt16']:,} | {cn['sim_wt16']:,} | – |")
    w("")

    # Failures
    failed = [l for l in lines if not l["ok"]]
    if failed:
        w("## Failures")
        w("")
        for l in failed:
            w(f"### {l['experiment']} {l['system']} {l['op']} {l['value_size']} B, {l['connections']} × {l['depth']}"
              f" (run {l.get('rep', 1)}): exit {l['exit']}"
              + (f", errors {l['errors']:,} of {l['count']:,}" if l.get("errors") is not None else ", no result"))
            w("")
            w("```")
            w(l.get("cmd", ""))
            w((l.get("stderr_tail") or "").rstrip())
            if l.get("probe"):
                w("--- single-request probe ---")
                w(l["probe"].rstrip())
            w("```")
            w("")
        for name in sorted({l["system"] for l in failed}):
            t = meta["log_tails"].get(name)
            if t:
                w(f"{name} log tail:")
                w("")
                w("```")
                w(t.rstrip())
                w("```")
                w("")

    w(f"Raw JSON lines: `{meta['jsonl']}`")
    w("")
    w("<details><summary>raw JSON lines</summary>")
    w("")
    w("```json")
    for l in lines:
        w(json.dumps(l))
    w("```")
    w("")
    w("</details>")
    print("\n".join(o))

{"wrap": cmd_wrap, "redis": cmd_redis, "fill": cmd_fill, "render": cmd_render}[sys.argv[1]](sys.argv[2:])
PY

# ---------------------------------------------------------------------------------------------
# Runs

: >"$jsonl"
bench_us=0
add_bench_time() { # START_EPOCHREALTIME
    local now=$EPOCHREALTIME
    bench_us=$((bench_us + ${now/./} - ${1/./}))
}
any_failed=0

meta_json() { # key=value... -> JSON object (values that look numeric become numbers)
    python3 - "$@" <<'PY'
import json, sys
d = {}
for a in sys.argv[1:]:
    k, v = a.split("=", 1)
    d[k] = int(v) if v.isdigit() else (v == "true" if v in ("true", "false") else v)
print(json.dumps(d))
PY
}

# Appends a probe (one put and one get with the CLI) to the last JSON line after a failure, so
# the report shows the drive's actual answer.
probe() { # SYSTEM PORT SIZE SYNC
    local port=$2 size=$3 sync=$4 p=$work/probe
    head -c "$size" /dev/zero | tr '\0' 'Z' >"$p.value"
    {
        echo "\$ spindle put bench-compare-probe --file VALUE($size B) --force --sync $sync"
        timeout 60 "$spindle_bin" put bench-compare-probe --file "$p.value" --force --sync "$sync" \
            --drive "127.0.0.1:$port" 2>&1 || echo "(exit $?)"
        echo "\$ spindle get 0000000000000000 --metadata-only   (key 0 of the bench)"
        timeout 60 "$spindle_bin" get 0000000000000000 --metadata-only --drive "127.0.0.1:$port" 2>&1 ||
            echo "(exit $?)"
        echo "\$ spindle ping -n 3"
        timeout 60 "$spindle_bin" ping -n 3 --drive "127.0.0.1:$port" 2>&1 || echo "(exit $?)"
    } >"$p.txt"
    python3 - "$jsonl" "$p.txt" <<'PY'
import json, sys
path, probe = sys.argv[1], open(sys.argv[2], errors="replace").read()
lines = open(path).read().splitlines()
last = json.loads(lines[-1]); last["probe"] = probe; lines[-1] = json.dumps(last)
open(path, "w").write("\n".join(lines) + "\n")
PY
}

# CPU time in ms: of a server (utime + stime from /proc/PID/stat) and of this shell's waited-for
# children (the bench client, through `times`), read before and after each run.
clk_tck=$(getconf CLK_TCK)
cpu_ms=0
proc_cpu_ms() { # PID
    local f
    read -r -a f <"/proc/$1/stat" 2>/dev/null || { echo 0; return; }
    echo $(((f[13] + f[14]) * 1000 / clk_tck))
}
children_cpu_ms() { # sets $cpu_ms: must run in this shell, not in $(...) (a subshell has no children)
    times >"$work/times.txt"
    local total=0 part frac
    for part in $(tail -n 1 "$work/times.txt"); do
        [[ $part =~ ^([0-9]+)m([0-9]+)\.([0-9]+)s$ ]] || continue
        frac=${BASH_REMATCH[3]}000
        total=$((total + 10#${BASH_REMATCH[1]} * 60000 + 10#${BASH_REMATCH[2]} * 1000 + 10#${frac:0:3}))
    done
    cpu_ms=$total
}

kinetic_run() { # EXP SYSTEM PORT OP SIZE CONNS DEPTH COUNT SYNC FLUSH REP
    local exp=$1 system=$2 port=$3 op=$4 size=$5 conns=$6 depth=$7 n=$8 sync=$9 flush=${10} rep=${11}
    local args=(bench "$op" --drive "127.0.0.1:$port" --count "$n" --value-size "$size"
        --connections "$conns" --depth "$depth" --json)
    if [[ $op == put ]]; then args+=(--sync "$(tr '[:upper:]' '[:lower:]' <<<"$sync")"); fi
    if [[ $op == put && $flush == true ]]; then args+=(--flush); fi
    local server_pid=$spindle_pid
    if [[ $system == simulator ]]; then server_pid=$sim_pid; fi
    local s0 c0 s1 c1
    children_cpu_ms
    s0=$(proc_cpu_ms "$server_pid") c0=$cpu_ms
    local rc=0 t0=$EPOCHREALTIME
    timeout --kill-after=10 "$run_timeout" "$spindle_bin" "${args[@]}" >"$work/run.out" 2>"$work/run.err" || rc=$?
    add_bench_time "$t0"
    children_cpu_ms
    s1=$(proc_cpu_ms "$server_pid") c1=$cpu_ms
    local sync_field=$sync flush_field=$flush
    if [[ $op == get ]]; then sync_field=- flush_field=false; fi
    local meta
    meta=$(meta_json experiment="$exp" system="$system" op="$op" value_size="$size" connections="$conns" \
        depth="$depth" count="$n" sync="$sync_field" flush="$flush_field" rep="$rep" \
        server_cpu_ms=$((s1 - s0)) client_cpu_ms=$((c1 - c0)) cmd="spindle ${args[*]}")
    python3 "$helper" wrap "$meta" "$work/run.out" "$work/run.err" "$rc" >>"$jsonl"
    local summary
    summary=$(tail -n 1 "$jsonl" | python3 -c 'import json,sys; l=json.load(sys.stdin); print(("ok" if l["ok"] else "FAILED") + (", %.0f ops/s, %.1f MB/s, errors %s" % (l["ops_per_second"], l["megabytes_per_second"], l["errors"]) if l.get("ops_per_second") is not None else ", exit %d" % l["exit"]))')
    local what="$op"
    if [[ $op == put ]]; then what="put $sync"; fi
    if [[ $op == put && $flush == true ]]; then what="$what +flush"; fi
    log "($exp) $system $what ${size} B x $n, $conns x $depth: $summary"
    if [[ $summary == FAILED* ]]; then
        any_failed=1
        tail -n 5 "$work/run.err" >&2 || true
        probe "$system" "$port" "$size" "$(tr '[:upper:]' '[:lower:]' <<<"$sync")"
    fi
}

redis_run() { # EXP SIZE CONNS DEPTH COUNT REP
    local exp=$1 size=$2 conns=$3 depth=$4 n=$5 rep=$6
    local common=(-h 127.0.0.1 -p "$redis_port" -c "$conns" -P "$depth" -n "$n" -d "$size" -r "$n" --csv)
    local rc=0 t0
    redis-cli -h 127.0.0.1 -p "$redis_port" flushall >/dev/null
    local s0 c0 ss sc gs gc
    children_cpu_ms
    s0=$(proc_cpu_ms "$redis_pid") c0=$cpu_ms
    t0=$EPOCHREALTIME
    timeout --kill-after=10 "$run_timeout" redis-benchmark "${common[@]}" -t set >"$work/redis-set.csv" 2>&1 || rc=$?
    add_bench_time "$t0"
    children_cpu_ms
    ss=$(($(proc_cpu_ms "$redis_pid") - s0)) sc=$((cpu_ms - c0))
    # Store every key the GET run can draw (untimed), so that every GET hits.
    python3 "$helper" fill "$size" "$n" | redis-cli -h 127.0.0.1 -p "$redis_port" --pipe >"$work/redis-fill.txt" 2>&1 ||
        { log "redis fill failed"; cat "$work/redis-fill.txt" >&2; rc=1; }
    children_cpu_ms
    s0=$(proc_cpu_ms "$redis_pid") c0=$cpu_ms
    t0=$EPOCHREALTIME
    timeout --kill-after=10 "$run_timeout" redis-benchmark "${common[@]}" -t get >"$work/redis-get.csv" 2>&1 || rc=$?
    add_bench_time "$t0"
    children_cpu_ms
    gs=$(($(proc_cpu_ms "$redis_pid") - s0)) gc=$((cpu_ms - c0))
    cat "$work/redis-set.csv" "$work/redis-get.csv" >"$work/redis.csv"
    local meta
    meta=$(meta_json experiment="$exp" system=redis op=x value_size="$size" connections="$conns" depth="$depth" \
        count="$n" sync=none flush=false rep="$rep" put_server_cpu_ms="$ss" put_client_cpu_ms="$sc" \
        get_server_cpu_ms="$gs" get_client_cpu_ms="$gc" \
        cmd="redis-benchmark -h 127.0.0.1 -p P -c $conns -P $depth -n $n -d $size -r $n --csv -t set; (fill keyspace); ... -t get")
    python3 "$helper" redis "$meta" "$work/redis.csv" "$rc" >>"$jsonl"
    local l
    for l in 2 1; do
        tail -n "$l" "$jsonl" | head -n 1 | python3 -c 'import json,sys; l=json.load(sys.stdin); print("bench-compare: (%s) redis %s %d B x %d, %d x %d: %s" % (l["experiment"], l["op"], l["value_size"], l["count"], l["connections"], l["depth"], ("ok, %.0f ops/s, %.1f MB/s" % (l["ops_per_second"], l["megabytes_per_second"])) if l["ok"] else "FAILED"))' >&2
    done
    if tail -n 2 "$jsonl" | grep -q '"ok": false'; then any_failed=1; fi
}

log "work directory $work; report $out"
start_spindle
log "spindle drive pid $spindle_pid on 127.0.0.1:$spindle_port"
start_simulator
log "simulator pid $sim_pid on 127.0.0.1:$sim_port"
start_redis
log "redis-server pid $redis_pid on 127.0.0.1:$redis_port"

setup_seconds=$SECONDS

# Untimed warm-up of both Kinetic servers (the simulator's JIT above all), recorded as
# experiment "w" in the JSON lines only.
warm=${count[sim_small]}
((warm <= 5000)) || warm=5000
for op in put get; do
    only spindle
    kinetic_run w spindle "$spindle_port" "$op" 4096 8 16 "$warm" WRITEBACK false 1
    only simulator
    kinetic_run w simulator "$sim_port" "$op" 4096 8 16 "$warm" WRITEBACK false 1
done

for ((rep = 1; rep <= repeat; rep++)); do
    # (a) small values, 8 x 16, WRITEBACK
    for size in 120 4096; do
        only spindle
        for op in put get; do
            kinetic_run a spindle "$spindle_port" "$op" "$size" 8 16 "${count[small]}" WRITEBACK false "$rep"
        done
        only simulator
        for op in put get; do
            kinetic_run a simulator "$sim_port" "$op" "$size" 8 16 "${count[sim_small]}" WRITEBACK false "$rep"
        done
        only redis
        redis_run a "$size" 8 16 "${count[small]}" "$rep"
    done
    # (b) 1 MiB, 8 x 2, WRITEBACK puts + FLUSHALLDATA, then gets
    only spindle
    for op in put get; do
        kinetic_run b spindle "$spindle_port" "$op" 1048576 8 2 "${count[large]}" WRITEBACK true "$rep"
    done
    only simulator
    for op in put get; do
        kinetic_run b simulator "$sim_port" "$op" 1048576 8 2 "${count[sim_large]}" WRITEBACK true "$rep"
    done
    only redis
    redis_run b 1048576 8 2 "${count[large]}" "$rep"
    redis-cli -h 127.0.0.1 -p "$redis_port" flushall >/dev/null # give the 1 MiB values' memory back
    # (c) 4 KiB WRITETHROUGH puts, 1 x 1 vs 16 x 1
    only spindle
    kinetic_run c spindle "$spindle_port" put 4096 1 1 "${count[wt1]}" WRITETHROUGH false "$rep"
    only spindle
    kinetic_run c spindle "$spindle_port" put 4096 16 1 "${count[wt16]}" WRITETHROUGH false "$rep"
    only simulator
    kinetic_run c simulator "$sim_port" put 4096 1 1 "${count[sim_wt1]}" WRITETHROUGH false "$rep"
    only simulator
    kinetic_run c simulator "$sim_port" put 4096 16 1 "${count[sim_wt16]}" WRITETHROUGH false "$rep"
done

# (d) memory
mem_of() { # PID -> "VmHWM=kB VmRSS=kB"
    [[ -n $1 && -r /proc/$1/status ]] || return 0
    awk '/^VmHWM:|^VmRSS:/ { sub(":", "", $1); printf "%s=%s ", $1, $2 }' "/proc/$1/status"
}
declare -A mem=([spindle]=$(mem_of "$spindle_pid") [simulator]=$(mem_of "$sim_pid") [redis]=$(mem_of "$redis_pid"))
kill -0 "$spindle_pid" 2>/dev/null || { log "spindle drive died during the runs"; any_failed=1; }
kill -0 "$sim_pid" 2>/dev/null || { log "simulator died during the runs"; any_failed=1; }

# ---------------------------------------------------------------------------------------------
# Report

git_desc=$(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(cd "$root" && git status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null) ]]; then
    git_desc="$git_desc + uncommitted changes under crates/ or Cargo.*"
fi
stale=$(find "$root/crates" "$root/Cargo.toml" "$root/Cargo.lock" -type f -not -path '*/target/*' \
    -newer "$spindle_bin" 2>/dev/null | wc -l)
if ((stale > 0)); then
    git_desc="$git_desc; note: $stale source files are newer than this binary"
fi
repro=$(printf '%q ' "scripts/bench-compare.sh" "${orig_args[@]}")
repro="cd $(printf '%q' "$root") && ${repro% }"

BC_MEM_SPINDLE=${mem[spindle]} BC_MEM_SIMULATOR=${mem[simulator]} BC_MEM_REDIS=${mem[redis]} \
    BC_DATE=$(date -u '+%Y-%m-%d %H:%M UTC') BC_QUICK=$quick BC_NPROC=$(nproc) \
    BC_MEM=$(free -g | awk '/^Mem:/ { print $2 " GiB memory" }') BC_KERNEL=$(uname -r) \
    BC_FSTYPE=$(df -T "$work" | awk 'NR == 2 { print $2 }') BC_TMP_BASE=$tmp_base \
    BC_SPINDLE_BIN=$spindle_bin BC_SPINDLE_MTIME=$(date -u -r "$spindle_bin" '+%Y-%m-%d %H:%M:%S UTC') \
    BC_SPINDLE_FLAGS=$spindle_flags BC_GIT=$git_desc BC_JAVA=$(java -version 2>&1 | head -n 1) \
    BC_REDIS=$(redis-server --version | awk '{ print $1, $2, $3 }') BC_REPEAT=$repeat \
    BC_COUNTS=$(for k in "${!count[@]}"; do printf '%s=%s ' "$k" "${count[$k]}"; done) \
    BC_ELAPSED=$SECONDS BC_BENCH=$((bench_us / 1000000)) BC_SETUP=$setup_seconds BC_REPRO=$repro BC_JSONL=$jsonl \
    BC_WORK=$work \
    python3 - "$work/meta.json" <<'PY'
import json, os, sys
e = os.environ
def tail(p, n=60):
    try:
        return "".join(open(p, errors="replace").readlines()[-n:])
    except OSError:
        return ""
meta = {
    "date": e["BC_DATE"], "quick": e["BC_QUICK"] == "1", "nproc": e["BC_NPROC"], "mem": e["BC_MEM"],
    "kernel": e["BC_KERNEL"], "fstype": e["BC_FSTYPE"], "tmp_base": e["BC_TMP_BASE"],
    "spindle_bin": e["BC_SPINDLE_BIN"], "spindle_mtime": e["BC_SPINDLE_MTIME"],
    "spindle_flags": e["BC_SPINDLE_FLAGS"], "git": e["BC_GIT"], "java": e["BC_JAVA"], "redis": e["BC_REDIS"],
    "repeat": int(e["BC_REPEAT"]),
    "counts": {k: int(v) for k, v in (kv.split("=") for kv in e["BC_COUNTS"].split())},
    "memory": {name: dict(kv.split("=") for kv in e["BC_MEM_" + name.upper()].split())
               for name in ("spindle", "simulator", "redis")},
    "elapsed_s": int(e["BC_ELAPSED"]), "bench_s": int(e["BC_BENCH"]), "setup_s": int(e["BC_SETUP"]),
    "reproduce": e["BC_REPRO"], "jsonl": e["BC_JSONL"],
    "log_tails": {name: tail(os.path.join(e["BC_WORK"], f))
                  for name, f in (("simulator", "sim.err"), ("spindle", "spindle.err"), ("redis", "redis.log"))},
}
json.dump(meta, open(sys.argv[1], "w"))
PY

python3 "$helper" render "$jsonl" "$work/meta.json" >"$out"
cat "$out"
log "report written to $out (raw JSON lines: $jsonl); $SECONDS s in all"
if ((any_failed)); then
    log "some runs failed: see the Failures section"
    exit 3
fi
