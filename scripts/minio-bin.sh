#!/usr/bin/env bash
# Prints the path of a MinIO server binary: $MINIO_BIN, target/go-bin/minio, $HOME/go/bin/minio
# or one on PATH; with none, builds the pinned release into target/go-bin (go install, about
# 2.5 minutes on 2 cores). The benchmarks compare against it and the S3 suite's remote tier
# stores into it.
#
#   scripts/minio-bin.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The release every script uses: MinIO's last source release built as a Go module.
minio_module=github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c
for c in "${MINIO_BIN:-}" "$root/target/go-bin/minio" "$HOME/go/bin/minio" "$(command -v minio || true)"; do
  if [[ -n $c && -x $c ]]; then
    echo "$c"
    exit 0
  fi
done
command -v go >/dev/null || { echo "minio-bin: MinIO is not installed and there is no Go toolchain to build it" >&2; exit 1; }
echo "minio-bin: installing MinIO ($minio_module) into target/go-bin: about 2.5 minutes on 2 cores" >&2
mkdir -p "$root/target/go-bin"
GOBIN=$root/target/go-bin go install "$minio_module" >&2 || { echo "minio-bin: go install $minio_module failed" >&2; exit 1; }
echo "$root/target/go-bin/minio"
