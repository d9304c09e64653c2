#!/usr/bin/env python3
"""Lists import cycles between the modules of each crate (no module may import, through any
chain, a module that imports it back). Reads `crate::a` and `crate::a::b` paths (a::b when
src/a/b.rs exists) and, inside a folder module, `super::x`; a file's `#[cfg(test)] mod tests`
is left out. Exit status 1 when a cycle is found.

    scripts/module-cycles.py [CRATE_SRC_DIR...]   (default: every crates/*/src)
"""
import glob
import os
import re
import sys


def module_name(root, path):
    rel = os.path.relpath(path, root)[:-3].replace(os.sep, "::")
    return rel[: -len("::mod")] if rel.endswith("::mod") else rel


def imports(root, name, source):
    cut = source.find("#[cfg(test)]\nmod tests")
    if cut >= 0:
        source = source[:cut]
    found = set()
    for m in re.finditer(r"crate::([a-z_0-9]+)(?:::([a-z_0-9]+))?", source):
        top, sub = m.group(1), m.group(2)
        if sub and os.path.exists(os.path.join(root, top, sub + ".rs")):
            found.add(f"{top}::{sub}")
        else:
            found.add(top)
    if "::" in name:
        parent = name.rsplit("::", 1)[0]
        for m in re.finditer(r"super::([a-z_0-9]+)", source):
            sibling = f"{parent}::{m.group(1)}"
            found.add(sibling if os.path.exists(os.path.join(root, *sibling.split("::")) + ".rs") else parent)
    found.discard(name)
    return found


def cycles(root):
    graph = {}
    for path in glob.glob(os.path.join(root, "**", "*.rs"), recursive=True):
        name = module_name(root, path)
        if name in ("lib", "main") or name.startswith("bin::"):
            continue
        graph[name] = imports(root, name, open(path, encoding="utf-8").read())
    graph = {n: {d for d in deps if d in graph} for n, deps in graph.items()}
    found = set()

    def walk(node, stack):
        for dep in sorted(graph[node]):
            if dep in stack:
                loop = stack[stack.index(dep):]
                start = loop.index(min(loop))
                found.add(" -> ".join(loop[start:] + loop[:start] + [min(loop)]))
            elif len(stack) < 12:
                walk(dep, stack + [dep])

    for node in sorted(graph):
        walk(node, [node])
    return sorted(found)


def main():
    roots = sys.argv[1:] or sorted(glob.glob("crates/*/src"))
    bad = False
    for root in roots:
        for cycle in cycles(root):
            print(f"{root}: {cycle}")
            bad = True
    if not bad:
        print(f"no import cycles in {len(roots)} crates")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
