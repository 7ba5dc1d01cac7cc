#!/usr/bin/env python3
"""Issue 16 on a GPU: compares trun's runs (tests/gpu/front_door.sh) with
their references and prints a table last; exit 1 if a check failed.

named   the named-arrays regression's per-step losses on the GPU against
        the --target cpu step's (prepare_front_door.sh ran it here), the
        test loss, and the learned weights against the true ones.
gpt*    the from_torch GPT, trun from PyTorch's initial weights against the
        same steps of torch.optim.AdamW on the same GPU and batches: fp32
        (TF32 off) per-step losses; bf16 against torch.autocast(bfloat16)
        (reported; within 2% at each step is the AMP checks' rule); trun's
        --save-weights file loaded with load_state_dict(strict=True) into a
        new module on the GPU: its logits and weights against the module
        PyTorch trained.

Needs numpy and torch only (not the tcc package: its generated schema does
not travel). usage: front_door_check.py DIR OUT [--device cuda|cpu]
"""

import argparse
import json
import os
import re
import struct
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "torch_import"))

NAMED_RTOL = 1e-4     # run.sh's CPU-vs-GPU limit
GPT_FP32_RTOL = 1e-4  # loss per step, trun fp32 vs PyTorch fp32 on the GPU
WEIGHT_RTOL = 1e-3    # logits from trun's file vs PyTorch's trained module
AMP_RTOL = 2e-2       # reported only (issue 11's rule for bf16)

rows = []      # (check, value, limit, verdict)
failures = []


def row(check, value, limit, ok):
    verdict = "info" if ok is None else "PASS" if ok else "FAIL"
    rows.append((check, value, limit, verdict))
    if ok is False:
        failures.append(check)


def read_safetensors(path):
    """name -> float32 array (F32 or BF16 entries), numpy only."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        if e["dtype"] == "F32":
            arr = np.frombuffer(raw, "<f4")
        elif e["dtype"] == "BF16":
            arr = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: tensor {name} is {e['dtype']}")
        out[name] = arr.reshape(e["shape"]).copy()
    return out


def metrics(path, kind="step"):
    recs = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") == kind:
                recs.append(r)
    return recs


def losses_of(path):
    return {r["step"]: r["loss"] for r in metrics(path)}


def worst_rel(a, b):
    """max over steps of |a-b|/|b| (b the reference) and its step."""
    worst, at = 0.0, 0
    for s in sorted(b):
        if s not in a:
            return float("inf"), s
        r = abs(a[s] - b[s]) / max(abs(b[s]), 1e-30)
        if not r <= worst:  # NaN counts as worst
            worst, at = r, s
    return worst, at


def check_named(d, out):
    truth = json.load(open(os.path.join(d, "named", "truth.json")))
    cpu = losses_of(os.path.join(d, "named", "cpu.jsonl"))
    gpu_path = os.path.join(out, "named_gpu.jsonl")
    if not os.path.exists(gpu_path):
        row("named: trun on the GPU", "no metrics", "-", False)
        return
    gpu = losses_of(gpu_path)
    row("named: steps logged (cpu / gpu)", f"{len(cpu)} / {len(gpu)}", "256 each",
        len(cpu) == len(gpu) == 256)
    w, at = worst_rel(gpu, cpu)
    row("named: loss per step, gpu vs cpu, worst rel", f"{w:.2e} (step {at})",
        f"{NAMED_RTOL:.0e}", w <= NAMED_RTOL)
    first, last = np.mean([gpu[s] for s in range(1, 5)]), np.mean([gpu[s] for s in range(249, 257)])
    row("named: gpu loss falls (mean first 4 -> last 8)", f"{first:.4g} -> {last:.3g}",
        "< 1% of start", bool(last < 0.01 * first))
    tc = metrics(os.path.join(d, "named", "cpu.jsonl"), "eval")
    tg = metrics(gpu_path, "eval")
    if tc and tg:
        a, b = tg[-1]["test_loss"], tc[-1]["test_loss"]
        r = abs(a - b) / abs(b)
        row("named: test loss gpu vs cpu", f"{a:.6g} vs {b:.6g} ({r:.1e} rel)",
            f"{NAMED_RTOL:.0e}", r <= NAMED_RTOL)
    else:
        row("named: test loss", "missing", "-", False)
    got = read_safetensors(os.path.join(out, "named_gpu.safetensors"))
    w_err = np.abs(got["w"].reshape(-1) - np.array(truth["w"])).max()
    b_err = abs(float(got["b"].reshape(-1)[0]) - truth["b"])
    row("named: gpu weights vs true (max abs err w, b)", f"{w_err:.2g}, {b_err:.2g}",
        "0.01", bool(w_err < 0.01 and b_err < 0.01))
    ref = read_safetensors(os.path.join(d, "named", "cpu.safetensors"))
    diff = max(np.abs(got[k] - ref[k]).max() for k in ref)
    row("named: gpu weights vs cpu weights (max abs)", f"{diff:.2g}", "-", None)
    log = open(os.path.join(out, "named_gpu.log")).read()
    ok = re.search(r"^input 'x' f32 \[32, 4\] <- \S+reg_x\.npy \(float64 \(1024, 4\), "
                   r"converted to f32\), 1024 samples$", log, re.M) is not None
    row("named: binding line of x on the GPU run", "found" if ok else "missing", "-", ok)


def torch_run(torch, module, batches, cfg, device, autocast):
    import torch.nn.functional as F
    decay = [p for p in module.parameters() if p.dim() >= 2]
    no_decay = [p for p in module.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=tuple(cfg["betas"]), eps=cfg["eps"])
    losses = {}
    for s, (x, y) in enumerate(batches, 1):
        opt.zero_grad()
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=autocast):
            logits = module(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                   y.reshape(-1))
        loss.backward()
        opt.step()
        losses[s] = float(loss.detach())
    return losses


def check_gpt(name, d, out, device, torch):
    from torch_gpt import Gpt
    g = os.path.join(d, name)
    cfg = json.load(open(os.path.join(g, "config.json")))
    steps = cfg["steps"]
    npz = np.load(os.path.join(g, "batches.npz"))
    batches = [(torch.from_numpy(x).long().to(device), torch.from_numpy(y).long().to(device))
               for x, y in zip(npz["x"], npz["y"])]
    init = {k: torch.from_numpy(v) for k, v in
            read_safetensors(os.path.join(g, "init.safetensors")).items()}

    def fresh():
        m = Gpt(cfg["vocab"], cfg["context"], layers=cfg["layers"], width=cfg["width"],
                heads=cfg["heads"]).to(device)
        return m

    trained, torch_losses = {}, {}
    for prec, autocast in (("fp32", False), ("bf16", True)):
        m = fresh()
        # export_torch_weights writes a tied tensor once (wte.weight, which
        # lm_head.weight is): the only key it may lack.
        missing, unexpected = m.load_state_dict(init, strict=False)
        if unexpected or set(missing) - {"lm_head.weight"} or \
                m.lm_head.weight is not m.wte.weight:
            raise RuntimeError(f"init.safetensors: missing {missing}, unexpected {unexpected}")
        torch_losses[prec] = torch_run(torch, m, batches, cfg, device, autocast)
        trained[prec] = m
        with open(os.path.join(out, f"{name}_torch_{prec}.json"), "w") as f:
            json.dump(torch_losses[prec], f)

    tcc_losses = {}
    for prec in ("fp32", "bf16"):
        path = os.path.join(out, f"{name}_{prec}.jsonl")
        if not os.path.exists(path):
            row(f"{name} {prec}: trun on the GPU", "no metrics", "-", False)
            continue
        tcc_losses[prec] = losses_of(path)
    t0, tn = torch_losses["fp32"][1], torch_losses["fp32"][steps]
    row(f"{name}: PyTorch fp32 loss, step 1 -> {steps}", f"{t0:.4f} -> {tn:.4f}", "falls",
        bool(tn < t0))
    if "fp32" in tcc_losses:
        w, at = worst_rel(tcc_losses["fp32"], torch_losses["fp32"])
        row(f"{name}: trun fp32 vs PyTorch fp32, worst rel/step", f"{w:.2e} (step {at})",
            f"{GPT_FP32_RTOL:.0e}", w <= GPT_FP32_RTOL)
    if "bf16" in tcc_losses:
        w, at = worst_rel(tcc_losses["bf16"], torch_losses["bf16"])
        row(f"{name}: trun bf16 vs torch autocast bf16, worst rel", f"{w:.2e} (step {at})",
            f"{AMP_RTOL:.0e} (info)", None)
        w2, at2 = worst_rel(tcc_losses["bf16"], torch_losses["fp32"])
        w3, at3 = worst_rel(torch_losses["bf16"], torch_losses["fp32"])
        row(f"{name}: bf16 vs PyTorch fp32, worst rel (trun / torch)",
            f"{w2:.2e} / {w3:.2e}", "info", None)

    # trun's saved weights into a new module, strict, on the device.
    C = cfg["width"]
    x0 = batches[0][0]
    for prec in ("fp32", "bf16"):
        path = os.path.join(out, f"{name}_{prec}.safetensors")
        if not os.path.exists(path):
            row(f"{name} {prec}: --save-weights file", "missing", "-", False)
            continue
        saved = read_safetensors(path)
        m = fresh()
        try:
            m.load_state_dict({k: torch.from_numpy(v) for k, v in saved.items()}, strict=True)
        except RuntimeError as e:
            msg = " ".join(str(e).split())[:200]
            row(f"{name} {prec}: load_state_dict(strict=True) of trun's file", msg, "-", False)
            continue
        ref = trained[prec]
        with torch.no_grad():
            a, b = m(x0).double(), ref(x0).double()
        r = float((a - b).norm() / b.norm())
        # The key bias has a zero gradient: AdamW turns rounding noise into
        # full-size updates of it on each side (parity_test.py leaves it out).
        worst_w, worst_name = 0.0, ""
        state = {k: v for k, v in ref.state_dict().items()}
        for k, v in saved.items():
            p = state[k].detach().double().cpu().numpy()
            q = v.astype(np.float64)
            if k.endswith("attn.c_attn.bias"):
                p, q = p.copy(), q.copy()
                p[C:2 * C] = 0
                q[C:2 * C] = 0
            rel = np.linalg.norm(q - p) / max(np.linalg.norm(p), 1e-30)
            if not rel <= worst_w:
                worst_w, worst_name = rel, k
        ok = None if prec == "bf16" else bool(r <= WEIGHT_RTOL)
        row(f"{name} {prec}: trun's weights, strict load; logits vs PyTorch's",
            f"loaded; {r:.2e} rel", f"{WEIGHT_RTOL:.0e}" if prec == "fp32" else "info", ok)
        # Reported only: AdamW's normalised updates magnify rounding in the
        # small early q/k gradients (seen on the CPU too, 5e-3 at gpt_d64).
        row(f"{name} {prec}: worst weight rel (norm-wise)", f"{worst_w:.2e} ({worst_name})",
            "info", None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("out")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default="gpt,gpt_d64")
    args = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = args.device
    what = (torch.cuda.get_device_name() if dev == "cuda" else "cpu")
    print(f"torch {torch.__version__} on {what}")
    try:
        check_named(args.dir, args.out)
    except Exception as e:  # a broken run is a finding, the table still prints
        row("named: checker", " ".join(f"{type(e).__name__}: {e}".split()), "-", False)
    for name in args.models.split(","):
        try:
            check_gpt(name, args.dir, args.out, dev, torch)
        except Exception as e:
            row(f"{name}: checker", " ".join(f"{type(e).__name__}: {e}".split()), "-", False)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump([dict(zip(("check", "value", "limit", "verdict"), r)) for r in rows],
                  f, indent=1)
    w = max(len(r[0]) for r in rows)
    v = max(len(r[1]) for r in rows)
    print(f"\n{'check':{w}}  {'value':{v}}  limit      verdict")
    for c, val, lim, verdict in rows:
        print(f"{c:{w}}  {val:{v}}  {lim:10} {verdict}")
    print("FAIL: " + "; ".join(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
