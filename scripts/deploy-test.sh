#!/usr/bin/env bash
# A deployment of Spindle on several hosts, built for real on one machine: network namespaces
# as hosts (each with its veth pair to a bridge in a namespace of its own, and an address of
# its own), as docs/deploy.md describes and from the repository's files (deploy/config/*.toml,
# the settings files of the drive, the coordinator and the gateway):
#
#   host h1 10.88.0.1   etcd member, drives h1-sdb h1-sdc, coordinator
#   host h2 10.88.0.2   etcd member, drives h2-sdb h2-sdc, gateway g1 (HTTPS)
#   host h3 10.88.0.3   etcd member, drives h3-sdb h3-sdc, coordinator (the first leader), gateway g2
#   host op 10.88.0.9   the operator and the clients
#
# All of it TLS and authenticated: the cluster's credentials and CA (`new-credentials`), a
# certificate per host from that CA (`issue-cert`), etcd's members over TLS between themselves
# and to clients with the cluster's own user (`secure-etcd`), drives provisioned by `add-drive`
# (factory identity removed, PINs set), each host a failure domain. Checked, from the operator's
# host:
#   - a client without credentials is refused by the drives (the factory identity, over TCP and
#     TLS; the cluster's identity over plain TCP), by etcd (no user; plain HTTP), by the gateways
#     (unsigned, unknown key), and by the cluster commands;
#   - S3 users (`spindle s3 user add`, their secrets sealed by one users key on both gateways)
#     are kept apart at either gateway: user B cannot read, list or write user A's bucket, and
#     a user's key works at both gateways;
#   - S3 traffic through both gateways (retried on the next one as a load balancer does) keeps
#     being served, and every acknowledged object reads back whole, through the loss of one etcd
#     member (SIGKILL, then restarted) and then of host h3 (every process on it killed, its link
#     cut): leadership passes to h1's coordinator, h3's drives are marked down.
# Needs root (network namespaces) and installs what is missing (iproute2, etcd-server, curl; boto3
# in the venv of scripts/s3-clients.sh). Everything it starts is stopped, and the namespaces
# deleted, on exit, failure and interruption.
#
#   scripts/deploy-test.sh SPINDLE_BINARY
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log() { echo "deploy-test [${SECONDS}s]: $*" >&2; }
die() { log "$*"; exit 1; }
[[ $# -eq 1 && $1 != -* ]] || { sed -n '2,29p' "$0" >&2; exit 2; }
spindle_bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[[ -x $spindle_bin ]] || die "$1 is not an executable"
[[ $EUID -eq 0 ]] || die "needs root: hosts are network namespaces"

work=$(mktemp -d)
# shellcheck source=servers.sh
source "$root/scripts/servers.sh"
tag=spx$$
hosts=(h1 h2 h3 op)
declare -A addr=([h1]=10.88.0.1 [h2]=10.88.0.2 [h3]=10.88.0.3 [op]=10.88.0.9)
namespaces=()

cleanup() {
    local ns pids i
    # Everything running in a host namespace is this test's.
    for ns in "${namespaces[@]}"; do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [[ -z $pids ]] || kill -TERM $pids 2>/dev/null || true
    done
    for ((i = 0; i < 100; i++)); do
        pids=$(for ns in "${namespaces[@]}"; do ip netns pids "$ns" 2>/dev/null || true; done)
        [[ -n $pids ]] || break
        sleep 0.1
    done
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
    stop_servers
    for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

missing=()
command -v ip >/dev/null || missing+=(iproute2)
command -v etcd >/dev/null || missing+=(etcd-server)
command -v curl >/dev/null || missing+=(curl)
((${#missing[@]} == 0)) || apt_install "${missing[@]}" || die "could not install ${missing[*]}"
"$root/scripts/s3-clients.sh" "$spindle_bin" --install-only
python=$root/target/s3-venv/bin/python

# --- hosts ------------------------------------------------------------------------------------
in_host() { # HOST COMMAND...
    local h=$1
    shift
    ip netns exec "$tag-$h" "$@"
}
# Hosts a killed run left behind (named for its pid, which is gone): what still runs in them
# is stopped and they are removed, so that no stale server holds ports or disk.
for ns in $(ip netns list | awk '$1 ~ /^spx[0-9]+-/ {print $1}'); do
    owner=${ns#spx}
    owner=${owner%%-*}
    [[ $owner != "$$" ]] && kill -0 "$owner" 2>/dev/null && continue
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
done
ip netns add "$tag-lan"
namespaces+=("$tag-lan")
ip -n "$tag-lan" link add br0 type bridge
ip -n "$tag-lan" link set br0 up
for h in "${hosts[@]}"; do
    ip netns add "$tag-$h"
    namespaces+=("$tag-$h")
    ip link add eth0 netns "$tag-$h" type veth peer name "p-$h" netns "$tag-lan"
    ip -n "$tag-lan" link set "p-$h" master br0 up
    ip -n "$tag-$h" addr add "${addr[$h]}/24" dev eth0
    ip -n "$tag-$h" link set eth0 up
    ip -n "$tag-$h" link set lo up
done
log "hosts up: ${hosts[*]} on 10.88.0.0/24"

# Every process of a host, so the host can be lost at once.
spawn() { # HOST NAME COMMAND...
    local h=$1 name=$2
    shift 2
    # The logs exist before the process does: `await` reads them at once, and on a busy
    # machine the background shell may not have opened them yet.
    : >"$work/$name.out"
    : >"$work/$name.err"
    ip netns exec "$tag-$h" "$@" >"$work/$name.out" 2>"$work/$name.err" &
    server_pids+=("$!")
}
await() { # NAME REGEX SECONDS: the first match of REGEX (one group) in NAME's output
    local name=$1 re=$2 deadline=$((SECONDS + $3)) got
    while ((SECONDS < deadline)); do
        got=$(sed -n -E "s/.*${re}.*/\1/p" "$work/$name.out" "$work/$name.err" 2>/dev/null | head -n 1)
        [[ -z $got ]] || { echo "$got"; return 0; }
        sleep 0.2
    done
    tail_logs "$work/$name.out" "$work/$name.err"
    die "$name: no /$re/ within $3 s"
}
until_ok() { # WHAT SECONDS COMMAND...: runs COMMAND until it succeeds
    local what=$1 deadline=$((SECONDS + $2))
    shift 2
    until "$@" >"$work/until.out" 2>&1; do
        ((SECONDS < deadline)) || { cat "$work/until.out" >&2; die "$what: not within the bound"; }
        sleep 0.5
    done
}

# --- credentials and certificates (the operator's host) ----------------------------------------
creds=$work/cluster
etcd_urls="https://${addr[h1]}:2379,https://${addr[h2]}:2379,https://${addr[h3]}:2379"
# (A command that does not answer within a minute is a defect: etcd calls time out in seconds.)
operator() { in_host op timeout 60 env SPINDLE_ETCD="$etcd_urls" SPINDLE_CLUSTER=prod SPINDLE_CREDENTIALS="$creds" "$spindle_bin" "$@"; }
stranger() { in_host op timeout 60 env -u SPINDLE_CREDENTIALS "$spindle_bin" "$@"; }
operator cluster new-credentials >/dev/null
for h in h1 h2 h3; do
    operator cluster issue-cert --name "${addr[$h]}" --out "$work/tls/$h" >/dev/null
done

# --- etcd: three members, TLS between them and to clients --------------------------------------
members=$(for h in h1 h2 h3; do printf '%s=https://%s:2380,' "e-$h" "${addr[$h]}"; done)
start_etcd_member() { # HOST
    local h=$1 t=$work/tls/$1
    spawn "$h" "etcd-$h" etcd --name "e-$h" --data-dir "$work/$h/etcd" \
        --listen-client-urls "https://${addr[$h]}:2379" --advertise-client-urls "https://${addr[$h]}:2379" \
        --listen-peer-urls "https://${addr[$h]}:2380" --initial-advertise-peer-urls "https://${addr[$h]}:2380" \
        --initial-cluster "${members%,}" --initial-cluster-token "$tag" --initial-cluster-state new \
        --cert-file "$t/cert.pem" --key-file "$t/key.pem" \
        --peer-cert-file "$t/cert.pem" --peer-key-file "$t/key.pem" --peer-trusted-ca-file "$creds/ca.pem" \
        --peer-client-cert-auth
    eval "etcd_pid_$h=\$!"
}
for h in h1 h2 h3; do start_etcd_member "$h"; done
until_ok "etcd's three members answer" 120 operator cluster secure-etcd
operator cluster init --partitions 32 --replicas 3 --write-quorum 2 >/dev/null
log "etcd: three members over TLS, the cluster's own user enforced"

# --- coordinators, drives and gateways from deploy/config ------------------------------------
config() { # EXAMPLE OUT SED_EXPRESSIONS...: the repository's example, made this host's
    local example=$root/deploy/config/$1 out=$2
    shift 2
    sed -E "$@" -e "s|/etc/spindle/cluster|$creds|" "$example" >"$out"
    local unplaced
    unplaced=$(grep -v '^#' "$out" | grep '/etc/spindle\|10\.0\.' || true)
    [[ -z $unplaced ]] || die "$out: the example has settings this test does not place: $unplaced"
}
etcd_to_hosts=(-e "s|10\.0\.1\.1:|${addr[h1]}:|g" -e "s|10\.0\.1\.2:|${addr[h2]}:|g" -e "s|10\.0\.1\.3:|${addr[h3]}:|g")
start_coordinator() { # HOST
    local h=$1
    config coordinator.toml "$work/coordinator-$h.toml" "${etcd_to_hosts[@]}" -e "s|^metrics = .*|metrics = \"${addr[$h]}:9200\"|"
    spawn "$h" "coordinator-$h" "$spindle_bin" cluster coordinator --config "$work/coordinator-$h.toml" --name "c-$h" --down-after-ms 2000
    await "coordinator-$h" '(coordinator) c-' 60 >/dev/null
}
status_json() { operator cluster status --json; }
leader_is() { [[ $(status_json | "$python" -c 'import json,sys; print(json.load(sys.stdin)["leader"])') == "$1" ]]; }
start_coordinator h3
until_ok "c-h3 leads" 60 leader_is c-h3
start_coordinator h1

lock_pin=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
erase_pin=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
for h in h1 h2 h3; do
    port=8123 tls=8443 metrics=9123
    for disk in sdb sdc; do
        mkdir -p "$work/$h/$disk"
        config drive.toml "$work/drive-$h-$disk.toml" -e "s|10\.0\.1\.11|${addr[$h]}|" -e "s|/srv/spindle/sdb|$work/$h/$disk|" \
            -e "s|/etc/spindle/tls/sdb|$work/tls/$h|" -e "s|^port = .*|port = $port|" -e "s|^tls_port = .*|tls_port = $tls|" \
            -e "s|^metrics_port = .*|metrics_port = $metrics|"
        spawn "$h" "drive-$h-$disk" "$spindle_bin" drive --config "$work/drive-$h-$disk.toml"
        await "drive-$h-$disk" 'spindle drive (listening) on' 60 >/dev/null
        operator cluster add-drive "$h-$disk" "${addr[$h]}:$tls" --domain "$h" --lock-pin "$lock_pin" --erase-pin "$erase_pin" \
            >"$work/add-$h-$disk.out"
        grep -q "factory identity removed" "$work/add-$h-$disk.out" || die "add-drive $h-$disk: $(cat "$work/add-$h-$disk.out")"
        port=$((port + 1)) tls=$((tls + 1)) metrics=$((metrics + 1))
    done
done
settled() { status_json | cluster_settled "$1"; }
until_ok "six drives in place, every partition with its three replicas" 300 settled 6
log "six drives on three hosts, provisioned over TLS"

shared=SPINDLEDEPLOYSHARED1:shared-secret-0123456789abcdef0123
printf '%s\n' "${shared/:/ }" >"$work/s3-keys"
chmod 600 "$work/s3-keys"
in_host op "$spindle_bin" s3 users-key "$work/s3-users.key"
s3_user() { # NAME: AK:SK of a new S3 user
    in_host op timeout 60 env SPINDLE_CREDENTIALS="$creds" "$spindle_bin" s3 user add "$1" --cluster "etcds://${addr[h1]}:2379,${addr[h2]}:2379" \
        --cluster-name prod --users-key "$work/s3-users.key" --json | "$python" -c 'import json,sys; k=json.load(sys.stdin); print(k["access_key"] + ":" + k["secret_key"])'
}
user_a=$(s3_user user-a)
user_b=$(s3_user user-b)
start_gateway() { # HOST NAME
    local h=$1 g=$2
    config s3.toml "$work/s3-$g.toml" "${etcd_to_hosts[@]}" -e "s|^listen = .*|listen = \"${addr[$h]}:9000\"|" \
        -e "s|/etc/spindle/tls/s3|$work/tls/$h|" -e "s|/etc/spindle/s3-keys|$work/s3-keys|" -e "s|/etc/spindle/s3-users.key|$work/s3-users.key|"
    spawn "$h" "gateway-$g" "$spindle_bin" s3 --config "$work/s3-$g.toml"
    await "gateway-$g" 'S3 gateway (listening)' 60 >/dev/null
}
start_gateway h2 g1
start_gateway h3 g2
g1=https://${addr[h2]}:9000 g2=https://${addr[h3]}:9000
traffic() { # KEY GATEWAYS ARGS...
    local key=$1 gateways=$2
    shift 2
    in_host op "$python" "$root/tests/deploy/traffic.py" --gateways "$gateways" --ca "$creds/ca.pem" --key "$key" "$@"
}
log "two gateways over HTTPS"

# --- strangers are refused --------------------------------------------------------------------
refused() { # WHAT COMMAND...: COMMAND must fail
    local what=$1
    shift
    if "$@" >"$work/refused.out" 2>&1; then
        cat "$work/refused.out" >&2
        die "$what was served"
    fi
    log "refused: $what"
}
hmac=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["hmac_key"])' "$creds/identity.json")
identity=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["identity"])' "$creds/identity.json")
refused "the factory identity over TCP" stranger get anything --drive "${addr[h1]}:8123"
refused "the factory identity over TLS" stranger get anything --drive "${addr[h1]}:8443" --tls-trust "$creds/ca.pem"
refused "the cluster's identity over plain TCP" stranger get anything --drive "${addr[h2]}:8123" --identity "$identity" --hmac-key "$hmac"
refused "etcd without a user" in_host op curl -sf --cacert "$creds/ca.pem" -X POST "https://${addr[h1]}:2379/v3/kv/range" -d '{"key":"AA==","range_end":"AA=="}'
refused "etcd over plain HTTP" in_host op curl -sf -m 10 -X POST "http://${addr[h1]}:2379/v3/kv/range" -d '{"key":"AA=="}'
refused "a cluster command without credentials" stranger cluster status --etcd "$etcd_urls" --cluster prod
traffic "$shared" "$g1,$g2" mb public >/dev/null
traffic "$user_a" "$g1" mb bucket-a >/dev/null
traffic "$user_a" "$g1" put bucket-a secret 1 "$work/a.manifest" >/dev/null
traffic "$user_a" "$g1" verify bucket-a "$work/a.manifest" >/dev/null
# (These exit nonzero, saying what was served, unless every gateway answers 403.)
traffic "$shared" "$g1,$g2" anonymous bucket-a secret/00000 >/dev/null || die "an unsigned GET at either gateway was served"
log "refused: an unsigned GET at either gateway"
traffic "$user_a" "$g2" verify bucket-a "$work/a.manifest" >/dev/null
log "user A's objects read back at both gateways"
traffic "$user_b" "$g1,$g2" denied bucket-a secret/00000 >/dev/null || die "user B was served user A's object"
log "refused: user B reading user A's bucket, at either gateway"

# --- losses -----------------------------------------------------------------------------------
manifest=$work/acknowledged.manifest
traffic "$shared" "$g1,$g2" put public before 40 "$manifest"

acknowledged() { [[ $(wc -l <"$manifest") -ge $1 ]]; }

log "losing etcd member e-h1 (SIGKILL) under traffic"
traffic "$shared" "$g2,$g1" put public etcd-loss 60 "$manifest" &
load=$!
server_pids+=("$load")
until_ok "traffic under way" 120 acknowledged 50
kill -KILL "$etcd_pid_h1"
wait "$load" || die "traffic failed through the loss of an etcd member"
operator cluster status >/dev/null || die "the cluster's status is not served by two etcd members"
traffic "$shared" "$g1,$g2" verify public "$manifest"
start_etcd_member h1
until_ok "e-h1 back" 120 in_host op curl -sf --cacert "$creds/ca.pem" "https://${addr[h1]}:2379/version"

log "losing host h3 (every process killed, its link cut) under traffic"
traffic "$shared" "$g2,$g1" put public host-loss 80 "$manifest" &
load=$!
server_pids+=("$load")
until_ok "traffic under way" 120 acknowledged 120
ip -n "$tag-lan" link set "p-h3" down
pids=$(ip netns pids "$tag-h3")
kill -KILL $pids
wait "$load" || die "traffic failed through the loss of host h3"
traffic "$shared" "$g1" put public after 20 "$manifest"
traffic "$shared" "$g1,$g2" verify public "$manifest"
traffic "$user_a" "$g1" verify bucket-a "$work/a.manifest" >/dev/null
until_ok "c-h1 leads once c-h3 is lost" 120 leader_is c-h1
h3_down() {
    status_json | "$python" -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if sorted(d["id"] for d in s["drives"] if d["state"] != "up") == ["h3-sdb", "h3-sdc"] else 1)'
}
until_ok "h3's drives marked down" 120 h3_down
operator cluster put after-h3 "still served" >/dev/null
[[ $(operator cluster get after-h3) == "still served" ]] || die "a cluster write after the loss of h3 did not read back"
log "passed: strangers refused everywhere; $(wc -l <"$manifest") acknowledged objects intact through the loss of an etcd member and of a host"
