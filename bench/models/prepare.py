#!/usr/bin/env python3
"""Imports and compiles the models of bench/models with tcc, one folder per
model under OUT (prepare.sh for the GPU, cpu.sh for the CPU call it):

  OUT/NAME/meta.json    what the model is: config, kind, items per step,
                        parameter count, optimizer, import and compile times
  OUT/NAME/model.pb     tcc.from_torch(module, example batch,
                        loss=F.cross_entropy, optimizer=the Spec's,
                        grad_clip=the Spec's)
  OUT/NAME/step.so      tcc compile --target T [--arch A] --precision P
  OUT/NAME/info.txt     trun step.so --info (workspace, memory by precision)
  OUT/NAME/reports/     the compile's *-report.txt (attention fusion, rope,
                        AMP, conv layout, ...), from --dump-dir
  OUT/NAME/compile.log  tcc's output
  OUT/NAME/error.txt    only when the import or the compile failed: the
                        stage and the exact error; the other models go on

    prepare.py --config gpu|cpu --target cuda|cpu OUT [--models a,b]
               [--precision P] [--arch sm_90] [--bin DIR] [--timeout S]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(root, "python"))
sys.path.insert(0, here)

import torch.nn.functional as F  # noqa: E402

import tcc  # noqa: E402
import torch_models as M  # noqa: E402


def describe_optimizer(opt):
    g = opt.param_groups[0]
    keys = ("lr", "momentum", "betas", "eps", "weight_decay")
    d = {k: g[k] for k in keys if k in g}
    d["weight_decay"] = max(float(x.get("weight_decay", 0.0)) for x in opt.param_groups)
    return {"type": type(opt).__name__, **d}


def tcc_version(bin_dir):
    """The tree's commit (with -dirty for uncommitted changes) and the tcc
    binary's build time: the binary may be older than the tree."""
    r = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    mtime = os.path.getmtime(os.path.join(bin_dir, "tcc"))
    return dict(tree=r.stdout.strip() or "unknown",
                tcc_built=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(mtime)))


def fail(d, stage, msg):
    with open(os.path.join(d, "error.txt"), "w") as f:
        f.write(f"{stage}: {msg.rstrip()}\n")
    lines = msg.strip().splitlines() or [""]
    said = next((ln for ln in lines if "error" in ln.lower()), lines[-1])
    print(f"  {stage} FAILED: {said[:300]}", flush=True)


def write_meta(d, meta):
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def prepare(spec, a, d):
    cfg = spec.config(a.config)
    module = M.build(spec, cfg)
    opt = spec.optimizer(module)
    meta = dict(name=spec.name, title=spec.title, kind=spec.kind, config=cfg,
                which=a.config, target=a.target, precision=a.precision,
                items_per_step=spec.items_per_step(cfg),
                unit="tokens" if spec.kind == "tokens" else "images",
                params=M.param_count(module), optimizer=describe_optimizer(opt),
                grad_clip=spec.grad_clip, channels_last=spec.channels_last,
                tcc=tcc_version(a.bin))
    write_meta(d, meta)

    # Import: the example batch fixes every shape, the batch size too.
    inputs, target = spec.example(cfg)
    t0 = time.perf_counter()
    try:
        model = tcc.from_torch(module, inputs, loss=F.cross_entropy, target=target,
                               optimizer=opt, grad_clip=spec.grad_clip)
        model.save(os.path.join(d, "model.pb"))
    except Exception as e:  # the exact message, whatever raised it
        fail(d, "import", f"{type(e).__name__}: {e}\n\n{traceback.format_exc()}")
        return False
    meta["import_s"] = round(time.perf_counter() - t0, 2)
    write_meta(d, meta)

    # Compile, keeping only the decision reports of the dumps (the MLIR after
    # every pass is tens of MB for the big models).
    cmd = [os.path.join(a.bin, "tcc"), "compile", "--target", a.target,
           "--precision", a.precision, os.path.join(d, "model.pb"),
           "-o", os.path.join(d, "step.so")]
    if a.target == "cuda":
        cmd[4:4] = ["--arch", a.arch]
    meta["compile_cmd"] = "tcc " + " ".join(cmd[1:]).replace(d + "/", "")
    with tempfile.TemporaryDirectory(prefix="tcc-dump-") as dump:
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd + ["--dump-dir", dump], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=a.timeout)
            out, rc = r.stdout, r.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
                else (e.stdout or "")
            out, rc = out + f"\ntimeout after {a.timeout} s", "timeout"
        meta["compile_s"] = round(time.perf_counter() - t0, 1)
        with open(os.path.join(d, "compile.log"), "w") as f:
            f.write(out)
        reports = sorted(glob.glob(os.path.join(dump, "*-report.txt")))
        if reports:
            os.makedirs(os.path.join(d, "reports"), exist_ok=True)
            for path in reports:
                shutil.copy(path, os.path.join(d, "reports"))
    write_meta(d, meta)
    if rc != 0:
        tail = "\n".join(out.strip().splitlines()[-30:])
        fail(d, "compile", f"{meta['compile_cmd']}: exit {rc}\n{tail}")
        return False

    # trun --info reads the step's descriptor (no GPU needed): the planned
    # workspace and the memory by precision for the table.
    r = subprocess.run([os.path.join(a.bin, "trun"), os.path.join(d, "step.so"), "--info"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(os.path.join(d, "info.txt"), "w") as f:
        f.write(r.stdout)
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--config", choices=("gpu", "cpu"), required=True)
    p.add_argument("--target", choices=("cuda", "cpu"), required=True)
    p.add_argument("--precision", default=None,
                   help="default: bf16 for cuda, fp32 for cpu")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--models", default=",".join(M.MODELS))
    p.add_argument("--bin", default=os.path.join(root, "build", "bin"))
    p.add_argument("--timeout", type=int, default=1800, help="per compile (s)")
    a = p.parse_args()
    a.precision = a.precision or ("bf16" if a.target == "cuda" else "fp32")
    names = [n for n in a.models.split(",") if n]
    unknown = [n for n in names if n not in M.MODELS]
    if unknown:
        sys.exit(f"prepare.py: unknown models {unknown}; known: {list(M.MODELS)}")
    ok = []
    for name in names:
        d = os.path.join(a.out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        print(f"{name}: {a.config} config, tcc compile --target {a.target} "
              f"--precision {a.precision}", flush=True)
        t0 = time.perf_counter()
        try:
            good = prepare(M.MODELS[name], a, d)
        except Exception as e:  # a bug here must not stop the other models
            fail(d, "prepare", f"{type(e).__name__}: {e}\n\n{traceback.format_exc()}")
            good = False
        print(f"  {'ok' if good else 'failed'} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
        if good:
            ok.append(name)
    print(f"prepared {len(ok)} of {len(names)}: {' '.join(ok) or '-'}")


if __name__ == "__main__":
    main()
