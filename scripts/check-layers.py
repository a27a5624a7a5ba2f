#!/usr/bin/env python3
"""The workspace's layering, checked: no cycle between the modules of a
crate and no source file over 600 production lines.

Cargo keeps the crates apart; inside a crate, modules may name each other
freely, so this reads every `.rs` file's paths (`use` trees and
`crate::`/`super::`/`self::` paths outside `#[cfg(test)]` items) and checks
that sibling modules depend one way only (a child may use its parent's
items, a parent its children's). Production lines are the non-blank lines
that are not comments, outside `#[cfg(test)]` items; `tests.rs` files and
`tests/` directories are test code.

Usage: scripts/check-layers.py [--max-lines N] [DIR...]   (exit 1 on a finding)
"""

import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DIRS = ["app/src", "frontend/src", "server/src"] + sorted(
    os.path.join("crates", c, "src") for c in os.listdir(os.path.join(ROOT, "crates"))
)


def blank(match):
    """A literal or comment emptied, its line breaks kept."""
    return " " + "\n" * match.group(0).count("\n")


def strip(src):
    """`src` without comments, strings and character literals (whose
    braces and slashes would mislead the reading), lines kept."""
    src = re.sub(r'r(#*)".*?"\1', blank, src, flags=re.S)
    src = re.sub(r'b?"(?:\\.|[^"\\])*"', blank, src, flags=re.S)
    src = re.sub(r"b?'(?:\\.|[^'\\])'", blank, src)
    src = re.sub(r"/\*.*?\*/", blank, src, flags=re.S)
    src = re.sub(r"//[^\n]*", "", src)
    return src


def without_tests(src):
    """`src` without its `#[cfg(test)]` items."""
    out, i = [], 0
    while True:
        k = src.find("#[cfg(test)]", i)
        if k < 0:
            out.append(src[i:])
            return "".join(out)
        out.append(src[i:k])
        m = re.compile(r"[;{]").search(src, k)
        if not m:
            return "".join(out)
        if m.group() == ";":
            i = m.end()
            continue
        depth, p = 0, m.start()
        while p < len(src):
            if src[p] == "{":
                depth += 1
            elif src[p] == "}":
                depth -= 1
                if depth == 0:
                    break
            p += 1
        i = p + 1


def use_paths(tree):
    """The paths a `use` tree names: `a::{b, c::d}` → [a, b], [a, c, d]."""
    tree = re.sub(r"\s+", " ", tree).strip()
    paths = []

    def walk(prefix, s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            depth += ch == "{"
            depth -= ch == "}"
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        parts.append(cur)
        for part in (p.strip() for p in parts):
            if not part:
                continue
            if "{" in part:
                k = part.index("{")
                head = [x for x in part[:k].strip().rstrip(":").split("::") if x]
                walk(prefix + head, part[k + 1 : part.rindex("}")])
            else:
                part = re.sub(r"\s+as\s+\w+$", "", part)
                paths.append(prefix + [x.strip() for x in part.split("::") if x.strip()])

    walk([], tree)
    return paths


def module_of(rel):
    parts = rel[:-3].split("/")
    return tuple(parts[:-1] if parts[-1] in ("mod", "lib", "main") else parts)


def is_test_file(rel):
    return rel.endswith("tests.rs") or "/tests/" in "/" + rel or rel.startswith("bin/")


def cycles(src_dir):
    files = {}
    for d, _, names in os.walk(src_dir):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(d, name)
                rel = os.path.relpath(path, src_dir)
                if not is_test_file(rel):
                    files[module_of(rel)] = path
    modules = set(files)
    for m in list(modules):
        modules.update(m[:i] for i in range(len(m)))
    edges = defaultdict(set)
    for here, path in files.items():
        with open(path, encoding="utf-8") as f:
            src = without_tests(strip(f.read()))
        refs = [p for u in re.finditer(r"\buse\s+([^;]+);", src) for p in use_paths(u.group(1))]
        refs += [r.group(1).split("::") for r in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", src)]
        for ref in refs:
            if not ref:
                continue
            if ref[0] == "crate":
                target = ref[1:]
            elif ref[0] in ("super", "self"):
                target, k = list(here), 0
                while k < len(ref) and ref[k] in ("super", "self"):
                    if ref[k] == "super":
                        target = target[:-1]
                    k += 1
                target += ref[k:]
            else:
                continue
            c = 0
            while c < len(here) and c < len(target) and here[c] == target[c]:
                c += 1
            if c < len(here) and c < len(target):
                a, b = tuple(here[: c + 1]), tuple(target[: c + 1])
                if b in modules and a != b:
                    edges[a].add(b)
    # Tarjan's strongly connected components.
    index, low, stack, on, found, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted("::".join(x) for x in comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def production_lines(path):
    with open(path, encoding="utf-8") as f:
        src = strip(f.read())
    return sum(1 for line in without_tests(src).split("\n") if line.strip())


def main(argv):
    max_lines = 600
    if argv[:1] == ["--max-lines"]:
        max_lines, argv = int(argv[1]), argv[2:]
    dirs = argv or DEFAULT_DIRS
    problems = 0
    for src_dir in dirs:
        full = os.path.join(ROOT, src_dir)
        for comp in cycles(full):
            print(f"{src_dir}: modules that depend on each other: {', '.join(comp)}")
            problems += 1
        for d, _, names in os.walk(full):
            for name in names:
                path = os.path.join(d, name)
                rel = os.path.relpath(path, full)
                if name.endswith(".rs") and not is_test_file(rel):
                    lines = production_lines(path)
                    if lines > max_lines:
                        print(f"{os.path.relpath(path, ROOT)}: {lines} production lines (at most {max_lines})")
                        problems += 1
    if problems:
        print(f"check-layers: {problems} finding(s)")
        return 1
    print(f"check-layers: no module cycles, no file over {max_lines} production lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
