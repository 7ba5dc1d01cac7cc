#!/usr/bin/python3
"""ONNX ops of newer opsets than Debian's torch 1.13 exports (opset 20:
Gelu, LayerNormalization), in a hand-built graph whose shapes the installed
onnx cannot infer past Gelu (so the importer derives them: Reshape with 0
and -1, Transpose, MatMul), imported with `tcc import`, compiled with
--emit-gradients and run one step by trun on named arrays; the loss and
every gradient must match PyTorch computing the same formula from the same
arrays (against float64: harness.compare_step). The PyTorch reference is written from the
ONNX operator definitions, not from the importer.

usage: onnx_ops_test.py --bin-dir BUILD/bin [--work-dir DIR]
"""

import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
from tcc import safetensors  # noqa: E402

B, D, C, K = 4, 6, 8, 3


def weights():
    rng = np.random.default_rng(0)
    f = np.float32
    return {"fc.weight": rng.normal(size=(C, D)).astype(f) * 0.5,   # Gemm transB=1
            "fc.bias": rng.normal(size=(C,)).astype(f) * 0.1,
            "ln.weight": (1 + 0.1 * rng.normal(size=(C,))).astype(f),
            "ln.bias": (0.1 * rng.normal(size=(C,))).astype(f),
            "head.weight": rng.normal(size=(C, K)).astype(f) * 0.5}  # MatMul (in, out)


def build(path, w):
    h = helper
    nodes = [
        h.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["a"], transB=1, name="/fc/Gemm"),
        h.make_node("LayerNormalization", ["a", "ln.weight", "ln.bias"], ["n"],
                    axis=-1, epsilon=1e-5, name="/ln/LayerNormalization"),
        h.make_node("Gelu", ["n"], ["g"], approximate="tanh", name="/act/Gelu"),
        h.make_node("Gelu", ["g"], ["g2"], name="/act2/Gelu"),
        h.make_node("Constant", [], ["s1"], value=numpy_helper.from_array(
            np.array([0, 2, -1], np.int64))),
        h.make_node("Reshape", ["g2", "s1"], ["r"], name="/Reshape"),     # (B, 2, 4)
        h.make_node("Transpose", ["r"], ["tr"], perm=[0, 2, 1], name="/Transpose"),
        h.make_node("Constant", [], ["s2"], value=numpy_helper.from_array(
            np.array([B, -1], np.int64))),
        h.make_node("Reshape", ["tr", "s2"], ["f"], name="/Reshape_1"),  # (B, 8)
        h.make_node("MatMul", ["f", "head.weight"], ["logits"], name="/head/MatMul"),
    ]
    graph = h.make_graph(
        nodes, "opset20", [h.make_tensor_value_info("x", TensorProto.FLOAT, [B, D])],
        [h.make_tensor_value_info("logits", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in w.items()])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 20)])
    model.ir_version = 8
    onnx.save(model, path)


def reference(w, x, y):
    """Loss and gradients (PyTorch layouts = the initializers') in PyTorch,
    in float64 and float32, as harness.reference_step returns them."""
    out = {}
    for dtype, suffix in ((torch.float64, ""), (torch.float32, "32")):
        t = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in w.items()}
        a = torch.from_numpy(x).to(dtype) @ t["fc.weight"].T + t["fc.bias"]
        n = F.layer_norm(a, (C,), t["ln.weight"], t["ln.bias"], 1e-5)
        g2 = F.gelu(F.gelu(n, approximate="tanh"))
        f = g2.reshape(B, 2, 4).transpose(1, 2).reshape(B, -1)
        loss = F.cross_entropy(f @ t["head.weight"], torch.from_numpy(y).long())
        loss.backward()
        out["loss" + suffix] = float(loss)
        out["grads" + suffix] = {k: v.grad.double().numpy() for k, v in t.items()}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work-dir")
    args = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory(prefix="tcc-onnx-ops-") as tmp:
        work = args.work_dir or tmp
        os.makedirs(work, exist_ok=True)
        w = weights()
        path, model, wfile = (os.path.join(work, n) for n in
                              ("m.onnx", "m.pbtxt", "w.safetensors"))
        build(path, w)
        H.run([os.path.join(args.bin_dir, "tcc"), "import", path, "-o", model,
               "--lr", "0.1", "--weights", wfile])
        exported = safetensors.load_file(wfile)
        for k, v in w.items():
            if k not in exported or not np.array_equal(exported[k], v):
                failures.append(f"--weights: {k} is not the initializer as stored")
        step = os.path.join(work, "m.so")
        H.compile_step(args.bin_dir, model, step, "--emit-gradients")
        rng = np.random.default_rng(1)
        x = rng.normal(size=(B, D)).astype(np.float32)
        y = rng.integers(0, K, size=(B,)).astype(np.int64)
        outs = os.path.join(work, "outs.safetensors")
        xs, ys = os.path.join(work, "x.npy"), os.path.join(work, "labels.npy")
        np.save(xs, x)
        np.save(ys, y.astype(np.int32))
        H.run([os.path.join(args.bin_dir, "trun"), step, "--data", f"x={xs},labels={ys}",
               "--steps", 1, "--init-from", wfile, "--save-train-outputs", outs])
        got = safetensors.load_file(outs)
        proto = __import__("tcc").load_proto(model)
        failures += H.compare_step("opset20", proto, got, reference(w, x, y))
        ops = [n.op for n in proto.nodes]
        for op in ("layer_norm", "gelu"):
            if op not in ops:
                failures.append(f"no {op} node in {ops}")
    return H.report(failures)


if __name__ == "__main__":
    sys.exit(main())
