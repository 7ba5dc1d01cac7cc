#!/usr/bin/python3
"""Training parity of a PyTorch CNN with batch norm (issue 17): conv,
BatchNorm2d, ReLU, max pool, conv, BatchNorm2d, ReLU, max pool, BatchNorm1d
on the flattened features, Linear, imported with tcc.from_torch and
trained 50 steps by trun (SGD with momentum, from the PyTorch weights and
running statistics: tcc.export_torch_weights, trun --init-from) against 50
steps of the same module in PyTorch's train mode on the same batch (the
whole set: trun's shuffling only reorders the rows, which batch statistics
do not see). Checked against PyTorch in float64, each within 10x the spread of float32
PyTorch runs (with the rows in four orders) around it, plus 1.9e-6
(tests/numerics/rounding_envelope.py: a tolerance from this run's own
conditioning, so it holds on any CPU):
  - every step's loss (trun --metrics);
  - the weights and the running statistics trun saves (--save-weights:
    running_mean, running_var and num_batches_tracked under PyTorch's
    names) after 50 steps (norm-wise per tensor; the counter exactly);
  - eval: trun's test loss (the eval step: running statistics) on other
    data against the module in eval mode;
  - trun's saved file loads with load_state_dict(strict=True) into a new
    module whose eval outputs match the float64 module's;
  - exact resume: half the steps with a checkpoint, then --resume, saves
    the same bytes as the straight run.

--via onnx: the same through torch.onnx.export (training mode: an eval
export folds batch norm into the convolutions) and `tcc import`, with the
recipe given as flags (ONNX BatchNormalization's running statistics become
buffers of the same names, its momentum converted).

--via torch-sync: the module with every batch norm converted to
nn.SyncBatchNorm (convert_sync_batchnorm), imported by tcc.from_torch
(each batch_norm node then says sync) and compiled with --data-parallel:
at one rank its step is the plain one, so the same checks hold against the
unconverted module in PyTorch.

usage: batch_norm_parity_test.py --bin-dir BUILD/bin [--work-dir DIR]
                                 [--steps N] [--via torch|onnx|torch-sync]
"""

import argparse
import copy
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import harness as H  # noqa: E402
sys.path.insert(0, os.path.join(here, "..", "numerics"))
import rounding_envelope as R  # noqa: E402
import tcc  # noqa: E402
from tcc import safetensors  # noqa: E402

# SGD's learning rate: the loss falls from 2.45 to ~0.40 in 50 steps and the
# run stays well-conditioned (float32 runs within ~4e-7 of float64 at every
# step). At 0.01 the CNN memorizes the 64 images (loss 0.044), where float32
# runs spread by 1e-4 in the loss and 1e-3 in the eval outputs: too
# chaotic for any tolerance to tell a bug from rounding (issue 32).
LR = 0.003


def cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16, momentum=0.2),
        nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.BatchNorm1d(64), nn.Linear(64, 10))


def data(n, seed):
    """Images (n, 3, 8, 8) (not centred: the statistics matter) and the
    labels of a random linear teacher."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, 8, 8, generator=g) * 1.5 + 0.5
    teacher = torch.randn(3 * 8 * 8, 10, generator=torch.Generator().manual_seed(7))
    y = (x.reshape(n, -1) @ teacher).argmax(1)
    # A quarter of the labels random (a loss near 0 has no relative
    # precision left to compare).
    noisy = torch.rand(n, generator=g) < 0.25
    y[noisy] = torch.randint(0, 10, (int(noisy.sum()),), generator=g)
    return x, y


def torch_train(start, x, y, xt, yt, steps, dtype, perm):
    """`steps` of PyTorch's train mode from a copy of `start` in `dtype`,
    the rows of the batch in the order `perm` (None: as given): the losses,
    the state_dict (numpy, float64 for floats), the eval loss and outputs
    on (xt, yt)."""
    module = copy.deepcopy(start).to(dtype)
    opt = torch.optim.SGD(module.parameters(), lr=LR, momentum=0.9)
    if perm is not None:
        x, y = x[torch.from_numpy(perm)], y[torch.from_numpy(perm)]
    x, xt = x.to(dtype), xt.to(dtype)
    module.train()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(module(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    module.eval()
    with torch.no_grad():
        out = module(xt)
        test = float(F.cross_entropy(out, yt))
    state = {k: v.numpy().astype(np.float64) if v.is_floating_point() else v.numpy()
             for k, v in module.state_dict().items()}
    return dict(losses=losses, state=state, test_loss=test,
                eval_outputs=out.double().numpy())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--via", choices=("torch", "onnx", "torch-sync"), default="torch")
    args = ap.parse_args()
    work = args.work_dir or tempfile.mkdtemp(prefix="tcc-bn-parity-")
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    module = cnn()
    # Non-trivial starting statistics and affine weights, so --init-from's
    # buffers are checked, not only their defaults.
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.num_batches_tracked.fill_(3)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    start = copy.deepcopy(module)
    x, y = data(64, 3)
    xt, yt = data(64, 11)
    model_path = os.path.join(work, "cnn.pb")
    init = os.path.join(work, "init.safetensors")
    if args.via == "onnx":
        onnx_path = os.path.join(work, "cnn.onnx")
        # Exporting in training mode runs the module once, updating its
        # statistics: on a copy. The initializers (tcc import --weights) hold
        # the statistics after that run, so trun starts from the module's own
        # (the names are the same).
        torch.onnx.export(copy.deepcopy(module), x, onnx_path, input_names=["image"],
                          output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
        H.run([os.path.join(args.bin_dir, "tcc"), "import", onnx_path, "-o", model_path,
               "--loss", "cross_entropy", "--optimizer", "sgd", "--lr", LR,
               "--momentum", 0.9, "--weights", os.path.join(work, "onnx.safetensors")])
        tcc.export_torch_weights(module, init)
    else:
        before = copy.deepcopy(module.state_dict())
        imported = module
        if args.via == "torch-sync":  # the same weights, SyncBatchNorm modules
            imported = nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(module))
        model = tcc.from_torch(imported, (x,), loss=nn.CrossEntropyLoss(), target=y,
                               optimizer=torch.optim.SGD(imported.parameters(), lr=LR,
                                                         momentum=0.9))
        # Importing runs the module on meta tensors only: its statistics are intact.
        for k, v in imported.state_dict().items():
            if not torch.equal(v, before[k]):
                raise H.Failure(f"tcc.from_torch changed the module's {k}")
        norms = [n for n in model.proto().nodes if n.op == "batch_norm"]
        synced = [n.name for n in norms if "sync" in n.attrs and n.attrs["sync"].b]
        if len(synced) != (len(norms) if args.via == "torch-sync" else 0) or not norms:
            raise H.Failure(f"batch_norm nodes {[n.name for n in norms]}: sync on {synced}")
        model.save(model_path)
        tcc.export_torch_weights(module, init)
    paths = {}
    for name, a in (("x", x), ("y", y), ("xt", xt), ("yt", yt)):
        paths[name] = os.path.join(work, f"{name}.npy")
        np.save(paths[name], a.numpy().astype(np.float32 if a.is_floating_point()
                                              else np.int64))
    step = os.path.join(work, "cnn.so")
    H.compile_step(args.bin_dir, model_path, step,
                   *(["--data-parallel"] if args.via == "torch-sync" else []))
    info = H.run([os.path.join(args.bin_dir, "trun"), step, "--info"]).stdout
    if "buffers: 9" not in info or "1.running_mean" not in info:
        raise H.Failure(f"trun --info does not list the 9 buffers:\n{info}")

    metrics = os.path.join(work, "metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    saved = os.path.join(work, "trained.safetensors")
    trun = [os.path.join(args.bin_dir, "trun"), step, "--data", f"{paths['x']},{paths['y']}",
            "--init-from", init, "--log-every", 0]
    half = args.steps // 2
    H.run(trun + ["--test", f"{paths['xt']},{paths['yt']}", "--steps", args.steps,
                  "--metrics", metrics, "--save-weights", saved])
    # Exact resume: half the steps with a checkpoint, then --resume to the
    # end must save the same bytes (the running statistics are in the
    # checkpoint, or the resumed run would normalize differently).
    ckpt = os.path.join(work, "ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    resumed = os.path.join(work, "resumed.safetensors")
    H.run(trun + ["--steps", half, "--ckpt-dir", ckpt, "--ckpt-every", half])
    H.run(trun + ["--steps", args.steps, "--ckpt-dir", ckpt, "--ckpt-every", half,
                  "--resume", "--save-weights", resumed])
    tcc_losses = H.read_metrics_losses(metrics, args.steps)
    test_loss = None
    with open(metrics) as f:
        for line in f:
            rec = __import__("json").loads(line)
            if rec.get("kind") == "eval" and "test_loss" in rec:
                test_loss = rec["test_loss"]
    trained = safetensors.load_file(saved)
    with open(saved, "rb") as a, open(resumed, "rb") as b:
        same = a.read() == b.read()
    print(f"resumed at step {half} from a checkpoint: saved weights and running "
          f"statistics {'identical' if same else 'DIFFER'}")

    # The references (tests/numerics/rounding_envelope.py): PyTorch in
    # float64, and in float32 with the rows in the given order and in three
    # others; tcc must stay as close to float64 as K x the float32 runs'
    # spread, at every step and for every tensor.
    runs = [torch_train(start, x, y, xt, yt, args.steps, torch.float32, None)]
    runs += [torch_train(start, x, y, xt, yt, args.steps, torch.float32, p)
             for p in R.permutations(len(x), 3)]
    exact = torch_train(start, x, y, xt, yt, args.steps, torch.float64, None)
    torch_losses = runs[0]["losses"]

    failures = [] if same else ["the resumed run's weights differ from the straight run's"]
    failures += R.check_losses("bn", tcc_losses, exact["losses"],
                               [r["losses"] for r in runs], ref32=torch_losses)
    if not exact["losses"][-1] < 0.8 * exact["losses"][0]:
        failures.append("the loss did not fall")

    state = exact["state"]
    if set(trained) != set(state):
        failures.append(f"trun saved {sorted(trained)}, PyTorch has {sorted(state)}")
    counters = {n for n in state if n.endswith("num_batches_tracked")}
    for name in sorted(counters & set(trained)):
        a, b = trained[name], state[name]
        if a.dtype != np.int64 or int(a) != int(b):
            failures.append(f"{name}: trun {a} ({a.dtype}), PyTorch {b}")
    floats = lambda d: {n: v for n, v in d.items() if n not in counters}  # noqa: E731
    failures += R.check_tensors("bn", floats(trained), floats(state),
                                [floats(r["state"]) for r in runs],
                                what="parameter or running statistic")
    print(f"counters after {args.steps} steps: {int(state['1.num_batches_tracked'])}")

    if test_loss is None:
        failures.append("trun reported no test loss")
    else:
        print(f"eval (running statistics): test loss tcc {test_loss:.7f} float64 "
              f"{exact['test_loss']:.7f}")
        failures += R.check_tensors("bn eval", {"test_loss": test_loss},
                                    {"test_loss": exact["test_loss"]},
                                    [{"test_loss": r["test_loss"]} for r in runs],
                                    what="test loss")

    # trun's file in PyTorch: a strict load, then the eval outputs of those
    # weights against the float64 module's (a wrong name or layout is off
    # by O(1), far outside the float32 spread).
    fresh = cnn()
    try:
        fresh.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in trained.items()},
                              strict=True)
        fresh.eval()
        with torch.no_grad():
            outs = fresh(xt).double().numpy()
        failures += R.check_tensors("bn strict load", {"eval outputs": outs},
                                    {"eval outputs": exact["eval_outputs"]},
                                    [{"eval outputs": r["eval_outputs"]} for r in runs],
                                    what="output")
    except RuntimeError as e:
        failures.append(f"load_state_dict(strict=True) of trun's weights: {e}")

    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except H.Failure as e:
        print(f"FAIL: {e}")
        sys.exit(1)
