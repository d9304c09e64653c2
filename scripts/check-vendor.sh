#!/usr/bin/env bash
# Checks that each vendored crate (vendor/fjall, vendor/lsm-tree, vendor/etcd-client) is exactly its pristine release
# (vendor/patches/UPSTREAM) plus its patch queue (vendor/patches/<crate>/NNNN-*.patch, applied
# in order with `git apply`), byte for byte, and that each patch says why it exists. Exit status
# 1, with the differing files listed, if not.
#
#   scripts/check-vendor.sh [--diff] [CRATE...]
#
# --diff also prints the unified diff from upstream + queue (a/) to vendor/<crate> (b/): the
# change that no patch holds yet, which with a header is the next patch (vendor/patches/README.md).
#
# The pristine .crate is taken from $SPINDLE_VENDOR_CACHE (a folder of NAME-VERSION.crate
# files, for a machine without network), else from cargo's download cache, else fetched with
# `cargo fetch` into that cache. Whichever way it came, its sha256 must be the one in UPSTREAM.
# Offline, the check works as long as one of those caches holds the file.
#
# Compared: every file of vendor/<crate> except SPINDLE-PATCH.md (the queue's index, Spindle's
# own). The crate's Cargo.lock is deleted before the queue is applied: the vendored copies do
# not keep it (a dependency's lock file is never read; the workspace's Cargo.lock governs).
# Nothing else is ignored: a build inside vendor/<crate> (its target/, a Cargo.lock) fails it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
patches=$root/vendor/patches
cargo_cache=${CARGO_HOME:-$HOME/.cargo}/registry/cache

show_diff=
crates=()
for arg in "$@"; do
  case $arg in
    --diff) show_diff=1 ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    -*) echo "unknown option $arg" >&2; exit 2 ;;
    *) crates+=("$arg") ;;
  esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# Prints the path of a cached NAME-VERSION.crate whose sha256 is SHA, if there is one.
cached_crate() { # NAME VERSION SHA
  local file
  for file in ${SPINDLE_VENDOR_CACHE:+"$SPINDLE_VENDOR_CACHE/$1-$2.crate"} "$cargo_cache"/*/"$1-$2.crate"; do
    [[ -f $file ]] || continue
    if [[ $(sha256sum "$file" | cut -d' ' -f1) == "$3" ]]; then
      echo "$file"
      return 0
    fi
    echo "warning: $file is not the published $1 $2 (sha256 differs); ignored" >&2
  done
  return 1
}

# Downloads NAME VERSION into cargo's cache the ordinary way: a scratch package that depends on
# exactly that version, and `cargo fetch`.
fetch_crate() { # NAME VERSION
  local pkg=$tmp/fetch-$1
  mkdir -p "$pkg/src"
  : >"$pkg/src/lib.rs"
  printf '[package]\nname = "vendor-check-fetch"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n[dependencies]\n%s = { version = "=%s", default-features = false }\n' \
    "$1" "$2" >"$pkg/Cargo.toml"
  (cd "$pkg" && CARGO_NET_RETRY=1 CARGO_HTTP_TIMEOUT=30 CARGO_TARGET_DIR=$tmp/target \
    cargo fetch --quiet --target "$(rustc -vV | sed -n 's/^host: //p')") >&2
}

status=0
found=0
while read -r name version registry sha _; do
  [[ -z $name || $name == \#* ]] && continue
  if ((${#crates[@]})) && [[ " ${crates[*]} " != *" $name "* ]]; then continue; fi
  found=$((found + 1))
  vendored=$root/vendor/$name
  [[ $registry == crates.io ]] || { echo "$name: unknown registry $registry in vendor/patches/UPSTREAM" >&2; exit 2; }
  [[ -d $vendored ]] || { echo "$name: vendor/$name does not exist" >&2; status=1; continue; }

  if ! crate=$(cached_crate "$name" "$version" "$sha"); then
    if ! fetch_crate "$name" "$version" || ! crate=$(cached_crate "$name" "$version" "$sha"); then
      echo "$name: no copy of $name-$version.crate with sha256 $sha in ${SPINDLE_VENDOR_CACHE:+$SPINDLE_VENDOR_CACHE or }$cargo_cache, and cargo could not fetch it." >&2
      echo "  Offline, put that file in a folder and set SPINDLE_VENDOR_CACHE to it." >&2
      exit 1
    fi
  fi

  # The pristine tree, then the queue on it.
  mkdir -p "$tmp/$name/unpacked" "$tmp/$name/cmp"
  tar -xzf "$crate" -C "$tmp/$name/unpacked"
  tree=$tmp/$name/cmp/a
  mv "$tmp/$name/unpacked/$name-$version" "$tree"
  rm -f "$tree/Cargo.lock"
  queue=("$patches/$name"/[0-9][0-9][0-9][0-9]-*.patch)
  [[ -e ${queue[0]} ]] || queue=()
  applied=0
  for patch in "${queue[@]}"; do
    rel=${patch#"$root"/}
    # Each patch opens with what it does, why, and whether upstream has or could take it.
    header=$(sed '/^diff --git /,$d' "$patch")
    for field in 'What' 'Why' 'Upstream:' 'Upstreamable:'; do
      grep -q "^$field" <<<"$header" || { echo "$rel: its header has no '$field' paragraph"; status=1; }
    done
    grep -qF "$(basename "$patch")" "$vendored/SPINDLE-PATCH.md" 2>/dev/null ||
      { echo "vendor/$name/SPINDLE-PATCH.md does not list $(basename "$patch")"; status=1; }
    # GIT_CEILING_DIRECTORIES: the temporary tree is no repository; git apply patches it in place.
    if ! out=$(cd "$tree" && GIT_CEILING_DIRECTORIES=$tmp git apply --whitespace=nowarn "$patch" 2>&1); then
      echo "$name: $rel does not apply to $name $version + the patches before it:"
      sed 's/^/  /' <<<"$out"
      status=1
      continue 2
    fi
    applied=$((applied + 1))
  done

  # vendor/<crate> as it is on disk, less the index.
  cp -a "$vendored" "$tmp/$name/cmp/b"
  rm -f "$tmp/$name/cmp/b/SPINDLE-PATCH.md"
  if differing=$(cd "$tmp/$name/cmp" && diff -rq a b); then
    echo "vendor/$name: $name $version + $applied patches, identical"
  else
    status=1
    echo "vendor/$name is not $name $version + its $applied patches (vendor/patches/$name); differing files:"
    sed -E -e "s#^Files a/(.*) and b/.* differ\$#  changed:      vendor/$name/\1#" \
      -e "s#^Only in a/?(.*): (.*)\$#  missing:      vendor/$name/\1/\2#" \
      -e "s#^Only in b/?(.*): (.*)\$#  not in queue: vendor/$name/\1/\2#" \
      -e 's#/+#/#g' <<<"$differing"
    if [[ -n $show_diff ]]; then
      # The trees are named a and b, so that empty prefixes give a patch's a/ and b/ paths.
      (cd "$tmp/$name/cmp" && git diff --no-index --no-renames --no-color --no-ext-diff \
        --src-prefix= --dst-prefix= a b) || true
    else
      echo "  (scripts/check-vendor.sh --diff $name prints the change)"
    fi
  fi
done < "$patches/UPSTREAM"

if ((found == 0)); then
  echo "no crate ${crates[*]:+named ${crates[*]} }in vendor/patches/UPSTREAM" >&2
  exit 2
fi
exit $status
