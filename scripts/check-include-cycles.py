#!/usr/bin/env python3
"""Finds #include cycles among the project's own sources.

Usage: scripts/check-include-cycles.py [--show-deps] [DIR...]   (default: runtime)

Reads the quoted #include lines of every .h/.cpp/.c/.cuh under the given
folders (paths relative to the repository root; "tcc/..." resolves to
runtime/include/tcc/...) and reports two kinds of cycles:
  - file cycles: a.h includes b.h includes a.h (a compile error waiting);
  - component cycles: a header/source pair (X.h + X.cpp) that includes
    another pair which includes it back, e.g. Trainer.cpp including
    Sampler.h while Sampler.h includes Trainer.h.
Headers outside the repository and generated files are ignored. When there
is no cycle it prints one line; --show-deps also lists which folders include
which. Exits 0 without cycles, 1 with a cycle, 2 on bad arguments (a folder
that does not exist). ctest `include_cycles` runs it over the whole tree.
"""
import argparse
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def resolve(name, including):
    """The repository path an include names: beside the including file first
    (as the compiler looks), then from the root, then runtime/include."""
    beside = os.path.normpath(os.path.join(os.path.dirname(including), name))
    for candidate in (beside, name, os.path.join('runtime/include', name)):
        if os.path.isfile(os.path.join(ROOT, candidate)):
            return candidate
    return None


def strongly_connected(graph):
    """Tarjan's algorithm; returns the components with more than one node."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(100000)
    nodes = set(graph) | {w for ws in graph.values() for w in ws}
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return found


def parse_args():
    summary = __doc__.split('\n\n')[0]
    parser = argparse.ArgumentParser(
        prog='scripts/check-include-cycles.py', description=summary,
        epilog='Exits 0 without cycles, 1 with a cycle, 2 on bad arguments.')
    parser.add_argument('folders', nargs='*', metavar='DIR', default=['runtime'],
                        help='folders to scan, relative to the repository '
                             'root (default: runtime)')
    parser.add_argument('--show-deps', action='store_true',
                        help='also list which folders include which')
    args = parser.parse_args()
    for folder in args.folders:
        if not os.path.isdir(os.path.join(ROOT, folder)):
            parser.error(f'no folder {folder!r} under {ROOT}')
    return args


def main():
    args = parse_args()
    folders = args.folders
    files = []
    for folder in folders:
        for directory, _, names in os.walk(os.path.join(ROOT, folder)):
            for name in names:
                if name.endswith(('.h', '.cpp', '.c', '.cuh')):
                    files.append(os.path.relpath(os.path.join(directory, name),
                                                 ROOT))
    includes = collections.defaultdict(set)
    for path in files:
        with open(os.path.join(ROOT, path), errors='replace') as f:
            for line in f:
                match = INCLUDE.match(line)
                target = match and resolve(match.group(1), path)
                if target:
                    includes[path].add(target)

    def component(path):
        return os.path.splitext(path)[0]

    pairs = collections.defaultdict(set)
    folders_used = collections.defaultdict(set)
    for path, targets in includes.items():
        for target in targets:
            if component(path) != component(target):
                pairs[component(path)].add(component(target))
            if os.path.dirname(path) != os.path.dirname(target):
                folders_used[os.path.dirname(path)].add(os.path.dirname(target))

    file_cycles = strongly_connected(includes)
    pair_cycles = strongly_connected(pairs)
    print(f'{len(files)} files under {", ".join(folders)}: ', end='')
    if not file_cycles and not pair_cycles:
        print('no include cycles')
    else:
        print('include cycles found')
    if args.show_deps:
        for folder in sorted(folders_used):
            print(f'  {folder} -> {", ".join(sorted(folders_used[folder]))}')
    for title, cycles in (('file include cycles', file_cycles),
                          ('header/source pair cycles', pair_cycles)):
        if cycles:
            print(f'{title}: {len(cycles)}')
        for cycle in cycles:
            print('  ' + ' <-> '.join(cycle))
    return 1 if file_cycles or pair_cycles else 0


if __name__ == '__main__':
    sys.exit(main())
