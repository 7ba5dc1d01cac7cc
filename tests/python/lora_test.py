"""Frozen parameters and LoRA from the Python front end (tcc.lora).

A small GPT (tcc.models.gpt) with rank-8 adapters on the attention
projections, compiled --target cpu, trained 30 steps on characters of the
fortunes file: trun --info shows optimizer state (AdamW: 2 x) and gradients
(--emit-gradients) of the adapters alone; at step 0 its validation loss is
the base model's (B = 0, same seeds); after training the validation loss is
lower, the frozen base is bit-identical, and tcc.lora.merge's file (base +
scale A B, no adapters) loaded into the model without adapters gives the
same validation loss. Plus the errors: freezing an unknown parameter, a
LoRA target that matches nothing or no Linear, rank <= 0.

usage: lora_test.py TCC TRUN TCC_DATA WORKDIR
"""

import json
import os
import re
import subprocess
import sys

import numpy as np

import tcc
from tcc import nn, safetensors

TCC, TRUN, TCC_DATA, WORK = sys.argv[1:5]
TEXT = "/usr/share/games/fortunes/fortunes"
TARGETS = ["attn.c_attn", "attn.c_proj"]


def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout + r.stderr


def expect_error(fn, *needles):
    try:
        fn()
    except tcc.TccError as e:
        msg = str(e)
        missing = [n for n in needles if n not in msg]
        if missing:
            sys.exit(f"FAIL: error {msg!r} does not name {missing}")
        print(f"ok error: {msg}")
        return
    sys.exit(f"FAIL: no error (expected one naming {needles})")


def check(ok, what):
    if not ok:
        sys.exit(f"FAIL: {what}")
    print(f"ok: {what}")


def errors():
    m = tcc.models.gpt(vocab=32, context=8, layers=1, width=16, heads=2,
                       batch=2)
    expect_error(lambda: m.freeze("h.0.attn.c_atn.weight"),
                 "'h.0.attn.c_atn.weight'", "'gpt'",
                 "did you mean 'h.0.attn.c_attn.weight'")
    m.freeze("wte", m["wpe"])
    frozen = {p.name for p in m.params() if p.frozen}
    check(frozen == {"wte", "wpe"}, "Model.freeze marks exactly wte, wpe")

    def net():
        return tcc.models.GPT(vocab=32, context=8, layers=1, width=16, heads=2)
    expect_error(lambda: tcc.lora.apply(net(), ["attn.q_proj"]),
                 "'attn.q_proj'", "matches no module", "h.0.attn.c_attn")
    expect_error(lambda: tcc.lora.apply(net(), ["ln_1"]),
                 "'h.0.ln_1'", "LayerNorm")
    expect_error(lambda: tcc.lora.apply(net(), TARGETS, rank=0), "rank", "0")
    expect_error(lambda: tcc.lora.apply(net(), TARGETS, rank=-2), "rank")
    n = net()
    tcc.lora.apply(n, TARGETS)
    expect_error(lambda: tcc.lora.apply(n, ["attn.c_attn"]),
                 "adapter already")

    # Module.freeze / requires_grad_ before and after the build.
    mlp = tcc.models.MLP(8, (4,), 3)
    mlp.fc1.freeze()
    mm = tcc.Model("mlp")
    mlp(mm.input("image", (2, 8)))
    check({p.name for p in mm.params() if p.frozen} == {"fc1.weight",
                                                        "fc1.bias"},
          "Module.freeze before the build freezes its parameters")
    mlp.fc2.requires_grad_(False)
    mlp.fc1.requires_grad_(True)
    check({p.name for p in mm.params() if p.frozen} == {"fc2.weight",
                                                        "fc2.bias"},
          "requires_grad_ after the build updates the model")


def linear_merge():
    """nn.Linear bases (torch perm [1, 0]): merge follows PEFT's formula in
    PyTorch's layouts, W (out, in) + scale B (out, r) @ A (r, in)."""
    net = tcc.models.MLP(6, (5,), 3)
    tcc.lora.apply(net, ["fc1", "fc2"], rank=2, alpha=3)
    m = tcc.Model("mlp")
    logits = net(m.input("image", (4, 6)))
    m.train(tcc.ops.mean(tcc.ops.softmax_cross_entropy(
        logits, m.input("label", (4,), "i32"))), tcc.SGD(0.1))
    check({p.name for p in m.params() if not p.frozen} == {
        f"fc{i}.lora_{ab}.weight" for i in (1, 2) for ab in "AB"},
        "MLP: only the adapters trainable")
    rng = np.random.default_rng(0)
    shapes = {"fc1.weight": (5, 6), "fc1.bias": (5,), "fc2.weight": (3, 5),
              "fc2.bias": (3,), "fc1.lora_A.weight": (2, 6),
              "fc1.lora_B.weight": (5, 2), "fc2.lora_A.weight": (2, 5),
              "fc2.lora_B.weight": (3, 2)}
    w = {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()}
    src = os.path.join(WORK, "mlp_lora.safetensors")
    out = os.path.join(WORK, "mlp_merged.safetensors")
    safetensors.save_file(w, src, metadata={"format": "pt", "layout": "torch"})
    tcc.lora.merge(src, m, out)
    merged = safetensors.load_file(out)
    err = max(float(np.abs(merged[f"fc{i}.weight"] - (
        w[f"fc{i}.weight"].astype(np.float64) + 1.5 *
        w[f"fc{i}.lora_B.weight"].astype(np.float64) @
        w[f"fc{i}.lora_A.weight"])).max()) for i in (1, 2))
    check(err < 1e-6 and sorted(merged) == sorted(
        k for k in w if ".lora_" not in k),
        f"nn.Linear merge = W + 1.5 B A in PyTorch's layout (worst {err:.1e})")


def info_sections(text):
    """name -> bytes for the 'params:' and 'optimizer state:' lists."""
    sections, current = {}, None
    for line in text.splitlines():
        head = re.match(r"^(params|optimizer state): \d+$", line)
        if head:
            current = sections.setdefault(head.group(1), {})
        elif current is not None and line.startswith("  "):
            f = line.split()
            current[f[0]] = (int(f[f.index("bytes") - 1]), "trainable" in f)
        else:
            current = None
    return sections


def memory_row(text, row):
    m = re.search(rf"^  {row}\s.*?([\d.]+)$", text, re.MULTILINE)
    return float(m.group(1)) if m else None


def val_loss(out):
    return float(re.search(r"val loss: ([\d.]+)", out).group(1))


def main():
    os.makedirs(WORK, exist_ok=True)
    errors()
    linear_merge()

    prefix = os.path.join(WORK, "fortunes")
    run(TCC_DATA, "tokenize", "--level", "char", "-o", prefix, TEXT)
    vocab = json.load(open(prefix + "_vocab.json"))["vocab_size"]
    train, val = prefix + "_train.bin", prefix + "_val.bin"
    opts = dict(vocab=vocab, context=32, layers=2, width=32, heads=2, batch=8)
    lora_model = tcc.models.gpt(**opts, lora=tcc.lora.LoRA(8, 16, TARGETS))
    base_model = tcc.models.gpt(**opts)
    seeds = {p.name: p.init.seed for p in base_model.params()}
    check(all(seeds[p.name] == p.init.seed for p in lora_model.params()
              if p.name in seeds), "base parameters keep their seeds")
    paths = {}
    for name, m in (("lora", lora_model), ("base", base_model)):
        paths[name] = os.path.join(WORK, f"{name}.so")
        m.save(os.path.join(WORK, f"{name}.pb"))
        run(TCC, "compile", "--target", "cpu", os.path.join(WORK, f"{name}.pb"),
            "-o", paths[name])
    grads_so = os.path.join(WORK, "lora_grads.so")
    run(TCC, "compile", "--target", "cpu", "--emit-gradients",
        os.path.join(WORK, "lora.pb"), "-o", grads_so)

    # Memory: optimizer state (AdamW m, v) and gradients of the adapters only.
    info = run(TRUN, paths["lora"], "--info")
    s = info_sections(info)
    adapters = {k: b for k, (b, trainable) in s["params"].items() if trainable}
    adapter_names = {k for k in s["params"] if ".lora_" in k}
    check(set(adapters) == adapter_names and len(adapters) == 8,
          f"trainable parameters are the 8 adapters ({sum(adapters.values())} "
          "bytes)")
    opt_bytes = sum(b for b, _ in s["optimizer state"].values())
    check(opt_bytes == 2 * sum(adapters.values()),
          f"optimizer state {opt_bytes} bytes = 2 x adapters")
    check(all(k.rsplit(".", 1)[0] in adapters for k in s["optimizer state"]),
          "every optimizer state tensor belongs to an adapter")
    mib = memory_row(info, "optimizer state")
    check(abs(mib - opt_bytes / 2**20) < 1e-4,
          f"memory table: optimizer state {mib} MiB")
    grads = memory_row(run(TRUN, grads_so, "--info"), "gradients")
    check(abs(grads - sum(adapters.values()) / 2**20) < 1e-4,
          f"memory table (--emit-gradients): gradients {grads} MiB = adapters")
    # The normal step: gradients are workspace temporaries, counted by the
    # compiler (the descriptor's train_gradient_bytes).
    grads = memory_row(info, "gradients")
    check(abs(grads - sum(adapters.values()) / 2**20) < 1e-4,
          f"memory table: gradients {grads} MiB = adapters")
    full_info = run(TRUN, paths["base"], "--info")
    full_opt = sum(b for b, _ in info_sections(full_info)["optimizer state"]
                   .values())
    full_grads = memory_row(full_info, "gradients")
    check(abs(full_grads - sum(b for b, _ in info_sections(full_info)["params"]
                               .values()) / 2**20) < 1e-4,
          f"without LoRA: gradients {full_grads} MiB = every parameter")
    print(f"  (without LoRA: optimizer state {full_opt} bytes)")
    # Autodiff drops what only the frozen weights' gradients needed.
    act, full_act = (memory_row(t, "activations at peak")
                     for t in (info, full_info))
    check(act < full_act, f"activations at peak {act} MiB < {full_act} MiB "
          "of the model without LoRA, all trainable")
    # No weight-gradient matmuls for the frozen base: train flops ~2x eval
    # (forward + input gradients) instead of ~3x.
    ratio, full_ratio = (
        float(re.search(r"train ([\d.e+]+)", t).group(1)) /
        float(re.search(r"eval ([\d.e+]+)", t).group(1))
        for t in (info, full_info))
    check(ratio < full_ratio - 0.5, f"train/eval flops {ratio:.2f} "
          f"(all trainable: {full_ratio:.2f})")

    # Step 0: the adapted model is the base model (B = 0).
    w0 = os.path.join(WORK, "w0.safetensors")
    v0 = val_loss(run(TRUN, paths["lora"], "--val", val, "--steps", "0",
                      "--save-weights", w0))
    vb = val_loss(run(TRUN, paths["base"], "--val", val, "--steps", "0"))
    check(v0 == vb, f"step 0: adapted val loss {v0} = base's {vb}")

    w30 = os.path.join(WORK, "w30.safetensors")
    ckpt = os.path.join(WORK, "ckpt")
    out = run(TRUN, paths["lora"], "--data", train, "--val", val, "--steps",
              "30", "--lr", "0.01", "--save-weights", w30, "--ckpt-dir", ckpt)
    v30 = val_loss(out)
    check(v30 < v0 - 0.05, f"30 steps: val loss {v0} -> {v30}")
    before, after = safetensors.load_file(w0), safetensors.load_file(w30)
    base_keys = [k for k in before if ".lora_" not in k]
    check(all(np.array_equal(before[k], after[k]) for k in base_keys),
          f"{len(base_keys)} frozen base tensors unchanged")
    check(all(np.abs(after[k]).max() > 0 for k in after
              if k.endswith("lora_B.weight")), "every lora_B trained")

    # Merged export: W + (alpha / r) A B in PyTorch's layouts (Conv1D: W as
    # (in, out); lora_A.weight (r, in), lora_B.weight (out, r)).
    merged_path = os.path.join(WORK, "merged.safetensors")
    scales = tcc.lora.merge(w30, os.path.join(WORK, "lora.pb"), merged_path)
    merged = safetensors.load_file(merged_path)
    check(sorted(merged) == sorted(base_keys), "merged file: base keys only")
    worst = smallest = 0.0
    for i, path in enumerate(scales):
        A = after[f"{path}.lora_A.weight"].astype(np.float64)
        B = after[f"{path}.lora_B.weight"].astype(np.float64)
        delta = (16 / 8) * (A.T @ B.T)
        ref = after[f"{path}.weight"] + delta
        worst = max(worst, float(np.abs(merged[f"{path}.weight"] - ref).max()))
        big = float(np.abs(delta).max())
        smallest = big if i == 0 else min(smallest, big)
    check(worst < 1e-6 and smallest > 1e-3 and set(scales.values()) == {2.0},
          f"merged = base + 2 A B ({len(scales)} layers, worst {worst:.1e}, "
          f"each |2 A B| up to >= {smallest:.1e})")
    # A checkpoint holds the adapters (tcc's layout): the same merge.
    step_dir = sorted(d for d in os.listdir(ckpt) if d.startswith("step_"))[-1]
    from_ckpt = os.path.join(WORK, "merged_ckpt.safetensors")
    tcc.lora.merge(os.path.join(ckpt, step_dir, "model.safetensors"),
                   lora_model, from_ckpt)
    c = safetensors.load_file(from_ckpt)
    opt = safetensors.load_file(os.path.join(ckpt, step_dir,
                                             "optimizer.safetensors"))
    check(sorted(opt) == sorted(f"{k}.adam_{x}" for k in adapters
                                for x in "mv"),
          f"checkpoint optimizer state: {len(opt)} tensors, adapters' m, v")
    check(sorted(c) == sorted(merged) and all(
        np.array_equal(c[k], merged[k]) for k in c),
        f"merging checkpoint {step_dir}/model.safetensors gives the same file")
    check(all(np.array_equal(merged[k], after[k]) for k in base_keys
              if k.rsplit(".", 1)[0] not in scales
              or not k.endswith(".weight")), "other tensors as trained")
    # The same from the shell; a weights file of no adapters: one line.
    cli_out = os.path.join(WORK, "merged_cli.safetensors")
    run(sys.executable, "-m", "tcc.lora", "merge", w30,
        os.path.join(WORK, "lora.pb"), cli_out)
    check(open(cli_out, "rb").read() == open(merged_path, "rb").read(),
          "python3 -m tcc.lora merge writes the same file")
    r = subprocess.run([sys.executable, "-m", "tcc.lora", "merge", w30,
                        os.path.join(WORK, "base.pb"), cli_out],
                       capture_output=True, text=True)
    check(r.returncode == 1 and r.stderr.count("\n") == 1
          and "has no LoRA adapters" in r.stderr,
          f"merge with a model without adapters: {r.stderr.strip()}")
    vm = val_loss(run(TRUN, paths["base"], "--val", val, "--steps", "0",
                      "--init-from", merged_path))
    check(abs(vm - v30) <= 2e-6,
          f"model without adapters + merged weights: val loss {vm} = {v30}")
    # Fine-tuning a pretrained base: the merged weights as the base, plus the
    # step-0 adapters (B = 0) -> the adapted model starts at the base's loss.
    init = os.path.join(WORK, "init.safetensors")
    n = tcc.lora.add_adapters(merged_path, w0, init)
    vi = val_loss(run(TRUN, paths["lora"], "--val", val, "--steps", "0",
                      "--init-from", init))
    check(n == 8 and vi == vm, f"base + {n} fresh adapters: val loss {vi} = "
          f"the base's {vm}")
    expect_error(lambda: tcc.lora.add_adapters(w30, w0, init),
                 "holds adapter tensor")
    expect_error(lambda: tcc.lora.add_adapters(merged_path, merged_path, init),
                 "has no adapter tensors")
    print("PASS")


if __name__ == "__main__":
    main()
