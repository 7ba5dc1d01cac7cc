#!/usr/bin/env python3
"""Finds #include cycles among the project's own sources.

Usage: scripts/check-include-cycles.py [DIR...]   (default: runtime)

Reads the quoted #include lines of every .h/.cpp/.c/.cuh under the given
folders (paths relative to the repository root; "tcc/..." resolves to
runtime/include/tcc/...) and reports two kinds of cycles:
  - file cycles: a.h includes b.h includes a.h (a compile error waiting);
  - component cycles: a header/source pair (X.h + X.cpp) that includes
    another pair which includes it back, e.g. Trainer.cpp including
    Sampler.h while Sampler.h includes Trainer.h.
Headers outside the repository and generated files are ignored. Prints the
cross-folder dependencies too. Exits 1 if there is a cycle.
"""
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def resolve(name):
    for candidate in (name, os.path.join('runtime/include', name)):
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


def main():
    folders = sys.argv[1:] or ['runtime']
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
                target = match and resolve(match.group(1))
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
    print(f'{len(files)} files under {", ".join(folders)}')
    for folder in sorted(folders_used):
        print(f'  {folder} -> {", ".join(sorted(folders_used[folder]))}')
    for title, cycles in (('file include cycles', file_cycles),
                          ('header/source pair cycles', pair_cycles)):
        print(f'{title}: {len(cycles) or "none"}')
        for cycle in cycles:
            print('  ' + ' <-> '.join(cycle))
    return 1 if file_cycles or pair_cycles else 0


if __name__ == '__main__':
    sys.exit(main())
