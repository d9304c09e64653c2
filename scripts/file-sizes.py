#!/usr/bin/env python3
"""Fails when a source file outside tests is over LIMIT lines: a module that large holds
more than one idea. Tests (crates/*/tests/, src/**/tests.rs, fuzz targets) are left out.
A file may be let through by naming it in ALLOWED with the reason it stays whole.

    scripts/file-sizes.py
"""
import glob
import sys

LIMIT = 800
# path -> why it stays one file (none today).
ALLOWED = {}


def too_long():
    found = []
    for path in sorted(glob.glob("crates/*/src/**/*.rs", recursive=True)):
        if path.endswith("/tests.rs") or "/tests/" in path or path in ALLOWED:
            continue
        with open(path, encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        if lines > LIMIT:
            found.append((path, lines))
    return found


def main():
    found = too_long()
    for path, lines in found:
        print(f"{path}: {lines} lines, over {LIMIT}: split it by idea (or name it in ALLOWED with the reason)")
    if not found:
        print(f"no source file over {LIMIT} lines outside tests")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
