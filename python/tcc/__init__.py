"""tcc's Python front end: write a model and its training recipe in Python,
save the model file, `tcc compile` it, `trun` it.

    import tcc
    m = tcc.Model("mlp")
    ...
    m.save("mlp.pb")

`tcc.ops`: every op of docs/ir.md as a function; `tcc.Model`: parameters,
inputs, nodes, outputs, the training recipe; `tcc.nn`: torch-like modules;
`tcc.models`: tcc-models' GPT and MLP. See docs/python.md.
"""

from tcc.model import (AdamW, Init, Model, SGD, Tensor, TccError,
                       WarmupCosine, load_proto, normal, ones, save_proto,
                       uniform, zeros)
from tcc import ops
from tcc import nn  # torch-like modules (tcc.nn, tcc.nn.functional)
from tcc import models  # tcc-models' GPT and MLP written with tcc.nn

__all__ = ["AdamW", "Init", "Model", "SGD", "Tensor", "TccError",
           "WarmupCosine", "load_proto", "lora", "models", "nn", "normal", "ones",
           "ops", "safetensors", "save_proto", "uniform", "zeros"]


def __getattr__(name):
    # PyTorch import on first use only: `import tcc` must not import torch.
    # Submodules on first use too (`tcc.safetensors.load_file(...)` after a
    # plain `import tcc`, as docs/pytorch-import.md writes it).
    if name in ("lora", "safetensors"):  # lora: also python3 -m tcc.lora
        import importlib
        return importlib.import_module("tcc." + name)
    if name in ("from_torch", "export_torch_weights", "TorchImportError"):
        from tcc import torch_import
        return getattr(torch_import, name)
    raise AttributeError(f"module 'tcc' has no attribute {name!r}")
