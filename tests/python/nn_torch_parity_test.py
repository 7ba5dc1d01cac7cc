"""tcc.nn modules against the torch.nn modules they mirror, through the
whole tool chain: a network written with tcc.nn (Linear, Conv1D, LayerNorm,
RMSNorm, every activation, Sequential, a module called twice) and the same
network written with torch.nn (same attribute tree) share weights — torch's
state_dict saved as safetensors, read by `trun --init-from` under tcc's
names and torch layouts (Linear's perm [1, 0]). One trun step on the whole
data set as the batch must give torch's loss (cross_entropy + mse_loss of
one-hot targets) and every gradient (norm-wise) as close to torch's in
float64 as max(1e-5 / 1e-4 relative, 10x torch float32's own distance from
it) (tests/torch_import/harness.py, compare_step).

usage: nn_torch_parity_test.py TCC TRUN WORK_DIR
"""

import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import tcc
from tcc import nn, ops, safetensors
from tcc.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch_import"))
import harness  # noqa: E402  (reference_step / compare_step: against float64)

N, D, H, C = 16, 12, 16, 6


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(D, H), nn.LayerNorm(H),
                                  nn.GELU("tanh"), nn.Linear(H, H, bias=False),
                                  nn.RMSNorm(H), nn.SiLU())
        self.mix = nn.Linear(H, H)
        self.relu = nn.ReLU()
        self.proj = nn.Conv1D(H, H)
        self.act, self.gate, self.gelu = nn.Tanh(), nn.Sigmoid(), nn.GELU()
        self.head = nn.Linear(H, C)

    def forward(self, x):
        h = self.body(x)
        h = self.mix(self.relu(self.mix(h)))          # shared weights
        h = ops.mul(self.act(self.proj(h)), self.gate(h))
        return self.head(self.gelu(h))


class TorchConv1D(tnn.Module):  # Hugging Face GPT-2's: weight (in, out)
    def __init__(self, i, o):
        super().__init__()
        self.weight = tnn.Parameter(torch.randn(i, o) * 0.3)
        self.bias = tnn.Parameter(torch.randn(o) * 0.1)

    def forward(self, x):
        return x @ self.weight + self.bias


class TorchRMSNorm(tnn.Module):  # torch 1.13 has none
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.eps, self.weight = eps, tnn.Parameter(1 + 0.1 * torch.randn(n))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class TorchNet(tnn.Module):
    def __init__(self):
        super().__init__()
        self.body = tnn.Sequential(tnn.Linear(D, H), tnn.LayerNorm(H),
                                   tnn.GELU(approximate="tanh"),
                                   tnn.Linear(H, H, bias=False), TorchRMSNorm(H),
                                   tnn.SiLU())
        self.mix = tnn.Linear(H, H)
        self.relu = tnn.ReLU()
        self.proj = TorchConv1D(H, H)
        self.act, self.gate, self.gelu = tnn.Tanh(), tnn.Sigmoid(), tnn.GELU()
        self.head = tnn.Linear(H, C)

    def forward(self, x):
        h = self.body(x)
        h = self.mix(self.relu(self.mix(h)))
        h = self.act(self.proj(h)) * self.gate(h)
        return self.head(self.gelu(h))


def tcc_model():
    m = tcc.Model("nn_parity")
    x = m.input("x", (N, D))
    y = m.input("y", (N,), "i32")
    logits = Net()(x)
    m.output("logits", logits)
    classes = ops.iota(m, (N, C), axis=1, dtype="i32")
    one_hot = ops.cast(ops.equal(classes, ops.reshape(y, [N, 1])), "f32")
    loss = ops.add(F.cross_entropy(logits, y), F.mse_loss(logits, one_hot),
                   name="loss")
    m.train(loss, tcc.SGD(lr=0.1))
    return m


def main():
    tcc_bin, trun, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(N, D)
    y = torch.randint(0, C, (N,))
    net = TorchNet()
    with torch.no_grad():  # norms away from their trivial init
        for mod in net.modules():
            if isinstance(mod, tnn.LayerNorm):
                mod.weight.add_(0.1 * torch.randn(H))
                mod.bias.add_(0.1 * torch.randn(H))
    def loss_of(module, x, y):
        logits = module(x)
        return TF.cross_entropy(logits, y) + TF.mse_loss(
            logits, TF.one_hot(y, C).to(logits.dtype))

    ref = harness.reference_step(net, loss_of, (x, y))

    m = tcc_model()
    proto = m.proto()
    names = [p.name for p in proto.params]
    if sorted(names) != sorted(dict(net.named_parameters())):
        print(f"FAIL: parameter names {names} vs torch "
              f"{list(dict(net.named_parameters()))}")
        return 1
    paths = {k: os.path.join(work, k) for k in
             ("model.pb", "step.so", "x.npy", "y.npy", "w.safetensors",
              "outs.safetensors")}
    m.save(paths["model.pb"])
    np.save(paths["x.npy"], x.numpy())
    np.save(paths["y.npy"], y.numpy().astype(np.int64))
    safetensors.save_state_dict({k: v.detach().numpy() for k, v in
                                 net.state_dict().items()}, paths["w.safetensors"])
    for cmd in ([tcc_bin, "compile", "--target", "cpu", paths["model.pb"],
                 "-o", paths["step.so"], "--emit-gradients"],
                [trun, paths["step.so"], "--data",
                 f"{paths['x.npy']},{paths['y.npy']}", "--steps", "1",
                 "--init-from", paths["w.safetensors"],
                 "--save-train-outputs", paths["outs.safetensors"]]):
        print("$ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    outs = safetensors.load_file(paths["outs.safetensors"])
    failures = harness.compare_step("nn", proto, outs, ref)
    for f in failures:
        print("FAIL: " + f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
