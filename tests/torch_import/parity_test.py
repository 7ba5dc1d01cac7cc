#!/usr/bin/python3
"""Training parity of imported PyTorch models: 50 steps of trun from the
PyTorch weights (tcc.export_torch_weights / tcc import --weights, read by
trun --init-from) against the same 50 steps of torch.optim on the same
batches. The reference is PyTorch in float64, and the tolerance comes from
this run's own conditioning (tests/numerics/rounding_envelope.py): float32
PyTorch runs with the rows of every batch in four orders spread around the
float64 one by e(s) at step s, and tcc must stay within 10 e(s) + 1.9e-6 of
it — every step's loss (trun --metrics), and each weight trun saves at the
end (PyTorch names and layouts, norm-wise per parameter); those weights load
into a new module with load_state_dict(strict=True) and give the float64
module's outputs within the same kind of limit.

  --model mlp       a torch.nn MLP (Flatten, Linear, ReLU, Linear, GELU,
                    Linear) from tcc.from_torch, SGD with momentum and
                    weight decay, on .npy float images whose batch is the
                    whole set (trun's shuffling only reorders the rows of
                    a mean);
  --model onnx_mlp  the same MLP and weights through torch.onnx.export and
                    `tcc import`;
  --model gpt       torch_gpt.Gpt (nn.Module GPT-2: tied embedding, tril
                    buffer mask, GELU tanh) from tcc.from_torch, AdamW with
                    a no-decay group, on tcc-data char tokens of a text fed
                    by trun --data-order sequential and rebuilt for PyTorch
                    as tests/parity/gpt_parity_test.py does;
  --model nanogpt   torch_gpt.NanoGpt, nanoGPT's model.py structure
                    (ModuleDict, forward(tokens, targets) returning
                    (logits, loss), F.scaled_dot_product_attention on
                    torch 2.x), from tcc.from_torch without loss=;
  --model llama     bench/models/torch_models.Llama, the model suite's
                    LLaMA-style decoder as PyTorch code writes it: RMSNorm
                    written out (tg-fuse-rms-norm makes it tg.rms_norm),
                    rotary tables as frozen buffers sliced to T with
                    rotate_half (tg.rope, its copies folded into strides),
                    grouped-query attention by repeat_kv, SwiGLU, tied
                    embeddings; AdamW with the no-decay group;
  --model onnx_gpt  the same GPT and weights through torch.onnx.export
                    (do_constant_folding=False) and `tcc import` with the
                    same AdamW recipe given as flags.

usage: parity_test.py --bin-dir BUILD/bin --model NAME [--text FILE]
                      [--work-dir DIR] [--steps N]
"""

import argparse
import copy
import json
import os
import sys
import tempfile
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "parity"))
import harness as H  # noqa: E402
sys.path.insert(0, os.path.join(here, "..", "numerics"))
import rounding_envelope as R  # noqa: E402
import tcc  # noqa: E402
from tcc import safetensors  # noqa: E402

def mlp_module():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(),
                         nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 10))


def mlp_data(n=64):
    """Images (n, 8, 8) and the labels of a random linear teacher."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, 8, 8, generator=g)
    teacher = torch.randn(64, 10, generator=g)
    y = (x.reshape(n, 64) @ teacher).argmax(1)
    return x, y


def mlp_optimizer(module):
    return torch.optim.SGD(module.parameters(), lr=0.05, momentum=0.9,
                           weight_decay=5e-4)


def torch_runs(start, make_optimizer, batches, loss_fn, probe):
    """The references: `batches` ((inputs, target) per step) trained by
    PyTorch from copies of `start` — in float32 with the rows as given and
    in three other orders, and in float64. Each run: its losses, its
    parameters (float64 numpy, by state_dict name, buffers left out) and its
    outputs on the inputs `probe`. Returns (float32 runs, float64 run)."""
    buffers = {n for n, _ in start.named_buffers()}

    def cast(t, dtype, perm):
        if t is None:
            return None
        if perm is not None:
            t = t[torch.from_numpy(perm)]
        return t.to(dtype) if t.is_floating_point() else t

    def one(dtype, perm):
        module = copy.deepcopy(start).to(dtype)
        opt = make_optimizer(module)
        losses = []
        for inputs, target in batches:
            opt.zero_grad()
            out = module(*[cast(t, dtype, perm) for t in inputs])
            loss = loss_fn(out, cast(target, dtype, perm))
            loss.backward()
            opt.step()
            losses.append(float(loss))
        with torch.no_grad():
            out = module(*[cast(t, dtype, None) for t in probe])
            out = (out[0] if isinstance(out, tuple) else out).double().numpy()
        state = {k: v.detach().double().numpy() for k, v in module.state_dict().items()
                 if k not in buffers}
        return dict(losses=losses, state=state, outputs=out)

    rows = len(batches[0][0][0])
    runs = [one(torch.float32, None)]
    runs += [one(torch.float32, p) for p in R.permutations(rows, 3)]
    return runs, one(torch.float64, None)


def trun_train(args, step, data, steps, init, extra=()):
    work = args.work_dir
    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    saved = os.path.join(work, "trained.safetensors")
    H.run([os.path.join(args.bin_dir, "trun"), step, *data, "--steps", steps,
           "--init-from", init, "--metrics", metrics, "--save-weights", saved,
           "--log-every", 0, *extra])
    return H.read_metrics_losses(metrics, steps), safetensors.load_file(saved)


def compare(label, tcc_losses, tcc_weights, runs, exact):
    """Losses and trained weights against the float64 run, within the
    float32 runs' spread (tests/numerics/rounding_envelope.py)."""
    failures = R.check_losses(label, tcc_losses, exact["losses"],
                              [r["losses"] for r in runs], ref32=runs[0]["losses"])
    if not exact["losses"][-1] < exact["losses"][0]:
        failures.append(f"{label}: the loss did not fall")
    # trun saves a state_dict: tied parameters under each of their names.
    if set(tcc_weights) != set(exact["state"]):
        failures.append(f"{label}: trun saved {sorted(tcc_weights)}, PyTorch has "
                        f"{sorted(exact['state'])}")
        return failures
    return failures + R.check_tensors(label, tcc_weights, exact["state"],
                                      [r["state"] for r in runs], what="weight")


def round_trip(label, fresh, tcc_weights, runs, exact, inputs):
    """trun's saved weights load into a new module with
    load_state_dict(strict=True) and give the float64 module's outputs
    (a wrong name or layout is off by O(1), far outside the float32 spread)."""
    module = fresh()
    try:
        module.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in
                                tcc_weights.items()}, strict=True)
    except RuntimeError as e:
        return [f"{label}: load_state_dict(strict=True) of trun's weights: {e}"]
    with torch.no_grad():
        out = module(*inputs)
        out = (out[0] if isinstance(out, tuple) else out).double().numpy()
    return R.check_tensors(label + " strict load", {"outputs": out},
                           {"outputs": exact["outputs"]},
                           [{"outputs": r["outputs"]} for r in runs], what="output")


def check_mlp(args, via_onnx):
    torch.manual_seed(0)
    module = mlp_module()
    start = copy.deepcopy(module)
    x, y = mlp_data()
    work = args.work_dir
    xs, ys = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
    np.save(xs, x.numpy().astype(np.float32))
    np.save(ys, y.numpy().astype(np.int64))
    model_path = os.path.join(work, "mlp.pb")
    init = os.path.join(work, "init.safetensors")
    opt = mlp_optimizer(module)
    if via_onnx:
        onnx_path = os.path.join(work, "mlp.onnx")
        torch.onnx.export(module, x, onnx_path, input_names=["image"],
                          output_names=["logits"])
        g = opt.param_groups[0]
        H.run([os.path.join(args.bin_dir, "tcc"), "import", onnx_path, "-o", model_path,
               "--loss", "cross_entropy", "--optimizer", "sgd", "--lr", g["lr"],
               "--momentum", g["momentum"], "--weight-decay", g["weight_decay"],
               "--weights", init])
    else:
        model = tcc.from_torch(module, (x,), loss=nn.CrossEntropyLoss(), target=y,
                               optimizer=opt)
        model.save(model_path)
        tcc.export_torch_weights(module, init)
    step = os.path.join(work, "mlp.so")
    H.compile_step(args.bin_dir, model_path, step)
    tcc_losses, tcc_weights = trun_train(args, step, ["--data", f"{xs},{ys}"],
                                         args.steps, init)
    batches = [((x,), y)] * args.steps
    runs, exact = torch_runs(start, mlp_optimizer, batches, F.cross_entropy, (x,))
    label = "onnx_mlp" if via_onnx else "mlp"
    return compare(label, tcc_losses, tcc_weights, runs, exact) + \
        round_trip(label, mlp_module, tcc_weights, runs, exact, (x,))


def check_gpt(args, via_onnx=False, nano=False, llama=False):
    import gpt_parity_test as gp  # tests/parity: the sequential batches
    from torch_gpt import Gpt, NanoGpt
    work = args.work_dir
    prefix = os.path.join(work, "text")
    H.run([os.path.join(args.bin_dir, "tcc-data"), "tokenize", "--level", "char",
           "--val-fraction", "0.1", "-o", prefix, args.text])
    with open(prefix + "_vocab.json") as f:
        vocab = json.load(f)["vocab_size"]
    shard = prefix + "_train.bin"
    cfg = types.SimpleNamespace(context=32, batch=4, micro_batches=1)
    tokens = gp.tcc_files.read_shard(shard)
    batches = gp.sequential_batches(tokens, cfg, args.steps)
    torch.manual_seed(0)
    if llama:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "bench", "models"))
        from torch_models import Llama

        def make(vocab, context, layers, width, heads):
            return Llama(vocab, context, layers, width, heads, kv_heads=2, hidden=96)
    else:
        make = NanoGpt if nano else Gpt
    module = make(vocab, cfg.context, layers=2, width=48, heads=4)
    start = copy.deepcopy(module)

    def gpt_optimizer(m):
        trained = [p for p in m.parameters() if p.requires_grad]  # not the rotary tables
        decay = [p for p in trained if p.dim() >= 2]
        no_decay = [p for p in trained if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                  {"params": no_decay, "weight_decay": 0.0}],
                                 lr=1e-3 if llama else 3e-3, betas=(0.9, 0.99), eps=1e-8)

    opt = gpt_optimizer(module)
    x0, y0 = batches[0]
    model_path = os.path.join(work, "gpt.pb")
    init = os.path.join(work, "init.safetensors")
    if via_onnx:
        # Without constant folding the exporter keeps every parameter an
        # initializer (folding bakes wpe's rows and transposed copies in).
        onnx_path = os.path.join(work, "gpt.onnx")
        torch.onnx.export(module, x0, onnx_path, input_names=["tokens"],
                          output_names=["logits"], do_constant_folding=False)
        H.run([os.path.join(args.bin_dir, "tcc"), "import", onnx_path, "-o", model_path,
               "--optimizer", "adamw", "--lr", 3e-3, "--beta1", 0.9, "--beta2", 0.99,
               "--eps", 1e-8, "--weight-decay", 0.1, "--no-decay", "bias,norm",
               "--weights", init])
    elif nano:  # the forward takes the targets and returns (logits, loss)
        model = tcc.from_torch(module, (x0, y0), optimizer=opt)
        model.save(model_path)
        tcc.export_torch_weights(module, init)
    else:
        model = tcc.from_torch(module, (x0,), loss=F.cross_entropy, target=y0,
                               optimizer=opt)
        model.save(model_path)
        tcc.export_torch_weights(module, init)
    step = os.path.join(work, "gpt.so")
    H.compile_step(args.bin_dir, model_path, step)
    tcc_losses, tcc_weights = trun_train(
        args, step, ["--data", shard, "--data-order", "sequential"], args.steps, init)
    probe = (x0,) if not nano else (x0, y0)
    if nano:
        runs, exact = torch_runs(start, gpt_optimizer, [((x, y), None) for x, y in batches],
                                 lambda out, _: out[1], probe)
    else:
        runs, exact = torch_runs(start, gpt_optimizer, [((x,), y) for x, y in batches],
                                 H.cross_entropy, probe)
    # The key bias has an exactly zero gradient (softmax ignores a constant
    # per row): AdamW turns each side's rounding noise into full-size
    # updates of it, so it is left out of the weights comparison (it does
    # not change any output).
    C = 48
    for i in range(0 if llama else 2):
        name = ("transformer." if nano else "") + f"h.{i}.attn.c_attn.bias"
        for state in [tcc_weights, exact["state"]] + [r["state"] for r in runs]:
            state[name] = state[name].copy()
            state[name][C:2 * C] = 0
    if via_onnx:  # the ONNX graph does not know lm_head.weight is wte.weight
        tcc_weights["lm_head.weight"] = tcc_weights["wte.weight"]
    label = "onnx_gpt" if via_onnx else "nanogpt" if nano else "llama" if llama else "gpt"
    failures = round_trip(label, lambda: make(vocab, cfg.context, layers=2, width=48,
                                              heads=4), tcc_weights, runs, exact, probe)
    return failures + compare(label, tcc_losses, tcc_weights, runs, exact)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--model", required=True, choices=("mlp", "onnx_mlp", "gpt", "onnx_gpt", "nanogpt",
                                                         "llama"))
    ap.add_argument("--text", default="/usr/share/games/fortunes/fortunes")
    ap.add_argument("--work-dir")
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="tcc-torch-parity-") as tmp:
        args.work_dir = args.work_dir or tmp
        os.makedirs(args.work_dir, exist_ok=True)
        try:
            if args.model in ("gpt", "onnx_gpt", "nanogpt", "llama"):
                failures = check_gpt(args, via_onnx=args.model == "onnx_gpt",
                                     nano=args.model == "nanogpt", llama=args.model == "llama")
            else:
                failures = check_mlp(args, via_onnx=args.model == "onnx_mlp")
        except (H.Failure, tcc.TccError) as e:
            failures = [str(e)]
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
