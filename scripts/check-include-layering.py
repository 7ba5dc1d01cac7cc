#!/usr/bin/env python3
"""Checks that the project's folders include only what lies below them.

Usage: scripts/check-include-layering.py [--root DIR]

The link graph (tests/layering/CMakeLists.txt) cannot see a header-only
reach across rooms, so this reads the quoted #include lines of every
.h/.cpp/.c/.cuh/.cu/.inc file and checks them against RULES: a file under
the folder on the left must not include a path that starts with one on the
right. Those are the two breaks issue 38 mended (tcc's "did you mean" from
trun's internals, tg-cache-rope's evaluator from the compiler room) and the
rest of docs/architecture.md's order:

  support  (shared, header-only helpers: below everything)
  dialects, interpreter, frontend, models
  passes
  compiler            runtime (trun; tcc run shares runtime/initializers)

Prints one line per break (file:line: the include, and the rule) and exits 1
on any, else prints one line and exits 0; 2 on bad arguments. ctest
`include_layering` runs it on the tree, and `include_layering_selftest` on a
tree holding one break, which it must report.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')
SOURCES = (".h", ".hpp", ".cpp", ".c", ".cuh", ".cu", ".inc")

# (folder, forbidden include prefixes, why)
RULES = [
    ("support/", ("compiler/", "passes/", "runtime/", "dialects/", "interpreter/",
                  "frontend/", "models/"),
     "support/ is below everything"),
    ("dialects/", ("compiler/", "passes/", "runtime/", "interpreter/", "frontend/",
                   "models/"),
     "the dialects stand below the passes, the interpreter and the tools"),
    ("interpreter/", ("compiler/", "passes/", "runtime/"),
     "the reference interpreter stands below the passes and the tools"),
    ("passes/", ("compiler/", "runtime/"),
     "a pass must not reach up into the compiler or the runtime"),
    ("compiler/", ("runtime/trun/",),
     "the compiler must not reach into trun's internals (share through support/)"),
    ("runtime/", ("compiler/", "passes/"),
     "the runtime must not reach into the compiler"),
]


def breaks(root):
    found = []
    for top in sorted({r[0] for r in RULES}):
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for folder, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        for prefix, forbidden, why in RULES:
                            if rel.startswith(prefix) and m.group(1).startswith(forbidden):
                                found.append(f'{rel}:{number}: includes "{m.group(1)}": {why}')
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--root", default=here, help="the tree to check (default: this one)")
    args = parser.parse_args()
    if not os.path.isdir(args.root):
        print(f"check-include-layering: no folder {args.root}", file=sys.stderr)
        return 2
    found = breaks(args.root)
    for line in found:
        print(line)
    if found:
        print(f"include layering: {len(found)} include(s) across the layers (above)")
        return 1
    print("include layering: every folder includes only what lies below it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
