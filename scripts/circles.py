#!/usr/bin/env python3
"""Lists the files of each crate that import each other in a loop.

A file imports another when it names an item of the other's module:
`use crate::a::b`, `crate::a::b::f()`, `super::x`, `self::x`, or a child
module it declares (`mod child;` then `child::f()`). Left out:
- test modules (files named tests.rs, or under a tests/ folder inside
  src/): a test reaching into what it tests is no circle;
- a folder's face (mod.rs, lib.rs, main.rs): it declares the folder's
  files and re-exports what the rest of the crate uses, so every file of a
  folder that names a sibling through it, or an item it re-exports, would
  form a "circle" with it. Circles are between the files that hold the
  code.

Usage: scripts/circles.py [--max N] [root]
Prints each circle (an elementary cycle of the import graph) as its files,
then the count; exits 1 when there are more than N (default: no limit).
"""

import argparse
import os
import re
import sys


CRATES = ["common", "sandbox", "identity", "oauth", "proto", "sms", "spearlet"]
PATH = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
USE = re.compile(r"\buse\s+([^;]+);", re.S)
MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)
COMMENT = re.compile(r"//[^\n]*")


def module_of(src, path):
    """The module path of a file under src/ as a tuple of names."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel in (["lib"], ["main"]):
        return ()
    return tuple(rel)


def is_test(src, path):
    rel = os.path.relpath(path, src).split(os.sep)
    return rel[-1] == "tests.rs" or "tests" in rel[:-1]


def expand(tree):
    """`a::{b, c::{d}}` -> ["a::b", "a::c::d"] (as far as paths go)."""
    tree = re.sub(r"\s+", "", tree)
    if "{" not in tree:
        return [tree]
    head, rest = tree.split("{", 1)
    body = rest[: rest.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for part in parts:
        if part:
            out.extend(head + p for p in expand(part))
    return out


def absolute(module, first, rest):
    """Resolves `first::rest` named in `module` to an absolute path."""
    names = [n for n in rest.split("::") if n]
    if first == "crate":
        return list(names)
    base = list(module)
    if first == "super":
        base = base[:-1]
        while names and names[0] == "super":
            names = names[1:]
            base = base[:-1]
    return base + names


def graph_of(root, crate):
    src = os.path.join(root, crate, "src")
    files = {}
    for dirpath, _, names in os.walk(src):
        for name in names:
            path = os.path.join(dirpath, name)
            if name.endswith(".rs") and not is_test(src, path):
                files[module_of(src, path)] = os.path.relpath(path, root)
    graph = {}
    for module, path in files.items():
        text = COMMENT.sub("", open(os.path.join(root, path)).read())
        targets = []
        for m in PATH.finditer(text):
            targets.append(absolute(module, m.group(1), m.group(2)))
        for m in USE.finditer(text):
            for used in expand(m.group(1)):
                first, _, rest = used.partition("::")
                if first in ("crate", "super", "self"):
                    targets.append(absolute(module, first, "::" + rest))
        for child in MOD.findall(text):
            for m in re.finditer(r"(?<![\w:])" + child + r"((?:::\w+)+)", text):
                targets.append(list(module) + [child] + m.group(1).split("::")[1:])
        for target in targets:
            for end in range(len(target), 0, -1):
                hit = files.get(tuple(target[:end]))
                if hit:
                    if hit != path:
                        graph.setdefault(path, {}).setdefault(hit, set()).add("::".join(target))
                    break
    return graph


def simple_cycles(graph):
    """Every elementary cycle, each once: started at its least file and
    walked only through files after it (the graphs are small)."""
    found = []

    def walk(start, node, path):
        for nxt in sorted(graph.get(node, {})):
            if nxt == start:
                found.append(list(path))
            elif nxt > start and nxt not in path:
                walk(start, nxt, path + [nxt])

    for start in sorted(graph):
        walk(start, start, [start])
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max", type=int)
    parser.add_argument("--why", action="store_true", help="name what each file names of the next")
    parser.add_argument("root", nargs="?", default=".")
    args = parser.parse_args()
    circles, whys = [], {}
    for crate in CRATES:
        graph = graph_of(args.root, crate)
        face = lambda f: f.endswith(("mod.rs", "lib.rs", "main.rs"))
        graph = {
            a: {b: why for b, why in edges.items() if not face(b)}
            for a, edges in graph.items()
            if not face(a)
        }
        circles.extend(simple_cycles(graph))
        whys.update(graph)
    for circle in circles:
        print(" -> ".join(circle + circle[:1]))
        if args.why:
            for a, b in zip(circle, circle[1:] + circle[:1]):
                print(f"    {a} names {', '.join(sorted(whys[a][b]))}")
    print(f"{len(circles)} circles")
    if args.max is not None and len(circles) > args.max:
        print(f"more than {args.max}: move the shared item down into its own file", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
