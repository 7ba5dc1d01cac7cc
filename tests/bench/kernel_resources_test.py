"""scripts/kernel_resources.py on a made-up ptxas -v report: each entry's
registers, spills, stack and shared memory as the report gives them;
spilling kernels first, then by registers; one row for an instance
reported by several units; device functions (no 'Used' line) left out;
--spills-only, --match; a clear error for a missing report. Then, where
nvcc and tcc are there, scripts/kernel-resources.sh end to end on the MLP
sample.

usage: kernel_resources_test.py SOURCE_ROOT WORK_DIR [TCC]
"""

import os
import random
import re
import shutil
import subprocess
import sys

root, work = sys.argv[1], sys.argv[2]
tcc = sys.argv[3] if len(sys.argv) > 3 else None
table = os.path.join(root, "scripts", "kernel_resources.py")
os.makedirs(work, exist_ok=True)
rng = random.Random()
failures = []


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def entry(name, regs, spill, smem, stack=None, loads=None):
    stack = spill if stack is None else stack
    loads = spill if loads is None else loads
    smem_part = f", {smem} bytes smem" if smem else ""
    return (f"ptxas info    : Compiling entry function '{name}' for 'sm_90'\n"
            f"ptxas info    : Function properties for {name}\n"
            f"    {stack} bytes stack frame, {spill} bytes spill stores, {loads} bytes spill loads\n"
            f"ptxas info    : Used {regs} registers, used 1 barriers{smem_part}, 380 bytes cmem[0]\n")


# Kernels with fresh figures each run (C names: nothing to demangle).
k = {name: (rng.randrange(16, 255), rng.choice([0, 0, 4 * rng.randrange(1, 50)]),
            rng.choice([0, 16 * rng.randrange(1, 4096)]))
     for name in ("alpha_kernel", "beta_kernel", "gamma_kernel", "delta_kernel")}
k["spilling_kernel"] = (rng.randrange(64, 255), 4 * rng.randrange(51, 99), 0)
report_a = "".join(entry(n, *v) for n, v in k.items())
# A device function's properties (no Used line), then an entry.
report_a += ("ptxas info    : Function properties for helper_device_fn\n"
             "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
# The second unit reports alpha_kernel again, with the same figures.
report_b = entry("alpha_kernel", *k["alpha_kernel"]) + entry("zeta_kernel", 40, 0, 0)
k["zeta_kernel"] = (40, 0, 0)
paths = []
for i, text in enumerate((report_a, report_b)):
    paths.append(os.path.join(work, f"unit{i}.txt"))
    with open(paths[-1], "w") as f:
        f.write(text)


def run(*args):
    return subprocess.run([sys.executable, table, *args], capture_output=True, text=True)


def rows(stdout):
    got = []
    for line in stdout.splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+)/(\d+)\s+(\d+)\s+(\d+)  (.+?)\s*$", line)
        if m:
            got.append((m.group(6), int(m.group(1)), int(m.group(2)), int(m.group(5))))
    return got


p = run(*paths)
check("exit status 0", p.returncode == 0)
got = rows(p.stdout)
check(f"one row per kernel ({len(got)} rows for {len(k)})", len(got) == len(k))
check("no row for the device function", all(name != "helper_device_fn" for name, *_ in got))
for name, (regs, spill, smem) in k.items():
    mine = [r for r in got if r[0] == name]
    check(f"{name}: {regs} registers, {spill} B spilled, {smem} B smem",
          mine == [(name, regs, spill, smem)])
order = [(-spill, -regs) for _, regs, spill, _ in got]
check("spilling kernels first, then by registers", order == sorted(order))
check("the summary line", f"{len(k)} kernels, {sum(1 for v in k.values() if v[1])} spilling"
      in p.stdout)

p = run("--spills-only", *paths)
check("--spills-only: only the spilling kernels",
      sorted(r[0] for r in rows(p.stdout)) == sorted(n for n, v in k.items() if v[1]))
p = run("--match", "^(beta|zeta)_", *paths)
check("--match: only the matching kernels",
      sorted(r[0] for r in rows(p.stdout)) == ["beta_kernel", "zeta_kernel"])
p = run("--match", "no_such_kernel", *paths)
check("--match with no match: says so, exit 0",
      p.returncode == 0 and "no kernels matching" in p.stdout)
p = run(os.path.join(work, "missing.txt"))
check("a missing report: a failed status naming it",
      p.returncode != 0 and "missing.txt" in p.stderr)

# End to end, where this machine can compile for the GPU.
script = os.path.join(root, "scripts", "kernel-resources.sh")
nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
if tcc and os.access(tcc, os.X_OK) and os.access(nvcc, os.X_OK):
    env = dict(os.environ, TCC=tcc, TCC_CACHE_DIR=os.path.join(work, "cache"))
    p = subprocess.run(["bash", script, os.path.join(root, "samples", "mlp", "mlp.pbtxt"),
                        "--precision", "bf16", "--", "--match", "_kernel"],
                       capture_output=True, text=True, env=env)
    got = rows(p.stdout)
    check(f"kernel-resources.sh on the MLP sample: exit 0 ({p.stderr.strip()[-300:]})",
          p.returncode == 0)
    check(f"kernel-resources.sh: {len(got)} kernels with registers",
          len(got) >= 5 and all(0 < regs <= 255 for _, regs, _, _ in got))
    p = subprocess.run(["bash", script, os.path.join(work, "no_model.pbtxt")],
                       capture_output=True, text=True, env=env)
    check("kernel-resources.sh: a missing model is a clear error",
          p.returncode != 0 and "no_model.pbtxt: no such file" in p.stderr)
else:
    print("skip kernel-resources.sh end to end: no tcc or nvcc here")

if failures:
    print(f"kernel_resources_test: {len(failures)} failed")
    sys.exit(1)
print("kernel_resources_test: PASS")
