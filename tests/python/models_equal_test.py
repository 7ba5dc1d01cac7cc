"""tcc.models.gpt / tcc.models.mlp (Python, written with tcc.nn) against
`tcc-models gpt` / `tcc-models mlp` (C++): for each option set both write a
model and the two messages must be equal (protobuf equality: same params in
the same order with the same seeds, inits and torch layouts; same nodes,
names, inputs and attributes; same training recipe). On a difference the
first one is printed.

usage: models_equal_test.py TCC_MODELS WORK_DIR SOURCE_ROOT
"""

import difflib
import os
import subprocess
import sys

import tcc
from tcc import models
from google.protobuf import text_format

# (name, tcc-models flags, Python keywords)
GPT_CASES = [
    ("gpt-default", [], {}),
    ("gpt-llama", ["--positions", "rope", "--norm", "rms", "--mlp", "swiglu",
                   "--untied", "--no-bias", "--layers", "2", "--width", "64",
                   "--heads", "2", "--context", "32", "--vocab", "100"],
     dict(positions="rope", norm="rms", mlp="swiglu", untied=True,
          no_bias=True, layers=2, width=64, heads=2, context=32, vocab=100)),
    ("gpt-dropout", ["--dropout", "0.1", "--layers", "3", "--norm-eps", "1e-4",
                     "--mlp-hidden", "200", "--no-decay", "bias,norm,embedding",
                     "--rope-theta", "500"],
     dict(dropout=0.1, layers=3, norm_eps=1e-4, mlp_hidden=200,
          no_decay=("bias", "norm", "embedding"), rope_theta=500.0)),
    ("gpt-schedule", ["--micro-batches", "4", "--batch", "8", "--warmup", "10",
                      "--decay-steps", "100", "--lr", "3e-4", "--beta1", "0.8",
                      "--beta2", "0.95", "--eps", "1e-6", "--weight-decay",
                      "0.01", "--grad-clip", "0", "--no-decay", "none"],
     dict(micro_batches=4, batch=8, warmup=10, decay_steps=100, lr=3e-4,
          beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=0.01, grad_clip=0.0,
          no_decay=())),
    ("gpt-rope-layer-min-lr", ["--positions", "rope", "--decay-steps", "50",
                               "--min-lr", "1e-5", "--mlp", "swiglu",
                               "--width", "96", "--heads", "3"],
     dict(positions="rope", decay_steps=50, min_lr=1e-5, mlp="swiglu",
          width=96, heads=3)),
]
MLP_CASES = [
    ("mlp-default", [], {}),
    ("mlp-deep", ["--hidden", "512,256,64", "--batch", "128", "--lr", "0.05"],
     dict(hidden=(512, 256, 64), batch=128, lr=0.05)),
    ("mlp-linear", ["--hidden", "none", "--inputs", "20", "--classes", "3"],
     dict(hidden=(), inputs=20, classes=3)),
]


def first_difference(a, b) -> str:
    """Where two model messages first differ, as text lines."""
    for field in ("schema_version", "name", "params", "inputs", "nodes",
                  "outputs", "training"):
        x, y = getattr(a, field), getattr(b, field)
        if x == y:
            continue
        if hasattr(x, "__len__") and not isinstance(x, (str, bytes)) and \
                hasattr(x, "add"):
            for i in range(max(len(x), len(y))):
                if i >= len(x) or i >= len(y) or x[i] != y[i]:
                    xs = text_format.MessageToString(x[i]) if i < len(x) else "(none)\n"
                    ys = text_format.MessageToString(y[i]) if i < len(y) else "(none)\n"
                    diff = "".join(difflib.unified_diff(
                        xs.splitlines(True), ys.splitlines(True),
                        "tcc-models", "python", n=1))
                    return f"{field}[{i}] differs:\n{diff}"
        xs = text_format.MessageToString(x) if hasattr(x, "ListFields") else repr(x) + "\n"
        ys = text_format.MessageToString(y) if hasattr(y, "ListFields") else repr(y) + "\n"
        return f"{field} differs:\n" + "".join(difflib.unified_diff(
            xs.splitlines(True), ys.splitlines(True), "tcc-models", "python"))
    return "no difference"


def main():
    tcc_models, work, source_root = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    failures = 0
    cases = [("gpt", c) for c in GPT_CASES] + [("mlp", c) for c in MLP_CASES]
    for kind, (name, flags, kwargs) in cases:
        path = os.path.join(work, f"{name}.pb")
        subprocess.run([tcc_models, kind, *flags, "-o", path], check=True)
        want = tcc.load_proto(path)
        got = getattr(models, kind)(**kwargs).proto()
        if want == got:
            print(f"ok   {name}: {len(got.params)} params, {len(got.nodes)} "
                  "nodes equal")
        else:
            failures += 1
            print(f"FAIL {name}: {first_difference(want, got)}")
        # The file Model.save writes is the same bytes as tcc-models' (both
        # serialize deterministically).
        saved = os.path.join(work, f"{name}.py.pb")
        m = getattr(models, kind)(**kwargs)
        m.save(saved)
        with open(saved, "rb") as a, open(path, "rb") as b:
            if a.read() != b.read():
                failures += 1
                print(f"FAIL {name}: the saved file's bytes differ")
    # The committed GPT samples, written by tcc-models, against Python.
    sys.path.insert(0, os.path.join(source_root, "samples", "gpt_char"))
    import model as gpt_char_sample  # samples/gpt_char/model.py
    for sample, got in [
            ("samples/gpt_char/gpt_char.pbtxt", gpt_char_sample.build()),
            ("samples/gpt2/gpt2_124m.pbtxt", models.gpt(
                vocab=50304, context=1024, layers=12, width=768, heads=12,
                batch=16, lr=6e-4, beta1=0.9, beta2=0.95, eps=1e-8,
                weight_decay=0.1, grad_clip=1.0, warmup=715,
                decay_steps=19073, min_lr=6e-5))]:
        want = tcc.load_proto(os.path.join(source_root, sample))
        if want == got.proto():
            print(f"ok   {sample}: the Python build is equal")
        else:
            failures += 1
            print(f"FAIL {sample}: {first_difference(want, got.proto())}")
        # And the text file itself, below its '#' header.
        written = os.path.join(work, os.path.basename(sample))
        got.save(written)
        with open(os.path.join(source_root, sample)) as f:
            committed = "".join(l for l in f if not l.startswith("#"))
        with open(written) as f:
            if f.read() != committed:
                failures += 1
                print(f"FAIL {sample}: the text Model.save writes differs")
    # A sanity check that the comparison can fail: another option differs.
    other = models.mlp(hidden=(255,)).proto()
    if other == tcc.load_proto(os.path.join(work, "mlp-default.pb")):
        failures += 1
        print("FAIL: a different MLP compared equal")
    print(f"{len(cases) - failures}/{len(cases)} option sets equal" if not
          failures else f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
