#!/usr/bin/env python3
"""The registers, spills, stack and shared memory ptxas gives each kernel of
a step, from ptxas -v reports (scripts/kernel-resources.sh collects them
while tcc compiles a model): one table, spilling kernels first, then by
registers. With no GPU at hand it says which kernels sit at their
__launch_bounds__ register cap or spill, where a profile would look first.

usage: kernel_resources.py [--spills-only] [--match REGEX] [--width N] REPORT...
"""

import argparse
import re
import shutil
import subprocess
import sys

ENTRY = re.compile(r"Function properties for (\S+)")
STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
SMEM = re.compile(r"(\d+) bytes smem")


def parse(text):
    """[(mangled name, {regs, stack, spill_stores, spill_loads, smem})] in
    report order. ptxas prints, for each function, 'Function properties
    for NAME', then its stack line, then (entries only) a 'Used N
    registers' line; a device function's properties have no 'Used' line
    and are left out."""
    found, name, props = [], None, {}
    for line in text.splitlines():
        m = ENTRY.search(line)
        if m:
            name, props = m.group(1), {}
            continue
        if name is None:
            continue
        m = STACK.search(line)
        if m:
            props.update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                         spill_loads=int(m.group(3)))
            continue
        m = USED.search(line)
        if m:
            props["regs"] = int(m.group(1))
            s = SMEM.search(line)
            props["smem"] = int(s.group(1)) if s else 0
            found.append((name, dict(props)))
            name = None
    return found


def demangle(names):
    tool = shutil.which("c++filt")
    if not tool or not names:
        return list(names)
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True)
    lines = out.stdout.splitlines()
    return lines if len(lines) == len(names) else list(names)


def short(name, width):
    name = re.sub(r"\b(tcc_cuda|detail|tcc_sm90|\(anonymous namespace\))::", "", name)
    name = re.sub(r"^void ", "", name)
    return name if len(name) <= width else name[: width - 3] + "..."


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--spills-only", action="store_true", help="only kernels that spill")
    ap.add_argument("--match", help="only kernels whose demangled name matches this regex")
    ap.add_argument("--width", type=int, default=110, help="kernel names cut to this width")
    args = ap.parse_args(argv)
    entries = []
    for path in args.reports:
        try:
            with open(path, errors="replace") as f:
                entries += parse(f.read())
        except OSError as e:
            sys.exit(f"kernel_resources.py: {path}: {e.strerror}")
    # One row per kernel: the same instance compiled into several units
    # gets the same figures; if they differ, each is shown.
    unique = {}
    for name, props in entries:
        unique.setdefault((name, tuple(sorted(props.items()))), (name, props))
    rows = list(unique.values())
    names = demangle([n for n, _ in rows])
    table = []
    for (_, p), name in zip(rows, names):
        if args.spills_only and not p.get("spill_stores", 0):
            continue
        if args.match and not re.search(args.match, name):
            continue
        table.append((p, name))
    if not table:
        print("no kernels" + (" that spill" if args.spills_only else "") +
              (f" matching {args.match!r}" if args.match else "") + f" in {len(entries)} entries")
        return 0
    table.sort(key=lambda r: (-r[0].get("spill_stores", 0), -r[0]["regs"], r[1]))
    print(f"{'regs':>4} {'spill st/ld B':>13} {'stack B':>7} {'smem B':>7}  kernel")
    for p, name in table:
        spill = f"{p.get('spill_stores', 0)}/{p.get('spill_loads', 0)}"
        print(f"{p['regs']:>4} {spill:>13} {p.get('stack', 0):>7} {p['smem']:>7}  "
              f"{short(name, args.width)}")
    spilling = sum(1 for p, _ in table if p.get("spill_stores", 0))
    print(f"{len(table)} kernels, {spilling} spilling")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
