#!/usr/bin/python3
"""Here (no GPU), for tests/gpu/prepare_front_door.sh: the models, data and
CPU references of issue 16's GPU check (tests/gpu/front_door.sh).

named/  the regression of tests/e2e/named_arrays_test.py part (a), written
        with `import tcc` (the same graph, data generator and trun flags):
        linreg.pb, x/y .npy train and test arrays, the true weights
        (truth.json) and trun's CPU run of the --target cpu step
        (cpu.jsonl metrics, cpu.log, cpu.safetensors).
gpt*/   tests/torch_import/torch_gpt.py's Gpt imported with tcc.from_torch
        as tests/torch_import/parity_test.py does (AdamW with a no-decay
        group, cross-entropy, tcc.export_torch_weights -> init.safetensors),
        the fortunes as tcc-data char tokens (text_train.bin, text_vocab.json) and the first
        STEPS batches of trun --data-order sequential rebuilt for PyTorch
        (batches.npz), config.json.

usage: front_door_models.py BUILD_BIN OUT_DIR STEPS
Prints the model files to compile, one "NAME PATH" a line.
"""

import json
import os
import subprocess
import sys
import types

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))
sys.path.insert(0, os.path.join(root, "python"))
sys.path.insert(0, os.path.join(root, "tests", "torch_import"))
sys.path.insert(0, os.path.join(root, "tests", "parity"))

import tcc  # noqa: E402
from tcc import ops  # noqa: E402

B = 32
# name -> torch_gpt.Gpt shape; "gpt" is parity_test.py's, "gpt_d64" has
# head size 64 (tcc's flash attention kernels on cuda take 64 and 128).
GPTS = {
    "gpt": dict(context=32, batch=4, layers=2, width=48, heads=4),
    "gpt_d64": dict(context=64, batch=8, layers=2, width=128, heads=2),
}


def run(cmd, **kw):
    cmd = [str(c) for c in cmd]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"front_door_models.py: exit {r.returncode}: {' '.join(cmd)}\n{r.stdout}")
    return r.stdout


def named(bin_dir, out):
    """named_arrays_test.py's regression(), its model and data unchanged."""
    F, N, NOISE = 4, 1024, 0.01
    m = tcc.Model("linreg")
    x = m.input("x", (B, F))
    y = m.input("y", (B, 1))
    w = m.param("w", (F, 1), init=tcc.zeros())
    b = m.param("b", (1,), init=tcc.zeros())
    err = x @ w + b - y
    m.output("pred", x @ w + b)
    m.train(ops.mean(err * err, name="mse"), tcc.SGD(lr=0.1))
    pb = m.save(os.path.join(out, "linreg.pb"))

    rng = np.random.default_rng(1)
    w_true = rng.uniform(-2, 2, size=F)
    b_true = rng.uniform(-1, 1)
    for n, prefix in ((N, "reg_"), (256, "reg_test_")):
        X = rng.normal(size=(n, F))  # float64: trun converts to f32
        Y = X @ w_true + b_true + NOISE * rng.normal(size=n)
        np.save(os.path.join(out, prefix + "x.npy"), X)
        np.save(os.path.join(out, prefix + "y.npy"), Y)
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump({"w": list(w_true), "b": b_true, "noise": NOISE}, f)

    so = os.path.join(out, "linreg_cpu.so")
    run([os.path.join(bin_dir, "tcc"), "compile", pb, "--target", "cpu",
         "--precision", "fp32", "-o", so])
    log = run([os.path.join(bin_dir, "trun"), so, *named_args(out, out, "cpu")],
              cwd=out)
    with open(os.path.join(out, "cpu.log"), "w") as f:
        f.write(log)
    os.remove(so)
    return pb


def named_args(data_dir, out_dir, tag):
    """trun's flags, the test's: 8 epochs, --seed 2 (the shuffling)."""
    d = lambda n: os.path.join(data_dir, n)  # noqa: E731
    return ["--data", f"x={d('reg_x.npy')},y={d('reg_y.npy')}",
            "--test", f"x={d('reg_test_x.npy')},y={d('reg_test_y.npy')}",
            "--epochs", "8", "--log-every", "1", "--seed", "2",
            "--metrics", os.path.join(out_dir, f"{tag}.jsonl"),
            "--save-weights", os.path.join(out_dir, f"{tag}.safetensors")]


def gpt(bin_dir, out, name, steps, text):
    import torch
    import torch.nn.functional as F
    import gpt_parity_test as gp
    from torch_gpt import Gpt
    shape = GPTS[name]
    prefix = os.path.join(out, "text")
    run([os.path.join(bin_dir, "tcc-data"), "tokenize", "--level", "char",
         "--val-fraction", "0.1", "-o", prefix, text])
    with open(prefix + "_vocab.json") as f:
        vocab = json.load(f)["vocab_size"]
    if os.path.exists(prefix + "_val.bin"):
        os.remove(prefix + "_val.bin")
    cfg = types.SimpleNamespace(context=shape["context"], batch=shape["batch"],
                                micro_batches=1)
    tokens = gp.tcc_files.read_shard(prefix + "_train.bin")
    batches = gp.sequential_batches(tokens, cfg, steps)
    np.savez(os.path.join(out, "batches.npz"),
             x=np.stack([x.numpy() for x, _ in batches]),
             y=np.stack([y.numpy() for _, y in batches]))
    torch.manual_seed(0)
    module = Gpt(vocab, cfg.context, layers=shape["layers"], width=shape["width"],
                 heads=shape["heads"])
    decay = [p for p in module.parameters() if p.dim() >= 2]
    no_decay = [p for p in module.parameters() if p.dim() < 2]
    hyper = dict(lr=3e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hyper["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=hyper["lr"], betas=hyper["betas"], eps=hyper["eps"])
    x0, y0 = batches[0]
    model = tcc.from_torch(module, (x0,), loss=F.cross_entropy, target=y0,
                           optimizer=opt)
    pb = model.save(os.path.join(out, name + ".pb"))
    tcc.export_torch_weights(module, os.path.join(out, "init.safetensors"))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(shape, vocab=vocab, steps=steps, **hyper), f)
    return pb


def main():
    bin_dir, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    text = "/usr/share/games/fortunes/fortunes"
    os.makedirs(os.path.join(out, "named"), exist_ok=True)
    print("linreg", named(bin_dir, os.path.join(out, "named")))
    for name in GPTS:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        print(name, gpt(bin_dir, d, name, steps, text))


if __name__ == "__main__":
    main()
