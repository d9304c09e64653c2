#!/usr/bin/env python3
"""Reads an `strace -f -tt -y` trace of a drive and lists every directory-entry change (a file
created, a directory made, a rename, an unlink) that no later fsync of its directory made
durable. On Linux a file's fsync does not cover the entry that names it (docs/design/storage.md,
"Durability contract"): such a change can be undone by a power cut.

    scripts/fsync-audit.py TRACE [--root DIR]

Prints one line per change left unsynced, grouped as "created/renamed" (a promise may rest on
these: they must be empty) and "removed" (the drive tolerates these coming back: orphans are
deleted at the next open), and exits 1 if the first group is not empty.
"""
import argparse
import os
import re
import sys

# pid, time, call, args, result (strace -f -tt -y)
LINE = re.compile(r"^(?:\[pid\s+)?(\d+)\]?\s+(\d\d:\d\d:\d\d\.\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)(?:<([^>]*)>)?")
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
FD_PATH = re.compile(r"^(-?\d+|AT_FDCWD)(?:<([^>]*)>)?")


def resolve(dirfd_arg, name):
    if name.startswith("/"):
        return os.path.normpath(name)
    m = FD_PATH.match(dirfd_arg.strip())
    base = m.group(2) if m and m.group(2) else os.getcwd()
    return os.path.normpath(os.path.join(base, name))


def split_args(args):
    out, depth, cur, quoted = [], 0, "", False
    for i, ch in enumerate(args):
        if ch == '"' and (i == 0 or args[i - 1] != "\\"):
            quoted = not quoted
        if not quoted and ch in "{[(":
            depth += 1
        elif not quoted and ch in "}])":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


UNFINISHED = re.compile(r"^(\d+)\s+(\S+)\s+(.*) <unfinished \.\.\.>$")
RESUMED = re.compile(r"^(\d+)\s+\S+\s+<\.\.\. \w+ resumed>(.*)$")


def joined(lines):
    """Calls that strace split because another thread ran in between, put back together."""
    open_calls = {}
    for raw in lines:
        line = raw.rstrip("\n")
        m = UNFINISHED.match(line)
        if m:
            open_calls[m.group(1)] = f"{m.group(1)} {m.group(2)} {m.group(3)}"
            continue
        m = RESUMED.match(line)
        if m and m.group(1) in open_calls:
            yield open_calls.pop(m.group(1)) + m.group(2)
            continue
        yield line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--root", help="only changes under this directory")
    a = ap.parse_args()
    root = os.path.realpath(a.root) if a.root else None
    pending = {}  # directory -> list of (time, what, path)
    synced = 0
    for raw in joined(open(a.trace, errors="replace")):
        m = LINE.match(raw)
        if not m:
            continue
        _, t, call, args, result, result_path = m.groups()
        if int(result) < 0:
            continue
        parts = split_args(args)
        changes = []
        if call == "openat" and len(parts) >= 3 and "O_CREAT" in parts[2]:
            changes.append(("created", resolve(parts[0], QUOTED.match(parts[1]).group(1))))
        elif call == "open" and len(parts) >= 2 and "O_CREAT" in parts[1]:
            changes.append(("created", resolve("AT_FDCWD", QUOTED.match(parts[0]).group(1))))
        elif call in ("mkdir", "mkdirat"):
            i = 0 if call == "mkdir" else 1
            fd = "AT_FDCWD" if call == "mkdir" else parts[0]
            changes.append(("created", resolve(fd, QUOTED.match(parts[i]).group(1))))
        elif call in ("rename", "renameat", "renameat2"):
            if call == "rename":
                src, dst = resolve("AT_FDCWD", QUOTED.match(parts[0]).group(1)), resolve("AT_FDCWD", QUOTED.match(parts[1]).group(1))
            else:
                src, dst = resolve(parts[0], QUOTED.match(parts[1]).group(1)), resolve(parts[2], QUOTED.match(parts[3]).group(1))
            changes.append(("removed", src))
            changes.append(("renamed", dst))
        elif call in ("unlink", "unlinkat", "rmdir"):
            fd = parts[0] if call == "unlinkat" else "AT_FDCWD"
            name = parts[1] if call == "unlinkat" else parts[0]
            changes.append(("removed", resolve(fd, QUOTED.match(name).group(1))))
        elif call in ("fsync", "fdatasync"):
            fm = FD_PATH.match(parts[0])
            path = fm.group(2) if fm else None
            if path and path in pending:
                synced += len(pending.pop(path))
            continue
        for what, path in changes:
            if root and not (path == root or path.startswith(root + os.sep)):
                continue
            pending.setdefault(os.path.dirname(path), []).append((t, what, path))
    kept = [(t, w, p) for items in pending.values() for (t, w, p) in items if w != "removed"]
    removed = [(t, w, p) for items in pending.values() for (t, w, p) in items if w == "removed"]
    print(f"entry changes made durable by a later directory fsync: {synced}")
    print(f"created or renamed, never synced: {len(kept)}")
    for t, w, p in sorted(kept):
        print(f"  {t} {w} {p}")
    print(f"removed, never synced (tolerated: orphans are deleted at the next open): {len(removed)}")
    for t, w, p in sorted(removed)[:20]:
        print(f"  {t} {w} {p}")
    return 1 if kept else 0


if __name__ == "__main__":
    sys.exit(main())
