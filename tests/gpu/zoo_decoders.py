#!/usr/bin/env python3
"""The zoo's decoders on the GPU in bf16 (issue 35): each decoder row of
tests/torch_import/zoo (nanoGPT, HuggingFace LLaMA both rotary styles,
Qwen2, Meta's complex-rotary LLaMA) imported with tcc.from_torch, compiled
for cuda with --precision bf16, trained STEPS trun steps from the module's
own weights, against the same steps of PyTorch under
torch.autocast(bfloat16) on the GPU (fp32 master weights, the zoo's
torch.optim recipe, the same batch every step as zoo_test.py). Rule
(amp_checks.sh, issue 13's): tcc's loss within 2% of PyTorch's at every
step.

    zoo_decoders.py prepare DIR --bin-dir BUILD/bin     (here: import, compile)
    zoo_decoders.py run DIR [--steps 20]                 (the GPU machine)

prepare writes DIR/ROW/{model.pb, step.so, init.safetensors, *.npy} and
DIR/bin/trun; run needs torch with CUDA and numpy (not tcc), rebuilds each
module from the zoo, loads init.safetensors into it (the weights trun
starts from), prints a table and exits non-zero when a row misses the rule.
"""

import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
zoo_dir = os.path.join(here, "..", "torch_import")
sys.path.insert(0, zoo_dir)

ROWS = ["nanogpt", "hf_llama", "hf_llama_rope_fwd", "qwen2", "meta_llama"]
TOL = 0.02


def cases():
    import importlib
    out = {}
    for family in ("nanogpt", "hf_llama", "qwen2", "meta_llama"):
        for case in importlib.import_module(f"zoo.{family}").make():
            if case.name in ROWS:
                out[case.name] = case
    return out


def prepare(args):
    sys.path.insert(0, os.path.join(here, "..", "..", "python"))
    import tcc
    sys.path.insert(0, zoo_dir)
    import zoo_test
    os.makedirs(os.path.join(args.dir, "bin"), exist_ok=True)
    subprocess.run(["cp", os.path.join(args.bin_dir, "trun"), os.path.join(args.dir, "bin")],
                   check=True)
    for name, case in cases().items():
        work = os.path.join(args.dir, name)
        os.makedirs(work, exist_ok=True)
        start = {k: v.clone() for k, v in case.module.state_dict().items()}
        model = tcc.from_torch(case.module, case.inputs, loss=case.loss, target=case.target,
                               optimizer=case.optimizer(case.module))
        model.save(os.path.join(work, "model.pb"))
        subprocess.run([os.path.join(args.bin_dir, "tcc"), "compile", "--target", "cuda",
                        "--arch", args.arch, "--precision", "bf16",
                        os.path.join(work, "model.pb"), "-o", os.path.join(work, "step.so")],
                       check=True)
        case.module.load_state_dict(start)
        tcc.export_torch_weights(case.module, os.path.join(work, "init.safetensors"))
        names = [i.name for i in model.proto().inputs]
        tensors = list(case.inputs) + ([case.target] if case.target is not None else [])
        data = zoo_test.save_arrays(work, names, tensors)
        with open(os.path.join(work, "data.txt"), "w") as f:
            f.write(data.replace(work + "/", ""))
        print(f"{name}: prepared ({', '.join(names)})")


def read_safetensors(path):
    """{name: tensor} of a safetensors file (the format is a length, a JSON
    header and the raw data; no package needed)."""
    kinds = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        a, b = d["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=kinds[d["dtype"]])
                                     .reshape(d["shape"]).copy())
    return out


def trun_losses(args, name, work):
    metrics = os.path.join(work, "tcc.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    data = ",".join(f"{kv.split('=')[0]}={work}/{kv.split('=')[1]}"
                    for kv in open(os.path.join(work, "data.txt")).read().strip().split(","))
    r = subprocess.run([os.path.join(args.dir, "bin", "trun"), os.path.join(work, "step.so"),
                        "--data", data, "--steps", str(args.steps), "--init-from",
                        os.path.join(work, "init.safetensors"), "--metrics", metrics,
                        "--log-every", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=300)
    with open(os.path.join(work, "trun.log"), "w") as f:
        f.write(r.stdout)
    if r.returncode:
        raise RuntimeError(f"trun exit {r.returncode}: {r.stdout.strip().splitlines()[-1:]}")
    losses = {}
    for line in open(metrics):
        rec = json.loads(line)
        if rec.get("kind") == "step":
            losses[rec["step"]] = rec["loss"]
    return [losses[s] for s in range(1, args.steps + 1)]


def torch_losses(case, init, steps):
    module = case.module
    state = module.state_dict()
    loaded = {k: v for k, v in init.items() if k in state}
    missing = [k for k, p in module.named_parameters() if k not in loaded]
    if missing:
        raise RuntimeError(f"init.safetensors lacks parameters {missing[:3]}")
    module.load_state_dict(loaded, strict=False)
    module = module.cuda().train()
    # Plain tensor attributes (Meta's freqs_cis, moved to the device in its
    # forward upstream) follow the module.
    for m in module.modules():
        for k, v in list(vars(m).items()):
            if isinstance(v, torch.Tensor):
                setattr(m, k, v.cuda())
    opt = case.optimizer(module)
    inputs = [t.cuda() for t in case.inputs]
    target = case.target.cuda() if case.target is not None else None
    out = []
    for _ in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = case.torch_loss(module(*inputs), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        out.append(float(loss.detach()))
    return out


def run(args):
    rows, failures = [], []
    all_cases = cases()
    for name in ROWS:
        work = os.path.join(args.dir, name)
        try:
            got = trun_losses(args, name, work)
            ref = torch_losses(all_cases[name], read_safetensors(
                os.path.join(work, "init.safetensors")), args.steps)
        except Exception as e:  # noqa: BLE001 - a failed row, the others still run
            rows.append((name, None, None, None, f"failed: {e}"))
            failures.append(f"{name}: {e}")
            continue
        rel = [abs(a - b) / abs(b) for a, b in zip(got, ref)]
        worst = max(range(len(rel)), key=lambda i: rel[i])
        ok = rel[worst] <= TOL
        rows.append((name, ref[-1], got[-1], (worst + 1, rel[worst]), "pass" if ok else "FAIL"))
        if not ok:
            failures.append(f"{name}: step {worst + 1} differs by {rel[worst]:.3%} (> 2%)")
    print(f"\n| row | torch autocast bf16, last loss | tcc bf16, last loss | largest "
          f"difference (step) over {args.steps} | within 2% |")
    print("|---|---|---|---|---|")
    for name, ref, got, worst, result in rows:
        if ref is None:
            print(f"| {name} | — | — | — | {result} |")
        else:
            print(f"| {name} | {ref:.4f} | {got:.4f} | {worst[1]:.2%} ({worst[0]}) | {result} |")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["prepare", "run"])
    ap.add_argument("dir")
    ap.add_argument("--bin-dir")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    if args.command == "prepare":
        if not args.bin_dir:
            ap.error("prepare needs --bin-dir")
        prepare(args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
