# Starting, pausing and stopping the servers the scripts measure and test, all on 127.0.0.1.
# Sourced by every script that starts a drive, a simulator or redis. A script defines `log`,
# `die` and `$work` (a temporary directory; `$root`, `$spindle_bin` and `$sim_verbose` for
# start_spindle/start_simulator), starts servers with `start_drive` / `start_server` (or the
# bench scripts' start_spindle, start_simulator, start_redis) and calls `stop_servers` from its
# EXIT trap, so nothing it started outlives it, on failure and interruption too.

as_root() {
    if [[ $EUID -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

apt_install() {
    log "installing from Debian: $*"
    # Keep the packages' init scripts from starting a system-wide server (redis on 6379).
    local added_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        as_root sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'
        added_policy=1
    fi
    local rc=0
    as_root apt-get update -qq >&2 &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 || rc=$?
    if ((added_policy)); then as_root rm -f /usr/sbin/policy-rc.d; fi
    return "$rc"
}

stop_pid() { # PID NAME GRACE_SECONDS
    local pid=$1 name=$2 grace=$3
    [[ -n $pid ]] || return 0
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for ((i = 0; i < grace * 10; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name (pid $pid) did not stop on SIGTERM within ${grace}s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

# Pauses (SIGSTOP) every server but SYSTEM while SYSTEM is measured, so idle peers (the
# simulator JVM's JIT and GC threads above all) take no CPU from it; "all" resumes everyone.
only() { # SYSTEM|all
    local name pid
    for name in spindle simulator redis; do
        case $name in spindle) pid=$spindle_pid ;; simulator) pid=$sim_pid ;; redis) pid=$redis_pid ;; esac
        [[ -n $pid ]] || continue
        if [[ $1 == all || $1 == "$name" ]]; then
            kill -CONT "$pid" 2>/dev/null || true
        else
            kill -STOP "$pid" 2>/dev/null || true
        fi
    done
}

# Prints the port from the first line of FILE matching REGEX (one capture group) once it
# appears; fails if PID exits first or after TIMEOUT seconds.
wait_ready() { # FILE REGEX PID TIMEOUT
    local file=$1 re=$2 pid=$3 deadline=$((SECONDS + $4)) port
    while true; do
        port=$(sed -n -E "s/.*${re}.*/\1/p" "$file" 2>/dev/null | head -n 1 || true)
        if [[ -n $port ]]; then
            echo "$port"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || return 1
        ((SECONDS < deadline)) || return 2
        sleep 0.1
    done
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

tail_logs() { # FILE...
    local f
    for f in "$@"; do
        [[ -s $f ]] || continue
        echo "--- $(basename "$f") (last 40 lines) ---" >&2
        tail -n 40 "$f" >&2
    done
}

# Every server started with start_server / start_drive, for stop_servers.
server_pids=()

# Starts COMMAND in the background of the calling shell, with its output in $work/NAME.out
# and .err, and waits (60 s, or $server_start_timeout) for the first match of REGEX (one
# capture group) in its output. Never call it in a subshell or `$(...)`: its PID must reach
# server_pids, or nothing could stop the server. Sets server_pid and server_match.
start_server() { # NAME REGEX COMMAND...
    local name=$1 re=$2 rc=0
    shift 2
    : >"$work/$name.out"
    "$@" >"$work/$name.out" 2>"$work/$name.err" &
    server_pid=$!
    server_pids+=("$server_pid")
    server_match=$(wait_ready "$work/$name.out" "$re" "$server_pid" "${server_start_timeout:-60}") || rc=$?
    if ((rc != 0)); then
        tail_logs "$work/$name.out" "$work/$name.err"
        die "$name did not start (see above)"
    fi
}

# A Spindle drive from BIN with its data in $work/NAME/data, on free loopback ports, with
# DRIVE_FLAGS added (a `drive_prefix` array, if set, goes before BIN: `taskset -c 0`, say).
# Sets drive_pid, drive_port and drive_tls_port.
start_drive() { # NAME BIN [DRIVE_FLAGS...]
    local name=$1 bin=$2
    shift 2
    mkdir -p "$work/$name"
    start_server "$name" 'spindle drive listening on 127\.0\.0\.1:([0-9]+)' \
        ${drive_prefix[@]+"${drive_prefix[@]}"} "$bin" drive --data "$work/$name/data" --port 0 --tls-port 0 \
        --listen 127.0.0.1 "$@"
    drive_pid=$server_pid drive_port=$server_match
    drive_tls_port=$(sed -n -E 's/.* tls 127\.0\.0\.1:([0-9]+).*/\1/p' "$work/$name.out" | head -n 1)
}

# A one-member etcd on free loopback ports with its data in $work/NAME; sets etcd_url.
start_etcd() { # NAME [CERT KEY]: over https:// with that certificate when given
    local name=$1 client_port peer_port scheme=http tls=""
    client_port=$(free_port) peer_port=$(free_port)
    if (($# == 3)); then scheme=https tls="--cert-file '$2' --key-file '$3'"; fi
    etcd_url=$scheme://127.0.0.1:$client_port
    local peer=http://127.0.0.1:$peer_port
    start_server "$name" '(ready) to serve client requests' sh -c "exec etcd --name solo --data-dir '$work/$name' \
        --listen-client-urls $etcd_url --advertise-client-urls $etcd_url $tls \
        --listen-peer-urls $peer --initial-advertise-peer-urls $peer --initial-cluster solo=$peer 2>&1"
}

# Reads `spindle cluster status --json` on stdin: succeeds once the cluster has DRIVES drives,
# all up, every partition with its replicas, nothing moving and no change pending.
cluster_settled() { # DRIVES
    python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if len(s["drives"]) == int(sys.argv[1]) and all(d["state"] == "up" for d in s["drives"])
         and s["replicas_missing"] == 0 and s["move"] is None and s["pending_changes"] == 0 else 1)' "$1"
}

# Stops every server start_server / start_drive started (a paused one is resumed first);
# for the EXIT trap.
stop_servers() {
    local p
    for p in ${server_pids[@]+"${server_pids[@]}"}; do
        kill -CONT "$p" 2>/dev/null || true
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in ${server_pids[@]+"${server_pids[@]}"}; do stop_pid "$p" server 10; done
    server_pids=()
}

start_spindle() {
    local tls_args=(--tls-port 0) attempt
    for attempt in 1 2; do
        rm -rf "$work/spindle-data"
        mkdir -p "$work/spindle-data"
        "$spindle_bin" drive --data "$work/spindle-data" --port 0 "${tls_args[@]}" --listen 127.0.0.1 \
            >"$work/spindle.out" 2>"$work/spindle.err" &
        spindle_pid=$!
        local rc=0
        spindle_port=$(wait_ready "$work/spindle.out" 'spindle drive listening on 127\.0\.0\.1:([0-9]+)' \
            "$spindle_pid" 60) || rc=$?
        if ((rc == 0)); then
            spindle_flags="drive --data DIR --port 0 ${tls_args[*]} --listen 127.0.0.1"
            return 0
        fi
        if ((rc == 2)); then
            tail_logs "$work/spindle.out" "$work/spindle.err"
            die "spindle drive not ready after 60 s"
        fi
        wait "$spindle_pid" 2>/dev/null || true
        spindle_pid=
        if ((attempt == 1)); then
            log "spindle drive exited at start with --tls-port 0; retrying without it"
            tail_logs "$work/spindle.err"
            tls_args=()
        fi
    done
    tail_logs "$work/spindle.out" "$work/spindle.err"
    die "spindle drive did not start"
}

start_simulator() {
    local extra=()
    ((sim_verbose)) && extra=(--verbose)
    "$root/scripts/java-simulator.sh" 0 0 "$work/sim-home" "${extra[@]}" \
        >"$work/sim.out" 2>"$work/sim.err" &
    sim_pid=$! # java-simulator.sh execs java: this is the simulator's JVM
    local rc=0
    # The first start builds the launcher with Maven (downloads from Maven Central).
    sim_port=$(wait_ready "$work/sim.out" 'kinetic simulator listening on 127\.0\.0\.1:([0-9]+)' \
        "$sim_pid" 900) || rc=$?
    if ((rc != 0)); then
        tail_logs "$work/sim.out" "$work/sim.err"
        die "simulator did not start (see above)"
    fi
}

start_redis() {
    local attempt
    mkdir -p "$work/redis"
    for attempt in 1 2 3; do
        redis_port=$(free_port)
        redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
            --protected-mode yes --dir "$work/redis" >"$work/redis.log" 2>&1 &
        redis_pid=$!
        local i
        for ((i = 0; i < 100; i++)); do
            if [[ $(redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null) == PONG ]]; then
                return 0
            fi
            kill -0 "$redis_pid" 2>/dev/null || break
            sleep 0.1
        done
        stop_pid "$redis_pid" redis-server 5
        redis_pid=
    done
    tail_logs "$work/redis.log"
    die "redis-server did not start"
}

