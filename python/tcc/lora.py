"""LoRA adapters (Hu et al. 2021, as Hugging Face PEFT makes them) on the
Linear / Conv1D layers of a tcc.nn module tree, and the merged export.

    net = tcc.models.GPT(vocab=64, layers=2, width=64, heads=4)
    tcc.lora.apply(net, ["attn.c_attn", "attn.c_proj"], rank=8, alpha=16)
    logits = net(tokens)                      # then build the model as usual
    # or: tcc.models.gpt(..., lora=tcc.lora.LoRA(8, 16, ["attn.c_attn"]))

Each chosen layer computes y = x W + (alpha / rank) (x A) B + b, A (in, r)
uniform(1/sqrt(in)) (PEFT's kaiming_uniform(a=sqrt(5))), B (r, out) zeros, so
the adapted model starts equal to the base. A and B are the child Linears
`lora_A` / `lora_B` of the layer: parameters `PATH.lora_A.weight` (tcc (in, r),
PyTorch (r, in)) and `PATH.lora_B.weight` (tcc (r, out), PyTorch (out, r)),
PEFT's layouts, so trun --save-weights and checkpoints hold the adapters under
PEFT-like keys (PEFT's own add `base_model.model.` and `.default`). The base
keeps its names (`PATH.weight`, `PATH.bias`) and, with freeze_base (default),
every parameter of the tree but the adapters is frozen: no gradient, no
optimizer state. Adapter seeds are fixed by their names, so the base
parameters get the same seeds (and initial values) as without adapters.

merge(weights, model, out) writes the base weights with W + (alpha/r) A B and
no adapter tensors: the file a model without adapters loads (--init-from).
add_adapters(base, adapters, out) is the way in: a pretrained base's weights
plus the adapters of a 0-step run, the adapted model's --init-from file.
"""

import dataclasses
import fnmatch
import math
import zlib
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from tcc import nn, ops, safetensors
from tcc.model import Model, TccError, load_proto, uniform, zeros

__all__ = ["LoRA", "LoRALinear", "add_adapters", "adapters", "apply",
           "merge"]


@dataclasses.dataclass
class LoRA:
    """A LoRA configuration (what apply takes): `targets` name layers by
    module path (a suffix after a dot, e.g. "attn.c_attn", or a glob,
    e.g. "h.*.attn.c_*")."""
    rank: int = 8
    alpha: float = 16.0
    targets: Sequence[str] = ("attn.c_attn",)
    freeze_base: bool = True


def _adapter_seed(name: str) -> int:
    # Far above the creation-order count, fixed by the parameter's name.
    return (1 << 40) + zlib.crc32(name.encode())


class LoRALinear(nn.Linear):
    """A Linear or Conv1D with a LoRA adapter: the base's Parameters (same
    names and layouts), children lora_A (in, r) and lora_B (r, out) without
    bias, scale alpha / rank. Made by apply()."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, path: str):
        nn.Module.__init__(self)
        self.in_features, self.out_features = base.in_features, base.out_features
        self.torch_layout = base.torch_layout
        self.base_type = type(base).__name__
        self.rank, self.alpha = rank, float(alpha)
        self.scale = self.alpha / rank
        self.weight = base._parameters["weight"]
        self.lora_A = nn.Linear(self.in_features, rank, bias=False,
                                init=uniform(1.0 / math.sqrt(self.in_features)))
        self.lora_B = nn.Linear(rank, self.out_features, bias=False,
                                init=zeros())
        for child in ("lora_A", "lora_B"):
            p = self._modules[child]._parameters["weight"]
            p.seed = _adapter_seed(f"{path}.{child}.weight")
        if "bias" in base._parameters:
            self.bias = base._parameters["bias"]

    def forward(self, x, name: Optional[str] = None):
        nn._check_last_dim(x, self.in_features, self._describe())
        y = ops.matmul(x, self.weight, name=self.node_name())
        delta = self.lora_B(self.lora_A(x))
        scale = ops.constant(x.model, self.scale,
                             name=self.node_name("lora_scale"))
        delta = ops.mul(delta, scale, name=self.node_name("lora_scaled"))
        has_bias = "bias" in self._parameters
        y = ops.add(y, delta, name=name if name and not has_bias
                    else self.node_name("lora"))
        if has_bias:
            y = ops.add(y, self.bias, name=name or self.node_name("biased"))
        return y


def _matches(path: str, target: str) -> bool:
    if any(c in target for c in "*?["):
        return fnmatch.fnmatchcase(path, target)
    return path == target or path.endswith("." + target)


def apply(module: nn.Module, targets: Union[str, Sequence[str], LoRA] = (),
          rank: int = 8, alpha: float = 16.0,
          freeze_base: bool = True) -> List[str]:
    """Puts LoRA adapters on the Linear / Conv1D layers of `module`'s tree
    whose paths match `targets` (or a LoRA config); returns their paths.
    Call it before the module is built into a model. A target that matches
    no layer, or one that is no Linear / Conv1D, and rank <= 0 are
    TccErrors."""
    if isinstance(targets, LoRA):
        targets, rank, alpha, freeze_base = (targets.targets, targets.rank,
                                             targets.alpha, targets.freeze_base)
    if isinstance(targets, str):
        targets = [targets]
    targets = list(targets)
    if not isinstance(rank, int) or isinstance(rank, bool) or rank <= 0:
        raise TccError(f"tcc.lora: rank must be a positive integer, got "
                       f"{rank!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
            not alpha > 0:
        raise TccError(f"tcc.lora: alpha must be > 0, got {alpha!r}")
    if not targets:
        raise TccError("tcc.lora: no targets (module paths such as "
                       "'attn.c_attn')")
    if not isinstance(module, nn.Module):
        raise TccError(f"tcc.lora.apply takes a tcc.nn module, got "
                       f"{type(module).__module__}.{type(module).__name__}; for a "
                       "torch.nn.Module pass lora=tcc.lora.LoRA(rank, alpha, targets) "
                       "to tcc.from_torch")
    if any(p._made for _, p in module.named_parameters()):
        raise TccError("tcc.lora.apply: the module is built into a model "
                       "already; apply LoRA before calling it")
    modules = list(module.named_modules())
    linears = [p for p, m in modules if isinstance(m, nn.Linear)
               and not isinstance(m, LoRALinear) and ".lora_" not in f".{p}"]
    chosen = []
    for target in targets:
        hits = [(p, m) for p, m in modules if p and _matches(p, target)
                and ".lora_" not in p]
        if not hits:
            shown = ", ".join(linears[:6]) + (", ..." if len(linears) > 6
                                              else "")
            raise TccError(f"tcc.lora: target {target!r} matches no module "
                           f"(Linear / Conv1D layers: {shown or 'none'})")
        if any(c in target for c in "*?["):
            # A glob takes the Linear layers among what it matches.
            hits = [h for h in hits if isinstance(h[1], nn.Linear)] or hits[:1]
        for p, m in hits:
            if isinstance(m, LoRALinear):
                raise TccError(f"tcc.lora: {p!r} has an adapter already")
            if not isinstance(m, nn.Linear):
                raise TccError(f"tcc.lora: target {target!r} matches {p!r}, "
                               f"a {type(m).__name__}; LoRA adapts Linear "
                               "and Conv1D layers")
            if p not in [c for c, _ in chosen]:
                chosen.append((p, m))
    for path, m in chosen:
        parent = m._parent
        # Registered as the same child: the wrapper takes over the name.
        wrapper = LoRALinear(m, rank, alpha, path)
        parent._register(m._local_name, wrapper)
    if freeze_base:
        adapters_ = {id(p) for path, _ in chosen
                     for c in ("lora_A", "lora_B")
                     for _, p in _find(module, f"{path}.{c}").named_parameters()}
        for _, p in module.named_parameters():
            p.frozen = id(p) not in adapters_
    return [p for p, _ in chosen]


def _find(root: nn.Module, path: str) -> nn.Module:
    for p, m in root.named_modules():
        if p == path:
            return m
    raise TccError(f"tcc.lora: no module {path!r}")


def adapters(model) -> Dict[str, dict]:
    """The adapters of a model (tcc.Model, model message or file): base
    layer path -> {"A", "B", "base": parameter names, "scale": alpha / r
    from the `PATH.lora_scale` constant}."""
    proto = _proto(model)
    params = {p.name: p for p in proto.params}
    nodes = {n.name: n for n in proto.nodes}
    found = {}
    for name in params:
        if not name.endswith(".lora_A.weight"):
            continue
        path = name[:-len(".lora_A.weight")]
        b, w = f"{path}.lora_B.weight", f"{path}.weight"
        scale = nodes.get(f"{path}.lora_scale")
        if b not in params or w not in params or scale is None:
            raise TccError(f"tcc.lora: adapter {name!r} of model "
                           f"{proto.name!r} has no {b!r}, base {w!r} or "
                           f"scale node '{path}.lora_scale'")
        found[path] = {"A": name, "B": b, "base": w,
                       "scale": scale.attrs["value"].f}
    return found


def _proto(model):
    if isinstance(model, Model):
        return model.proto()
    if isinstance(model, str):
        try:
            return load_proto(model)
        except OSError as e:
            raise TccError(f"{model}: {e.strerror or e}") from None
        except Exception as e:  # protobuf's parse errors
            raise TccError(f"{model}: not a tcc model file ({e})") from None
    return model


def _torch_key_perm(p, torch_layout: bool):
    if not torch_layout:
        return p.name, ()
    return (p.torch.name or p.name), tuple(p.torch.perm)


def merge(weights_in: str, model, out_path: str) -> Dict[str, float]:
    """Reads trun's weights (--save-weights or a checkpoint's
    model.safetensors) of the adapted `model` (tcc.Model, message or model
    file) and writes `out_path` with each adapted base weight replaced by
    W + scale A B (in float64, stored in W's dtype) and no adapter tensors,
    the rest as read (keys, layouts, metadata). Returns the scale per
    adapted path."""
    proto = _proto(model)
    found = adapters(proto)
    if not found:
        raise TccError(f"tcc.lora.merge: model {proto.name!r} has no LoRA "
                       "adapters")
    try:
        tensors, metadata = safetensors.load_file_with_metadata(weights_in)
    except OSError as e:
        raise TccError(f"tcc.lora.merge: {weights_in}: {e.strerror or e}"
                       ) from None
    except safetensors.SafetensorsError as e:
        raise TccError(f"tcc.lora.merge: {e}") from None
    torch_layout = _is_torch_layout(metadata)
    params = {p.name: p for p in proto.params}
    out = dict(tensors)
    for path, a in found.items():
        keys = {}
        for role in ("A", "B", "base"):
            key, perm = _torch_key_perm(params[a[role]], torch_layout)
            if key not in tensors:
                raise TccError(f"tcc.lora.merge: {weights_in} has no tensor "
                               f"{key!r} (parameter {a[role]!r})")
            # Back to tcc's layout: perm maps tcc dims to torch's.
            t = tensors[key].astype(np.float64)
            inverse = np.argsort(perm) if perm else None
            keys[role] = (key, perm, t if inverse is None
                          else np.transpose(t, inverse))
        A, B, W = keys["A"][2], keys["B"][2], keys["base"][2]
        if A.shape[1] != B.shape[0] or (A.shape[0], B.shape[1]) != W.shape:
            raise TccError(f"tcc.lora.merge: {path}: A {A.shape} B {B.shape} "
                           f"do not fit W {W.shape}")
        merged = W + a["scale"] * (A @ B)
        key, perm, _ = keys["base"]
        if perm:
            merged = np.transpose(merged, perm)
        out[key] = merged.astype(tensors[key].dtype)
        del out[keys["A"][0]], out[keys["B"][0]]
    safetensors.save_file(out, out_path, metadata=metadata)
    return {p: a["scale"] for p, a in found.items()}


def _is_torch_layout(metadata) -> bool:
    # trun's rule (runtime/trun/io/Weights.cpp IsTorchLayout): "layout"
    # says it; trun's files without one (checkpoints) are tcc's layout.
    layout = metadata.get("layout")
    if layout:
        return layout == "torch"
    return metadata.get("producer") != "trun"


def add_adapters(base_weights: str, adapter_weights: str, out_path: str) -> int:
    """Fine-tuning a pretrained base: writes `out_path` with every tensor of
    `base_weights` (a PyTorch state_dict or trun's weights of the model
    without adapters) and the adapter tensors (`*.lora_A.*`, `*.lora_B.*`)
    of `adapter_weights` (e.g. the adapted model's `trun --steps 0
    --save-weights`), both in PyTorch's layouts: the adapted model's
    --init-from file. Returns the number of adapter tensors."""
    def load(path):
        try:
            return safetensors.load_file_with_metadata(path)
        except OSError as e:
            raise TccError(f"tcc.lora.add_adapters: {path}: "
                           f"{e.strerror or e}") from None
        except safetensors.SafetensorsError as e:
            raise TccError(f"tcc.lora.add_adapters: {e}") from None
    (base, bmeta), (ad, ameta) = load(base_weights), load(adapter_weights)
    for path, meta in ((base_weights, bmeta), (adapter_weights, ameta)):
        if not _is_torch_layout(meta):
            raise TccError(f"tcc.lora.add_adapters: {path} is in tcc's layout "
                           "(a checkpoint); use trun --save-weights files or "
                           "PyTorch state_dicts")
    is_adapter = lambda k: ".lora_A." in k or ".lora_B." in k  # noqa: E731
    clash = [k for k in base if is_adapter(k)]
    if clash:
        raise TccError(f"tcc.lora.add_adapters: {base_weights} holds adapter "
                       f"tensor {clash[0]!r} already")
    picked = {k: v for k, v in ad.items() if is_adapter(k)}
    if not picked:
        raise TccError(f"tcc.lora.add_adapters: {adapter_weights} has no "
                       "adapter tensors (*.lora_A.*, *.lora_B.*)")
    safetensors.save_file({**base, **picked}, out_path,
                          metadata={"format": "pt", "layout": "torch"})
    return len(picked)


def main(argv=None) -> int:
    """python3 -m tcc.lora merge WEIGHTS MODEL OUT: merge() from the shell;
    an error is one line."""
    import argparse
    import sys
    ap = argparse.ArgumentParser(
        prog="python3 -m tcc.lora",
        description="Merge LoRA adapters into their base weights.")
    sub = ap.add_subparsers(dest="command", required=True)
    mp = sub.add_parser("merge", help="WEIGHTS (trun's --save-weights or a "
                        "checkpoint's model.safetensors) of MODEL (.pb/.pbtxt) "
                        "-> OUT without adapters")
    mp.add_argument("weights")
    mp.add_argument("model")
    mp.add_argument("out")
    ap_add = sub.add_parser("add-adapters", help="BASE weights + the "
                            "adapter tensors of ADAPTERS -> OUT (the adapted "
                            "model's --init-from file)")
    ap_add.add_argument("base")
    ap_add.add_argument("adapters")
    ap_add.add_argument("out")
    args = ap.parse_args(argv)
    try:
        if args.command == "merge":
            scales = merge(args.weights, args.model, args.out)
            print(f"merged {len(scales)} adapters into {args.out}")
        else:
            n = add_adapters(args.base, args.adapters, args.out)
            print(f"{args.out}: {args.base} + {n} adapter tensors")
    except (TccError, OSError) as e:
        print(f"tcc.lora: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
