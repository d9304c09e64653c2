#!/usr/bin/env bash
# Spindle's S3 gateway driven by real S3 clients. Installs what is missing (Debian's etcd-server
# and rclone; awscli, boto3, s3cmd and pytest pinned in tests/s3/requirements.txt, in a venv
# under target/s3-venv made from Debian's python3 once and reused), starts a cluster on loopback
# (etcd, three drives, a coordinator) and a gateway over it, plus a lone drive for the crash
# test's own gateways, and runs, each as one check with its output in a log shown on failure:
#   awscli  mb, cp up and down (one file small, one multipart), ls, sync both ways, rm, rb, and
#           s3api head-object (user metadata), copy-object, delete-objects, get-object --range;
#           versioning (versions, delete markers, list-object-versions, emptying by version)
#           and access (two users kept apart, an object made public);
#   s3cmd   mb, put (one multipart), get, ls, la, info, del, rb; setversioning; two users,
#           setacl --acl-public, settagging/gettagging;
#   rclone  copy, ls, lsf, check (MD5 against ETags), sync, delete, purge, one multipart file;
#           backend versioning, --s3-versions, cleanup-hidden; two users' remotes;
#   boto3   tests/s3/test_behaviour.py: the gateway's suite of S3 behaviours, and
#           test_streaming.py: aws-chunked uploads (signed chunks, trailers), and
#           test_post_object.py: browser form uploads with policy documents, and
#           test_cors.py: CORS configurations, preflights and cross-origin answers, and
#           test_tagging.py: object and bucket tagging, GetObjectAttributes;
#   crash   tests/s3/test_crash.py: a gateway SIGKILLed mid-upload, restarted, swept;
#   races   tests/s3/test_races.py: racing PUT/DELETE/copy/complete of one key, swept meanwhile;
#   hostile tests/s3/test_hostile.py: trickling, flooding, oversize and stalled clients against
#           gateways with small limits, and HTTPS with a certificate renewed in place;
#   store-ops tests/s3/test_store_ops.py: the store operations a PUT makes, counted by a drive;
#   access  tests/s3/test_access.py: users kept apart, ACLs, policies, public access block,
#           object ownership, key rotation and removal;
#   erasure tests/s3/test_erasure.py: a storage class in a 4+2 pool of drives of its own, drives
#           SIGKILLed under reads and uploads;
#   remote  tests/s3/test_remote.py: a storage class kept in a remote pool, a MinIO bucket of
#           the test's own: objects, lifecycle moves, the remote store down and damaged;
#   versioning tests/s3/test_versioning.py: versions, delete markers, ListObjectVersions and the
#           sweeper under versioning, over the cluster and over one drive.
# S3_CLIENTS="NAME ..." runs only the clients named.
# Prints "NAME: ok" or "NAME: FAILED" per client, then "s3 clients: N passed, N failed", and
# exits nonzero on any failure. Everything it starts is stopped on exit, failure and interrupt.
#
#   scripts/s3-clients.sh SPINDLE_BINARY [--install-only]
#
# --install-only: install the clients and the venv, start nothing (scripts/s3-memory.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log() { echo "s3-clients: $*" >&2; }
die() { log "$*"; exit 1; }
install_only=0
[[ $# -eq 2 && $2 == --install-only ]] && install_only=1 && set -- "$1"
[[ $# -eq 1 && $1 != -* ]] || { sed -n '2,37p' "$0" >&2; exit 2; }
spindle_bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[[ -x $spindle_bin ]] || die "$1 is not an executable"

work=$(mktemp -d)
# shellcheck source=servers.sh
source "$root/scripts/servers.sh"
trap 'stop_servers; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# --- what the clients need -------------------------------------------------------------------
missing=()
command -v etcd >/dev/null || missing+=(etcd-server)
command -v rclone >/dev/null || missing+=(rclone)
# Debian's own python3 with venv, whatever pyenv or another python first on PATH has.
python=/usr/bin/python3
[[ -x $python ]] || missing+=(python3)
{ [[ -x $python ]] && "$python" -c 'import ensurepip, venv' 2>/dev/null; } || missing+=(python3-venv)
((${#missing[@]} == 0)) || apt_install "${missing[@]}" || die "could not install ${missing[*]}"

venv=$root/target/s3-venv
requirements=$root/tests/s3/requirements.txt
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [[ $(cat "$venv/.requirements.sha256" 2>/dev/null) != "$want" ]]; then
    log "creating $venv from $requirements"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check -r "$requirements" >&2 ||
        die "pip could not install $requirements"
    echo "$want" >"$venv/.requirements.sha256"
fi
export PATH="$venv/bin:$PATH"
((install_only == 0)) || exit 0

# --- a cluster and a gateway over it ---------------------------------------------------------
access_key=SPINDLES3TESTKEY0001
secret_key=spindle-s3-test-secret-0123456789abcdef
region=us-east-1

start_etcd etcd
"$spindle_bin" cluster init --etcd "$etcd_url" --partitions 64 --replicas 3 --write-quorum 2 >/dev/null
start_server coordinator 'coordinator .* (for) cluster' sh -c "exec '$spindle_bin' cluster coordinator --etcd $etcd_url 2>&1"
for i in 1 2 3; do
    start_drive "d$i" "$spindle_bin"
    "$spindle_bin" cluster add-drive "d$i" "127.0.0.1:$drive_port" --etcd "$etcd_url" >/dev/null
done
# Ready once every partition has its three replicas on drives that are up and nothing moves.
settled() { "$spindle_bin" cluster status --etcd "$etcd_url" --json 2>/dev/null | cluster_settled 3; }
deadline=$((SECONDS + 90))
until settled; do
    ((SECONDS < deadline)) || { "$spindle_bin" cluster status --etcd "$etcd_url" >&2 || true; die "the cluster did not settle in 90 s"; }
    sleep 0.5
done

gateway_port=$(free_port)
# Users sign in with keys sealed by this (`spindle s3 users-key`); each client's checks make
# two users of their own (`new_user`).
"$spindle_bin" s3 users-key "$work/users.key" >/dev/null
start_server gateway 'listening on 127\.0\.0\.1:([0-9]+)' sh -c "exec '$spindle_bin' s3 --cluster etcd://${etcd_url#http://} \
    --listen 127.0.0.1:$gateway_port --access-key $access_key --secret-key $secret_key --users-key $work/users.key 2>&1"
endpoint=http://127.0.0.1:$gateway_port
log "gateway at $endpoint over the cluster of etcd $etcd_url"

# The crash test's drive: its gateways are the test's own, and it lists the drive's whole key
# space in one GETKEYRANGE.
cat >"$work/crash-drive.toml" <<'EOF'
[limits]
max_key_range_count = 20000
EOF
start_drive crash-drive "$spindle_bin" --config "$work/crash-drive.toml"
crash_drive=127.0.0.1:$drive_port

# --- the clients -----------------------------------------------------------------------------
# The endpoint is plain HTTP: a CA bundle from the environment would only make rclone fail.
unset AWS_CA_BUNDLE
export AWS_ACCESS_KEY_ID=$access_key AWS_SECRET_ACCESS_KEY=$secret_key AWS_DEFAULT_REGION=$region
export AWS_CONFIG_FILE=$work/aws-config AWS_SHARED_CREDENTIALS_FILE=$work/aws-credentials-unused
cat >"$AWS_CONFIG_FILE" <<EOF
[default]
region = $region
s3 =
    addressing_style = path
    signature_version = s3v4
    multipart_threshold = 8MB
    multipart_chunksize = 5MB
EOF

# NAME: a new S3 user; prints its access key and secret on one line.
new_user() {
    "$spindle_bin" s3 user add "$1-$RANDOM$RANDOM" --cluster "etcd://${etcd_url#http://}" --users-key "$work/users.key" --json |
        "$python" -c 'import json, sys; k = json.load(sys.stdin); print(k["access_key"], k["secret_key"])'
}

# FILE SIZE SEED: SIZE bytes (k, M suffixes as in 5M) of seeded pseudo-random data.
make_file() {
    "$python" - "$@" <<'PY'
import random, sys
path, size, seed = sys.argv[1], sys.argv[2], sys.argv[3]
units = {"k": 1024, "M": 1024 * 1024}
n = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
rng = random.Random(seed)
with open(path, "wb") as f:
    while n > 0:
        step = min(n, 1 << 20)
        f.write(rng.randbytes(step))
        n -= step
PY
}

# A directory tree with nested directories and awkward names, for the sync and copy checks.
make_tree() { # DIR SEED
    local dir=$1 seed=$2
    mkdir -p "$dir/sub/deeper" "$dir/with space" "$dir/ünïcödé"
    make_file "$dir/top.bin" 70k "$seed-1"
    make_file "$dir/sub/a.txt" 3k "$seed-2"
    make_file "$dir/sub/deeper/b.dat" 300k "$seed-3"
    make_file "$dir/with space/c d.bin" 10k "$seed-4"
    make_file "$dir/ünïcödé/файл.bin" 1k "$seed-5"
    make_file "$dir/sub/empty" 0 "$seed-6"
    make_file "$dir/a+b=c&d.bin" 2k "$seed-7"
}

# Fails, showing both, unless GOT is EXPECTED.
expect_equal() { # WHAT EXPECTED GOT
    if [[ $3 != "$2" ]]; then
        echo "$1: unexpected result" >&2
        echo "--- expected"$'\n'"$2"$'\n'"--- got"$'\n'"$3" >&2
        return 1
    fi
}

# Fails unless COMMAND fails.
expect_failure() { # COMMAND...
    if "$@"; then
        echo "expected to fail: $*" >&2
        return 1
    fi
}

# COMMAND...: must fail for being refused access (403 AccessDenied), not for another reason.
refused() {
    local out
    # (Without the trace: it names ports and buckets, which could match below.)
    if out=$(set +x; "$@" 2>&1); then
        echo "expected to be refused: $*" >&2
        return 1
    fi
    grep -Eq 'AccessDenied|Access Denied|\(403\)|403 \(Forbidden\)|status code: 403|403 Forbidden' <<<"$out" || { echo "failed, but not refused: $*: $out" >&2; return 1; }
}

md5_of() { md5sum <"$1" | cut -d' ' -f1; }

# Every file under DIR, relative to it, in byte order (the order S3 lists keys in).
files_under() { (cd "$1" && find . -type f | sed 's|^\./||' | LC_ALL=C sort); }

awscli_checks() {
    local b=awscli-$RANDOM$RANDOM d=$work/awscli got
    aws() {
        if [[ $1 == s3 && $2 =~ ^(cp|sync|rm)$ ]]; then
            command aws --endpoint-url "$endpoint" "$1" "$2" --only-show-errors "${@:3}"
        else
            command aws --endpoint-url "$endpoint" "$@"
        fi
    }
    mkdir -p "$d"
    make_file "$d/small.bin" 100k small
    make_file "$d/big.bin" 20M big

    aws s3 mb "s3://$b"
    aws s3 cp "$d/small.bin" "s3://$b/files/small.bin"
    aws s3 cp "$d/big.bin" "s3://$b/files/big.bin"
    aws s3 cp "s3://$b/files/small.bin" "$d/small.down"
    aws s3 cp "s3://$b/files/big.bin" "$d/big.down"
    cmp "$d/small.bin" "$d/small.down"
    cmp "$d/big.bin" "$d/big.down"
    # The small file went up in one PUT (its ETag is its MD5), the big one in four 5 MiB parts.
    got=$(aws s3api head-object --bucket "$b" --key files/small.bin --query ETag --output text)
    expect_equal "small file's ETag" "\"$(md5_of "$d/small.bin")\"" "$got"
    got=$(aws s3api head-object --bucket "$b" --key files/big.bin --query '[ContentLength, ETag]' --output text)
    [[ $got =~ ^20971520[[:space:]]+\"[0-9a-f]{32}-4\"$ ]] || { echo "big file's length and ETag: $got" >&2; return 1; }

    # Sync a tree up and back; then change it (a file rewritten, one removed, one added) and
    # sync again with --delete.
    make_tree "$d/tree" tree
    aws s3 sync "$d/tree" "s3://$b/tree"
    aws s3 sync "s3://$b/tree" "$d/back"
    diff -r "$d/tree" "$d/back"
    make_file "$d/tree/sub/a.txt" 5k changed
    rm "$d/tree/top.bin"
    make_file "$d/tree/new.bin" 40k new
    aws s3 sync --delete "$d/tree" "s3://$b/tree"
    aws s3 sync "s3://$b/tree" "$d/back2"
    diff -r "$d/tree" "$d/back2"

    # ls: with a prefix, recursively, and the buckets.
    got=$(aws s3 ls "s3://$b/tree/sub/" | awk '$1 == "PRE" {print "PRE", $2; next} {print $3, $4}')
    expect_equal "aws s3 ls of a prefix" "$(printf 'PRE deeper/\n5120 a.txt\n0 empty')" "$got"
    got=$(aws s3 ls --recursive "s3://$b/" | cut -c32-)
    expect_equal "aws s3 ls --recursive" "$(printf 'files/big.bin\nfiles/small.bin\n'; files_under "$d/tree" | sed 's|^|tree/|')" "$got"
    got=$(aws s3 ls)
    grep -q " $b\$" <<<"$got" || { echo "bucket $b not listed by aws s3 ls: $got" >&2; return 1; }

    # s3api: user metadata, copies, a range, a batch delete with an absent key.
    aws s3api put-object --bucket "$b" --key meta.bin --body "$d/small.bin" --metadata colour=blue,shape=round \
        --content-type application/x-test >/dev/null
    got=$(aws s3api head-object --bucket "$b" --key meta.bin --query '[Metadata.colour, Metadata.shape, ContentType]' --output text)
    expect_equal "head-object metadata" "$(printf 'blue\tround\tapplication/x-test')" "$got"
    aws s3api copy-object --bucket "$b" --key copied.bin --copy-source "$b/files/big.bin" >/dev/null
    aws s3api get-object --bucket "$b" --key copied.bin "$d/copied.down" >/dev/null
    cmp "$d/big.bin" "$d/copied.down"
    aws s3api copy-object --bucket "$b" --key meta-copy.bin --copy-source "$b/meta.bin" >/dev/null
    got=$(aws s3api head-object --bucket "$b" --key meta-copy.bin --query '[Metadata.colour, ContentType]' --output text)
    expect_equal "copied metadata" "$(printf 'blue\tapplication/x-test')" "$got"
    aws s3api get-object --bucket "$b" --key files/big.bin --range bytes=5242870-5242889 "$d/range.down" >/dev/null
    cmp "$d/range.down" <(tail -c +5242871 "$d/big.bin" | head -c 20)
    aws s3api get-object --bucket "$b" --key files/small.bin --range bytes=-100 "$d/tail.down" >/dev/null
    cmp "$d/tail.down" <(tail -c 100 "$d/small.bin")
    got=$(aws s3api delete-objects --bucket "$b" --delete '{"Objects":[{"Key":"copied.bin"},{"Key":"meta-copy.bin"},{"Key":"absent.bin"}]}' \
        --query 'sort(Deleted[].Key)' --output text)
    expect_equal "delete-objects" "$(printf 'absent.bin\tcopied.bin\tmeta-copy.bin')" "$got"
    expect_failure aws s3api head-object --bucket "$b" --key copied.bin

    # rm, rm --recursive, rb (refused while the bucket holds objects).
    expect_failure aws s3 rb "s3://$b"
    aws s3 rm "s3://$b/meta.bin"
    aws s3 rm --recursive "s3://$b/tree"
    got=$(aws s3 ls "s3://$b/" | awk '{print $1, $2}')
    expect_equal "aws s3 ls after rm" "PRE files/" "$got"
    aws s3 rm --recursive "s3://$b/"
    got=$(aws s3 ls --recursive "s3://$b/")
    expect_equal "aws s3 ls of an emptied bucket" "" "$got"
    aws s3 rb "s3://$b"
    expect_failure aws s3 ls "s3://$b/"

    # Versioning: versions through an overwrite (multipart) and a delete, one read back by its
    # id, listed, and the bucket emptied through its versions.
    local bv=$b-versions v1
    aws s3 mb "s3://$bv"
    aws s3api put-bucket-versioning --bucket "$bv" --versioning-configuration Status=Enabled
    got=$(aws s3api get-bucket-versioning --bucket "$bv" --query Status --output text)
    expect_equal "get-bucket-versioning" Enabled "$got"
    v1=$(aws s3api put-object --bucket "$bv" --key doc.bin --body "$d/small.bin" --query VersionId --output text)
    aws s3 cp "$d/big.bin" "s3://$bv/doc.bin"
    aws s3 rm "s3://$bv/doc.bin"
    expect_failure aws s3api head-object --bucket "$bv" --key doc.bin
    aws s3api get-object --bucket "$bv" --key doc.bin --version-id "$v1" "$d/v1.down" >/dev/null
    cmp "$d/small.bin" "$d/v1.down"
    got=$(aws s3api list-object-versions --bucket "$bv" --query '[length(Versions), length(DeleteMarkers), Versions[1].VersionId]' --output text)
    expect_equal "list-object-versions" "$(printf '2\t1\t%s' "$v1")" "$got"
    expect_failure aws s3 rb "s3://$bv"
    aws s3api list-object-versions --bucket "$bv" --output json \
        --query '{Objects: [Versions, DeleteMarkers][][].{Key: Key, VersionId: VersionId}, Quiet: `true`}' >"$d/versions.json"
    aws s3api delete-objects --bucket "$bv" --delete "file://$d/versions.json" >/dev/null
    aws s3 rb "s3://$bv"

    # Access: a user's bucket is refused to another user and to anonymous requests, until its
    # owner makes an object public.
    local ann bob
    read -r -a ann < <(new_user awscli-ann)
    read -r -a bob < <(new_user awscli-bob)
    AWS_ACCESS_KEY_ID=${ann[0]} AWS_SECRET_ACCESS_KEY=${ann[1]} aws s3 mb "s3://$b-ann"
    AWS_ACCESS_KEY_ID=${ann[0]} AWS_SECRET_ACCESS_KEY=${ann[1]} aws s3 cp "$d/small.bin" "s3://$b-ann/mine.bin"
    AWS_ACCESS_KEY_ID=${bob[0]} AWS_SECRET_ACCESS_KEY=${bob[1]} aws s3 ls >/dev/null
    AWS_ACCESS_KEY_ID=${bob[0]} AWS_SECRET_ACCESS_KEY=${bob[1]} refused aws s3 ls "s3://$b-ann/"
    AWS_ACCESS_KEY_ID=${bob[0]} AWS_SECRET_ACCESS_KEY=${bob[1]} refused aws s3api get-object --bucket "$b-ann" --key mine.bin "$d/stolen"
    refused aws --no-sign-request s3api get-object --bucket "$b-ann" --key mine.bin "$d/anonymous"
    got=$(AWS_ACCESS_KEY_ID=${bob[0]} AWS_SECRET_ACCESS_KEY=${bob[1]} aws s3 ls)
    ! grep -q " $b-ann\$" <<<"$got" || { echo "bob lists ann's bucket: $got" >&2; return 1; }
    AWS_ACCESS_KEY_ID=${ann[0]} AWS_SECRET_ACCESS_KEY=${ann[1]} aws s3api put-object-acl --bucket "$b-ann" --key mine.bin --acl public-read
    command aws --endpoint-url "$endpoint" --no-sign-request s3 cp --only-show-errors "s3://$b-ann/mine.bin" "$d/public.down"
    cmp "$d/small.bin" "$d/public.down"
    AWS_ACCESS_KEY_ID=${ann[0]} AWS_SECRET_ACCESS_KEY=${ann[1]} aws s3 rb --force "s3://$b-ann"
}

s3cmd_checks() {
    local b=s3cmd-$RANDOM$RANDOM d=$work/s3cmd got
    mkdir -p "$d"
    printf '%s\n' "[default]" "access_key = $access_key" "secret_key = $secret_key" \
        "host_base = 127.0.0.1:$gateway_port" "host_bucket = 127.0.0.1:$gateway_port" \
        "bucket_location = $region" "use_https = False" "signature_v2 = False" "max_retries = 0" >"$d/s3cfg"
    s3cmd() { command s3cmd -c "$d/s3cfg" --no-progress "$@"; }
    make_file "$d/small.bin" 50k s3cmd-small
    make_file "$d/big.bin" 12M s3cmd-big

    s3cmd mb "s3://$b"
    s3cmd put "$d/small.bin" "s3://$b/dir/small.bin"
    s3cmd put --multipart-chunk-size-mb=5 "$d/big.bin" "s3://$b/dir/big.bin"
    s3cmd get "s3://$b/dir/small.bin" "$d/small.down"
    s3cmd get "s3://$b/dir/big.bin" "$d/big.down"
    cmp "$d/small.bin" "$d/small.down"
    cmp "$d/big.bin" "$d/big.down"
    # ls: the bucket's top level, then recursively; la: every object of every bucket.
    got=$(s3cmd ls "s3://$b" | awk '{print $1, $2}')
    expect_equal "s3cmd ls" "DIR s3://$b/dir/" "$got"
    got=$(s3cmd ls --recursive "s3://$b" | awk '{print $3, $4}')
    expect_equal "s3cmd ls --recursive" "$(printf '12582912 s3://%s/dir/big.bin\n51200 s3://%s/dir/small.bin' "$b" "$b")" "$got"
    got=$(s3cmd la --recursive)
    grep -q " s3://$b/dir/big.bin\$" <<<"$got" || { echo "s3cmd la misses the big file: $got" >&2; return 1; }
    # info: size and MD5 (the single-part ETag is the MD5; for the multipart object s3cmd shows
    # the MD5 it stored in the object's metadata at upload). That object went up in three parts.
    s3cmd info "s3://$b/dir/small.bin" >"$d/info"
    s3cmd info "s3://$b/dir/big.bin" >"$d/info-big"
    grep -Eq "MD5 sum: +$(md5_of "$d/small.bin")\$" "$d/info" || { cat "$d/info" >&2; return 1; }
    grep -Eq "File size: +51200\$" "$d/info" || { cat "$d/info" >&2; return 1; }
    grep -Eq "MD5 sum: +$(md5_of "$d/big.bin")\$" "$d/info-big" || { cat "$d/info-big" >&2; return 1; }
    got=$(command aws --endpoint-url "$endpoint" s3api head-object --bucket "$b" --key dir/big.bin --query ETag --output text)
    [[ $got =~ ^\"[0-9a-f]{32}-3\"$ ]] || { echo "multipart ETag of the big file: $got" >&2; return 1; }
    # del; rb refused while objects remain.
    s3cmd del "s3://$b/dir/small.bin"
    expect_failure s3cmd get "s3://$b/dir/small.bin" "$d/gone.down"
    expect_failure s3cmd rb "s3://$b"
    s3cmd del "s3://$b/dir/big.bin"
    got=$(s3cmd ls --recursive "s3://$b")
    expect_equal "s3cmd ls of an emptied bucket" "" "$got"
    s3cmd rb "s3://$b"
    expect_failure s3cmd ls "s3://$b"

    # Versioning: an overwritten object's earlier version stays (read by awscli by its id:
    # s3cmd does not read versions); suspended again with `disable`.
    local bv=$b-versions
    s3cmd mb "s3://$bv"
    s3cmd setversioning "s3://$bv" enable
    got=$(command aws --endpoint-url "$endpoint" s3api get-bucket-versioning --bucket "$bv" --query Status --output text)
    expect_equal "s3cmd setversioning enable" Enabled "$got"
    s3cmd put "$d/small.bin" "s3://$bv/doc.bin"
    s3cmd put "$d/big.bin" "s3://$bv/doc.bin"
    s3cmd del "s3://$bv/doc.bin"
    got=$(s3cmd ls --recursive "s3://$bv")
    expect_equal "s3cmd ls of a bucket whose object is deleted" "" "$got"
    got=$(command aws --endpoint-url "$endpoint" s3api list-object-versions --bucket "$bv" --query '[length(Versions), length(DeleteMarkers)]' --output text)
    expect_equal "versions after s3cmd put, put, del" "$(printf '2\t1')" "$got"
    s3cmd setversioning "s3://$bv" disable
    got=$(command aws --endpoint-url "$endpoint" s3api get-bucket-versioning --bucket "$bv" --query Status --output text)
    expect_equal "s3cmd setversioning disable" Suspended "$got"

    # Access: a user's bucket under its own configuration; another user refused; an object
    # made public with setacl read anonymously; tags set and read.
    local ann bob
    read -r -a ann < <(new_user s3cmd-ann)
    read -r -a bob < <(new_user s3cmd-bob)
    sed "s|^access_key = .*|access_key = ${ann[0]}|; s|^secret_key = .*|secret_key = ${ann[1]}|" "$d/s3cfg" >"$d/ann.cfg"
    sed "s|^access_key = .*|access_key = ${bob[0]}|; s|^secret_key = .*|secret_key = ${bob[1]}|" "$d/s3cfg" >"$d/bob.cfg"
    command s3cmd -c "$d/ann.cfg" --no-progress mb "s3://$b-ann"
    command s3cmd -c "$d/ann.cfg" --no-progress put "$d/small.bin" "s3://$b-ann/mine.bin"
    # Bob's key works (his refusals below are for the bucket, not his key).
    command s3cmd -c "$d/bob.cfg" --no-progress ls >/dev/null
    refused command s3cmd -c "$d/bob.cfg" --no-progress get "s3://$b-ann/mine.bin" "$d/stolen"
    refused command s3cmd -c "$d/bob.cfg" --no-progress ls "s3://$b-ann"
    got=$(curl -s -o /dev/null -w '%{http_code}' "$endpoint/$b-ann/mine.bin")
    expect_equal "an anonymous GET of a private object" 403 "$got"
    command s3cmd -c "$d/ann.cfg" setacl --acl-public "s3://$b-ann/mine.bin"
    curl -sf -o "$d/public.down" "$endpoint/$b-ann/mine.bin"
    cmp "$d/small.bin" "$d/public.down"
    command s3cmd -c "$d/ann.cfg" settagging "s3://$b-ann/mine.bin" "team=storage&stage=hot"
    got=$(command s3cmd -c "$d/ann.cfg" gettagging "s3://$b-ann/mine.bin")
    grep -Eq 'team:[[:space:]]+storage' <<<"$got" || { echo "s3cmd gettagging: $got" >&2; return 1; }
    command s3cmd -c "$d/ann.cfg" del "s3://$b-ann/mine.bin"
    command s3cmd -c "$d/ann.cfg" rb "s3://$b-ann"
}

rclone_checks() {
    local b=rclone-$RANDOM$RANDOM d=$work/rclone got
    mkdir -p "$d"
    printf '%s\n' "[spindle]" "type = s3" "provider = Other" "access_key_id = $access_key" \
        "secret_access_key = $secret_key" "endpoint = $endpoint" "region = $region" \
        "force_path_style = true" >"$d/rclone.conf"
    rclone() { command rclone --config "$d/rclone.conf" --retries 1 --low-level-retries 1 "$@"; }
    make_tree "$d/tree" rclone
    make_file "$d/tree/large.bin" 12M rclone-large

    rclone mkdir "spindle:$b"
    # The 12 MiB file goes up in 5 MiB parts; check compares MD5s (rclone keeps a multipart
    # file's MD5 in its metadata), check --download the bytes.
    rclone copy --s3-upload-cutoff 5M --s3-chunk-size 5M "$d/tree" "spindle:$b/tree"
    rclone check "$d/tree" "spindle:$b/tree"
    rclone check --download "$d/tree" "spindle:$b/tree"
    got=$(rclone lsf -R --files-only "spindle:$b/tree")
    expect_equal "rclone lsf -R" "$(files_under "$d/tree")" "$(LC_ALL=C sort <<<"$got")"
    got=$(rclone ls "spindle:$b/tree" | awk '$2 == "large.bin" {print $1}')
    expect_equal "rclone ls" 12582912 "$got"
    got=$(rclone lsf "spindle:$b/tree")
    expect_equal "rclone lsf" "$(printf 'a+b=c&d.bin\nlarge.bin\nsub/\ntop.bin\nwith space/\nünïcödé/')" "$got"
    rclone copy "spindle:$b/tree" "$d/back"
    diff -r "$d/tree" "$d/back"

    # sync after changes: a file rewritten, one removed, one added.
    make_file "$d/tree/sub/a.txt" 9k rclone-changed
    rm "$d/tree/top.bin"
    make_file "$d/tree/added.bin" 33k rclone-added
    rclone sync --s3-upload-cutoff 5M --s3-chunk-size 5M "$d/tree" "spindle:$b/tree"
    rclone check "$d/tree" "spindle:$b/tree"
    rclone sync "spindle:$b/tree" "$d/back"
    diff -r "$d/tree" "$d/back"

    # delete removes files (here the .bin ones) and keeps the rest; purge removes everything.
    rclone delete --include '*.bin' "spindle:$b/tree"
    got=$(rclone lsf -R --files-only "spindle:$b/tree")
    expect_equal "rclone lsf after delete" "$(printf 'sub/a.txt\nsub/deeper/b.dat\nsub/empty')" "$(LC_ALL=C sort <<<"$got")"
    rclone purge "spindle:$b"
    got=$(rclone lsf "spindle:")
    if grep -qx "$b/" <<<"$got"; then
        echo "bucket $b still listed after purge" >&2
        return 1
    fi

    # Versioning: switched on by rclone's backend command; an overwritten file's old version
    # shown by --s3-versions and removed by cleanup-hidden.
    local bv=$b-versions
    rclone mkdir "spindle:$bv"
    rclone backend versioning "spindle:$bv" Enabled
    got=$(rclone backend versioning "spindle:$bv")
    expect_equal "rclone backend versioning" Enabled "$got"
    make_file "$d/doc.txt" 3k rclone-v1
    rclone copyto "$d/doc.txt" "spindle:$bv/doc.txt"
    make_file "$d/doc.txt" 4k rclone-v2
    rclone copyto "$d/doc.txt" "spindle:$bv/doc.txt"
    got=$(rclone lsf "spindle:$bv")
    expect_equal "rclone lsf of a versioned bucket" doc.txt "$got"
    got=$(rclone lsf --s3-versions "spindle:$bv" | wc -l)
    expect_equal "rclone lsf --s3-versions" 2 "$got"
    rclone backend cleanup-hidden "spindle:$bv"
    got=$(rclone lsf --s3-versions "spindle:$bv")
    expect_equal "rclone lsf --s3-versions after cleanup-hidden" doc.txt "$got"
    rclone purge "spindle:$bv"

    # Access: a user's remote; another user's refused.
    local ann bob
    read -r -a ann < <(new_user rclone-ann)
    read -r -a bob < <(new_user rclone-bob)
    printf '%s\n' "[ann]" "type = s3" "provider = Other" "access_key_id = ${ann[0]}" "secret_access_key = ${ann[1]}" \
        "endpoint = $endpoint" "region = $region" "force_path_style = true" \
        "[bob]" "type = s3" "provider = Other" "access_key_id = ${bob[0]}" "secret_access_key = ${bob[1]}" \
        "endpoint = $endpoint" "region = $region" "force_path_style = true" >>"$d/rclone.conf"
    rclone mkdir "ann:$b-ann"
    rclone copyto "$d/doc.txt" "ann:$b-ann/mine.txt"
    # Bob's key works (his refusals below are for the bucket, not his key).
    rclone lsf "bob:" >/dev/null
    refused rclone copyto "bob:$b-ann/mine.txt" "$d/stolen"
    refused rclone lsf "bob:$b-ann"
    got=$(rclone lsf "ann:$b-ann")
    expect_equal "rclone lsf as the bucket's owner" mine.txt "$got"
    rclone purge "ann:$b-ann"
}

export S3_ENDPOINT=$endpoint S3_ACCESS_KEY=$access_key S3_SECRET_KEY=$secret_key S3_REGION=$region
export SPINDLE_BIN=$spindle_bin S3_CRASH_DRIVE=$crash_drive S3_ETCD=$etcd_url
# The remote tier's suite stores into a MinIO of its own (scripts/minio-bin.sh builds one if
# none is installed).
if [[ -z ${S3_CLIENTS:-} || " $S3_CLIENTS " == *" remote "* ]]; then
    MINIO_BIN=$("$root/scripts/minio-bin.sh") || die "no MinIO for the remote tier's suite"
    export MINIO_BIN
fi
pytest_suite() { # PYTEST_ARGS...
    (cd "$root/tests/s3" && python -m pytest -p no:cacheprovider -q -rfE --durations=8 "$@")
}

passed=0 failed=0
# One client: its output goes to a log shown on failure; errexit holds inside it.
run_client() { # NAME FUNCTION [ARGS...]
    local name=$1 out=$work/$1.log rc=0 started=$SECONDS
    # S3_CLIENTS="NAME ..." runs only those (a suite being worked on); unset, every one.
    if [[ -n ${S3_CLIENTS:-} && " $S3_CLIENTS " != *" $name "* ]]; then
        return 0
    fi
    shift
    log "running $name"
    set +e
    (
        set -ex
        "$@"
    ) >"$out" 2>&1
    rc=$?
    set -e
    log "$name took $((SECONDS - started)) s"
    if ((rc == 0)); then
        passed=$((passed + 1)); echo "$name: ok"
    else
        failed=$((failed + 1)); echo "$name: FAILED"
        echo "--- $name output (last ${S3_TAIL:-80} lines) ---"
        tail -n ${S3_TAIL:-80} "$out"
    fi
}

run_client awscli awscli_checks
run_client s3cmd s3cmd_checks
run_client rclone rclone_checks
run_client boto3 pytest_suite test_behaviour.py test_streaming.py test_post_object.py test_cors.py test_tagging.py test_crash.py::test_client_abandoning_an_upload
run_client crash pytest_suite test_crash.py::test_gateway_killed_mid_upload
run_client races pytest_suite test_races.py
run_client hostile pytest_suite test_hostile.py
run_client store-ops pytest_suite test_store_ops.py
run_client access pytest_suite test_access.py
run_client versioning pytest_suite test_versioning.py
run_client remote pytest_suite test_remote.py
# Last: it leaves a pool of its own in the suite's cluster, its drives stopped.
run_client erasure pytest_suite test_erasure.py

if kill -0 "${server_pids[@]}" 2>/dev/null; then :; else
    log "a server exited during the run"
    tail_logs "$work"/*.err "$work"/gateway.out
    failed=$((failed + 1))
fi
echo "s3 clients: $passed passed, $failed failed"
((failed == 0))
