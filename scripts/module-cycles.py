#!/usr/bin/env python3
"""Lists import cycles between the modules of each crate (no module may import, through any
chain, a module that imports it back). Reads `crate::a` and `crate::a::b` paths (a::b when
src/a/b.rs or src/a/b/mod.rs exists), `use` trees with braces, nested or not (`use
crate::{a, b::{c, d}};`) and, inside a folder module, `super::x` the same ways; a file's
`#[cfg(test)] mod tests` is left out. Exit status 1 when a cycle is found.

    scripts/module-cycles.py [CRATE_SRC_DIR...]   (default: every crates/*/src)
"""
import glob
import os
import re
import sys


def module_name(root, path):
    rel = os.path.relpath(path, root)[:-3].replace(os.sep, "::")
    return rel[: -len("::mod")] if rel.endswith("::mod") else rel


def expand(tree):
    """The paths a `use` tree names: `a::{b, c::{d, e}}` gives a::b, a::c::d and a::c::e."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+[A-Za-z_0-9]+", "", tree))
    depth, start = 0, None
    for i, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                prefix, inner, rest = tree[:start], tree[start + 1:i], tree[i + 1:]
                parts, depth2, last = [], 0, 0
                for j, c in enumerate(inner):
                    depth2 += (c == "{") - (c == "}")
                    if c == "," and depth2 == 0:
                        parts.append(inner[last:j])
                        last = j + 1
                parts.append(inner[last:])
                return [p for part in parts if part for p in expand(prefix + part + rest)]
    return [tree]


def paths(source):
    """Every path of `source` that starts at `crate` or `super`: in `use` trees (braces
    expanded) and written out in the code."""
    found = []
    for m in re.finditer(r"\buse\s+([^;]+);", source):
        found += [p for p in expand(m.group(1)) if p.startswith(("crate::", "super::"))]
    found += re.findall(r"\b(?:crate|super)(?:::[A-Za-z_0-9]+)+", source)
    return found


def module_of(root, parts):
    """The module `parts` (a path's segments after `crate`) is in: the longest run of its
    first segments that is a source file of the crate."""
    best = None
    for n in range(1, len(parts) + 1):
        base = os.path.join(root, *parts[:n])
        if os.path.exists(base + ".rs") or os.path.exists(os.path.join(base, "mod.rs")):
            best = "::".join(parts[:n])
        else:
            break
    return best


def imports(root, name, source):
    cut = source.find("#[cfg(test)]\nmod tests")
    if cut >= 0:
        source = source[:cut]
    found = set()
    parent = name.rsplit("::", 1)[0].split("::") if "::" in name else []
    for path in paths(source):
        segments = path.split("::")
        if segments[0] == "crate":
            target = module_of(root, segments[1:])
        elif parent:
            # `super` in a/b.rs is module a: its children are siblings, the rest is a itself.
            target = module_of(root, parent + segments[1:]) or "::".join(parent)
        else:
            continue
        if target:
            found.add(target)
    found.discard(name)
    return found


def cycles(root):
    graph = {}
    for path in glob.glob(os.path.join(root, "**", "*.rs"), recursive=True):
        name = module_name(root, path)
        if name in ("lib", "main") or name.startswith("bin::"):
            continue
        with open(path, encoding="utf-8") as f:
            graph[name] = imports(root, name, f.read())
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
