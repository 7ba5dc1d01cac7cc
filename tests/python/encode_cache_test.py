"""trun's encode cache (tcc compile --cache-frozen, tg-cache-frozen):
samples/frozen_encoder/model.py (a frozen encoder feeding a trainable head)
on synthetic named arrays, 3 epochs, with and without the cache.

Checks: the step has the entries encode / train_cached; the per-step losses
with the cache equal those without it, within 10x the distance of a plain
run rounded another way (the step compiled with --cpu-arch none, run on
another OpenBLAS core) + 1.9e-6 (tests/numerics/rounding_envelope.py): the
encode entry and the whole train step are separate code, so even batches
encoded fresh are the same bits only on some CPUs (11 of 12 in epoch 1 with
-march=sandybridge and OpenBLAS's Sandybridge kernels; printed, not
judged); the cache reports hits; --encode-cache DIR writes a file that a
second run loads (every sample a hit from its first step, the same losses);
a corrupt file and another run's file are said and rebuilt; a cache
directory that cannot be written is a one-line error; a model without
frozen parameters gets no entries and trains as before.

usage: encode_cache_test.py TCC TRUN MODEL_PY WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "numerics"))
import rounding_envelope as R  # noqa: E402

tcc_bin, trun_bin, model_py, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(model_py), "..", "..", "python"))


def run(*args, ok=True):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
    if ok and p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, args))}\n{p.stdout}\n{p.stderr}")
    return p


def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")
    print(f"ok: {what}")


run("/usr/bin/python3", model_py, "-o", f"{work}/fe.pbtxt", "--hidden", "96,48", "--batch", "16")
run(tcc_bin, "compile", "--target", "cpu", "--cache-frozen", f"{work}/fe.pbtxt", "-o",
    f"{work}/fe.so", "--dump-dir", f"{work}/dump")
info = run(trun_bin, f"{work}/fe.so", "--info").stdout
check("encode: 1 inputs, 1 outputs" in info and "train_cached: 2 inputs" in info,
      "trun --info lists encode and train_cached")
report = open([f"{work}/dump/{f}" for f in os.listdir(f"{work}/dump")
               if f.endswith("tg-cache-frozen-report.txt")][0]).read()
check("cut: 1 value(s)" in report, "the dump shows the cut")

rng = np.random.default_rng(0)
n = 200  # 12 batches of 16 per epoch, 8 samples left over (a new order each epoch)
np.save(f"{work}/x.npy", rng.normal(size=(n, 784)).astype(np.float32))
np.save(f"{work}/y.npy", rng.integers(0, 10, size=n).astype(np.int32))
data = f"image={work}/x.npy,label={work}/y.npy"


def train(tag, *extra, step="fe.so"):
    out = run(trun_bin, f"{work}/{step}", "--data", data, "--epochs", "3", "--metrics",
              f"{work}/{tag}.jsonl", *extra).stdout
    losses = [r["loss"] for r in map(json.loads, open(f"{work}/{tag}.jsonl"))
              if r.get("kind") == "step"]
    return out, losses


plain_out, plain = train("plain", "--no-encode-cache")
# The plain run rounded another way: how far two honest float32 runs drift
# apart sets the limit of the comparisons below.
run(tcc_bin, "compile", "--target", "cpu", "--cache-frozen", "--cpu-arch", "none",
    f"{work}/fe.pbtxt", "-o", f"{work}/fe_other.so")
env["OPENBLAS_CORETYPE"] = R.other_openblas_core()
_, other = train("plain_other", "--no-encode-cache", step="fe_other.so")
del env["OPENBLAS_CORETYPE"]


def same_losses(got, what):
    failures = R.check_losses(what, got, plain, [other], ref_name="plain", verbose=False)
    check(not failures, what + ("" if not failures else ": " + "; ".join(failures)))

check("encode cache" not in plain_out, "--no-encode-cache trains without the cache")
cached_out, cached = train("cached")
check(len(plain) == len(cached) == 36, "36 steps each")
steps_per_epoch = 12
identical = sum(a == b for a, b in zip(cached[:steps_per_epoch], plain[:steps_per_epoch]))
print(f"epoch 1 (every batch encoded fresh): {identical} of {steps_per_epoch} losses "
      f"bit-identical to the plain run's")
same_losses(cached, "every step's loss as without the cache")
hits_line = [l for l in cached_out.splitlines() if " hits, " in l][0]
hits = int(hits_line.split("encode cache: ")[1].split(" hits")[0])
check(hits > 0, f"the cache was used: {hits_line}")

# A file cache: written by the first run, loaded by the second.
cache_dir = f"{work}/cache"
first_out, first = train("file1", "--encode-cache", cache_dir)
check("samples written to" in first_out and first == cached,
      "--encode-cache DIR: written, same losses as in memory")
second_out, second = train("file2", "--encode-cache", cache_dir)
check("samples loaded from" in second_out, "the second run loads the file")
check(" 0 misses" in second_out, "the second run encodes nothing (all hits)")
same_losses(second, "and trains to the same losses")

# Another run's weights (another seed initializes the frozen encoder
# differently): its file is said to be from other data or weights.
other_out, _ = train("other", "--encode-cache", cache_dir, "--seed", "5")
check("is from other data or weights: ignored" in other_out,
      "a cache file of other weights is ignored and rebuilt")

# Changed values with the header intact (issue 36: zeroed, garbage or
# swapped values were reused): the checksum catches each, rebuilt.
# The directory holds two files (this seed's and --seed 5's); which one
# os.listdir names first depends on the file system, so change both.
paths = sorted(f for f in os.listdir(cache_dir) if f.endswith(".enc"))
for name, change in (("zeroed", lambda b: b[:32] + bytes(len(b) - 40) + b[-8:]),
                     ("garbage", lambda b: b[:200] + bytes((x + 1) % 256 for x in b[200:260])
                      + b[260:]),
                     ("swapped", None)):
    for enc in paths:
        original = open(f"{cache_dir}/{enc}", "rb").read()
        if change is None:  # the values of the first two samples swapped, ids kept
            sample_bytes = int.from_bytes(original[16:24], "little")
            entry = 8 + sample_bytes
            a, b = original[32:32 + entry], original[32 + entry:32 + 2 * entry]
            changed = original[:32] + a[:8] + b[8:] + b[:8] + a[8:] + original[32 + 2 * entry:]
        else:
            changed = change(original)
        with open(f"{cache_dir}/{enc}", "wb") as fh:
            fh.write(changed)
    changed_out, changed_losses = train(f"changed_{name}", "--encode-cache", cache_dir)
    check("its values do not match their checksum" in changed_out and changed_losses == cached,
          f"{name} cache values: caught by the checksum, rebuilt, the same losses")

# A corrupt file: said, rebuilt, same losses.
path = [f for f in os.listdir(cache_dir) if f.endswith(".enc")]
for f in path:
    with open(f"{cache_dir}/{f}", "r+b") as fh:
        fh.truncate(100)
corrupt_out, corrupt = train("corrupt", "--encode-cache", cache_dir)
check("is corrupt" in corrupt_out and corrupt == cached, "a corrupt cache file is rebuilt")

# A limit smaller than the data: the rest is encoded every time, same losses.
limit_out, limit = train("limit", "--encode-cache-limit", "20000")
check("limit of 20000 bytes is reached" in limit_out, "the limit is said")
same_losses(limit, "beyond the limit: same losses")

# A cache directory that cannot be written: one clear line.
open(f"{work}/a_file", "w").close()
bad = run(trun_bin, f"{work}/fe.so", "--data", data, "--steps", "1", "--encode-cache",
          f"{work}/a_file/sub", ok=False)
check(bad.returncode != 0 and "--encode-cache" in bad.stderr and "cannot write there" in bad.stderr
      and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1,
      f"an unwritable cache dir: {bad.stderr.strip()}")

# No frozen parameters: nothing cut, said in the dump; no entries.
run("/usr/bin/python3", "-c", f"""
import sys; sys.path.insert(0, {os.path.dirname(model_py)!r})
import model, tcc
m = model.build(16, (96, 48))
m.freeze(*[p.name for p in m.params()], frozen=False)
m.save({work + '/unfrozen.pbtxt'!r})
""")
run(tcc_bin, "compile", "--target", "cpu", "--cache-frozen", f"{work}/unfrozen.pbtxt", "-o",
    f"{work}/unfrozen.so", "--dump-dir", f"{work}/dump2")
report = open([f"{work}/dump2/{f}" for f in os.listdir(f"{work}/dump2")
               if f.endswith("tg-cache-frozen-report.txt")][0]).read()
check("not cut: no frozen parameters" in report, "no frozen parameters: the dump says why")
check("entries:" not in run(trun_bin, f"{work}/unfrozen.so", "--info").stdout,
      "and the step has no entries")
# --encode-cache that cannot be used is said, not ignored (issue 36).
unused = run(trun_bin, f"{work}/unfrozen.so", "--data", data, "--steps", "1",
             "--encode-cache", f"{work}/cache_unused").stdout
check("note: --encode-cache " + f"{work}/cache_unused is not used: this step has no encode "
      "entry" in unused, "--encode-cache on a step without an encode entry: a note")
off = run(trun_bin, f"{work}/fe.so", "--data", data, "--steps", "1", "--no-encode-cache",
          "--encode-cache", f"{work}/cache_off").stdout
check("is not used: --no-encode-cache trains through the whole step" in off,
      "--encode-cache with --no-encode-cache: a note")
print("PASS")
