# bench-cluster.sh --secured: the plaintext and the secured cluster side by side, 1 MiB values.
# Sourced by bench-cluster.sh (its settings, `work`, `results`, `bench`, servers.sh and its trap).
mib=$((1 << 20))
value_size=$mib
creds=$work/credentials
"$spindle_bin" cluster new-credentials --cluster secured --credentials "$creds" >/dev/null
"$spindle_bin" cluster issue-cert --credentials "$creds" --name 127.0.0.1 --out "$work/cert" >/dev/null

# Until every partition has its replicas on drives that are up and nothing moves.
settle() { # DRIVES STATUS_ARGS...
    local n=$1 deadline=$((SECONDS + 300))
    shift
    until "$spindle_bin" cluster status --json "$@" 2>/dev/null | cluster_settled "$n"; do
        ((SECONDS < deadline)) || die "the cluster did not settle (status: $*)"
        sleep 0.5
    done
}

# Waits until DRIVES (PIDs) have been quiet for a second, each under a sixtieth of a core on
# average: the value log's collection and the compactions that a run's puts set off belong to
# no run, and would otherwise fall on whichever run follows (the same cell swung from 0.66x to
# 1.26x between rounds that way). Gives up after 120 s, saying so; a drive gone is fatal.
quiet() { # PIDS...
    local deadline=$((SECONDS + 120)) hz before after
    hz=$(getconf CLK_TCK)
    while true; do
        before=$(cpu_ticks "$@")
        sleep 1
        after=$(cpu_ticks "$@")
        (((after - before) * 60 <= hz * $#)) && return 0
        if ((SECONDS >= deadline)); then
            log "drives $* still busy after 120 s; measuring anyway"
            return 0
        fi
    done
}

# User and system CPU ticks of PIDS together (fields 14 and 15 of /proc/PID/stat, counted
# after the command name, which may hold spaces).
cpu_ticks() { # PIDS...
    local p total=0 fields
    for p in "$@"; do
        fields=$(cat "/proc/$p/stat" 2>/dev/null) || die "drive $p is gone"
        fields=${fields##*) }
        total=$((total + $(awk '{print $12 + $13}' <<<"$fields")))
    done
    echo "$total"
}

for round in $(seq 1 "$repeat"); do
    for n in "${sizes[@]}"; do
        log "round $round: $n drives, plaintext and secured"
        replicas=$((n < 3 ? n : 3))
        quorum=$((replicas / 2 + 1))
        start_etcd "plain-etcd$round-$n"
        plain_url=$etcd_url
        "$spindle_bin" cluster init --etcd "$plain_url" --partitions 64 --replicas "$replicas" --write-quorum "$quorum" >/dev/null
        start_server "plain-coord$round-$n" 'coordinator .* (for) cluster' sh -c "exec '$spindle_bin' cluster coordinator --etcd $plain_url 2>&1"
        plain_drives=()
        for i in $(seq 1 "$n"); do
            start_drive "plain$round-$n-$i" "$spindle_bin"
            plain_drives+=("$drive_pid")
            "$spindle_bin" cluster add-drive "d$i" "127.0.0.1:$drive_port" --etcd "$plain_url" >/dev/null
        done

        plain_pids=("${server_pids[@]}")
        rm -f "$creds/etcd.json" "$creds/etcd-root.json"
        start_etcd "secure-etcd$round-$n" "$work/cert/cert.pem" "$work/cert/key.pem"
        secure_url=$etcd_url
        secure=(--etcd "$secure_url" --cluster secured --credentials "$creds")
        "$spindle_bin" cluster secure-etcd "${secure[@]}" >/dev/null
        "$spindle_bin" cluster init "${secure[@]}" --partitions 64 --replicas "$replicas" --write-quorum "$quorum" >/dev/null
        start_server "secure-coord$round-$n" 'coordinator .* (for) cluster' sh -c "exec '$spindle_bin' cluster coordinator ${secure[*]} 2>&1"
        secure_drives=()
        for i in $(seq 1 "$n"); do
            start_drive "secure$round-$n-$i" "$spindle_bin" --tls-cert "$work/cert/cert.pem" --tls-key "$work/cert/key.pem" \
                --p2p-tls-trust "$creds/ca.pem"
            secure_drives+=("$drive_pid")
            "$spindle_bin" cluster add-drive "d$i" "127.0.0.1:$drive_tls_port" "${secure[@]}" >/dev/null
        done
        secure_pids=("${server_pids[@]:${#plain_pids[@]}}")
        settle "$n" --etcd "$plain_url"
        settle "$n" "${secure[@]}"
        # The floor: what TLS costs this machine on bare loopback connections, in the same round.
        "$spindle_bin" bench tls-floor --message-size "$mib" --messages $((count * 4)) --connections 4 --json |
            python3 -c 'import json,sys; r=json.load(sys.stdin); print(json.dumps({"label":"floor","drives":int(sys.argv[1]),"op":"floor","load":"4","plain":r["plain"],"tls":r["tls"],"errors":0}))' "$n" >>"$results"
        # The two clusters share the disk and the cores: while one is measured the other is
        # paused (SIGSTOP: its compactions take nothing from the run), each run starts once
        # the runs before it are on disk (`sync`: none pays for another's writeback) and its
        # own drives are quiet (`quiet`), and the side that goes first alternates by round.
        sides=(plain secured)
        ((round % 2)) || sides=(secured plain)
        for load in "1 1" "4 2"; do
            for op in put get; do
                for side in "${sides[@]}"; do
                    if [[ $side == plain ]]; then
                        kill -STOP "${secure_pids[@]}"
                        quiet "${plain_drives[@]}"
                        sync
                        # shellcheck disable=SC2086
                        bench plain "$n" "cluster:$plain_url" "$op" $load
                        kill -CONT "${secure_pids[@]}"
                    else
                        kill -STOP "${plain_pids[@]}"
                        quiet "${secure_drives[@]}"
                        sync
                        # shellcheck disable=SC2086
                        SPINDLE_CREDENTIALS=$creds bench secured "$n" "cluster:$secure_url#secured" "$op" $load
                        kill -CONT "${plain_pids[@]}"
                    fi
                done
            done
        done
        stop_servers
        # The round's data goes with its servers (logs stay): on tmpfs, rounds of 1 MiB
        # values would otherwise fill the memory.
        for d in "$work/plain-etcd$round-$n" "$work/secure-etcd$round-$n" "$work/plain$round-$n-"* "$work/secure$round-$n-"*; do
            if [[ -d $d ]]; then rm -rf "$d"; fi
        done
    done
done

table=$(python3 - "$results" "$count" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
floors = [r for r in rows if r["label"] == "floor"]
rows = [r for r in rows if r["label"] != "floor"]
def med(label, n, op, load, field):
    v = [r[field] for r in rows if r["label"] == label and r["drives"] == n and r["op"] == op and r["load"] == load]
    return statistics.median(v) if v else float("nan")
m = lambda side, field: statistics.median(r[side][field] for r in floors)
# What TLS adds per MiB moved (encrypting and decrypting it), from the floor.
tls_ms_per_mib = (m("tls", "cpu_seconds_per_gib") - m("plain", "cpu_seconds_per_gib")) / 1024 * 1000 if floors else float("nan")
print(f"1 MiB values, {sys.argv[2]} operations per run; medians of the rounds. Client CPU: the bench process's per operation; machine CPU: every process's (servers included, both cores) per operation.")
print("`plain`: open drives over TCP, etcd over HTTP. `secured`: the cluster's identity over TLS to every drive, etcd over TLS with the cluster's user.")
print("`floor's ratio`: plain's machine CPU per operation over that plus what the floor below says TLS costs for the bytes an operation moves (a put sends its value to every replica, a get brings it from one): the ratio a run whose cores are the limit can reach.")
print()
print("| drives | op | load | MiB/s plain | MiB/s secured | secured ÷ plain | floor's ratio | p50 ms plain / secured | client CPU ms plain / secured | machine CPU ms plain / secured |")
print("|--:|---|---|--:|--:|--:|--:|---|---|---|")
for n in sorted({r["drives"] for r in rows}):
    moved = {"put": min(n, 3), "get": 1}
    for load in ("1 x 1", "4 x 2"):
        for op in ("put", "get"):
            f = lambda label, field: med(label, n, op, load, field)
            p, s = f("plain", "ops"), f("secured", "ops")
            plain_cpu = f("plain", "machine_cpu_us") / 1000
            floor_ratio = plain_cpu / (plain_cpu + moved[op] * tls_ms_per_mib)
            print(f"| {n} | {op} | {load} | {p:,.1f} | {s:,.1f} | {s/p:.2f}× | {floor_ratio:.2f}× | {f('plain', 'p50')/1000:,.1f} / {f('secured', 'p50')/1000:,.1f} "
                  f"| {f('plain', 'cpu_us')/1000:.2f} / {f('secured', 'cpu_us')/1000:.2f} | {plain_cpu:.2f} / {f('secured', 'machine_cpu_us')/1000:.2f} |")
if floors:
    print()
    print("The floor, in the same rounds (`spindle bench tls-floor`: 1 MiB messages over 4 loopback connections, each answered before the next, both ends in one process): what TLS costs this machine with no drive or cluster in the way.")
    print()
    print("| transport | MiB/s | CPU s per GiB (both ends) |")
    print("|---|--:|--:|")
    print(f"| TCP | {m('plain', 'mib_per_second'):,.0f} | {m('plain', 'cpu_seconds_per_gib'):.3f} |")
    print(f"| TLS | {m('tls', 'mib_per_second'):,.0f} | {m('tls', 'cpu_seconds_per_gib'):.3f} |")
    print(f"| TLS ÷ TCP | {m('tls', 'mib_per_second') / m('plain', 'mib_per_second'):.2f}× | +{m('tls', 'cpu_seconds_per_gib') - m('plain', 'cpu_seconds_per_gib'):.3f} |")
print()
print(f"errors over all runs: {sum(r['errors'] for r in rows)}")
PY
)
echo "$table"
[ -z "$out" ] || printf '%s\n' "$table" >"$out"
