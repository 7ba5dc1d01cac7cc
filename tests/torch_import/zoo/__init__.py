"""The zoo: small modules written in the style of widely used model code
(nanoGPT, HuggingFace LLaMA / Qwen2, Meta's LLaMA, timm's ViT, torchvision's
ResNet and MobileNetV2, a diffusion UNet), each imported with
tcc.from_torch and trained by trun against PyTorch (zoo_test.py).

Each family's file has make() returning a list of Case: one row of the
zoo's table each. The modules are re-typed in those projects' style (names,
structure, the idioms their users meet), not copied from them, at sizes
that keep the whole zoo within a few minutes on two CPU cores.
"""

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch


@dataclass
class Case:
    """One zoo row.

    module     the seeded module (trained from its own weights by both sides)
    inputs     the forward's positional arguments: the one batch every step
               trains on (trun is given exactly these rows; each step sees
               them shuffled, which changes only summation orders)
    target     the loss's target, or None when the forward returns the loss
    loss       loss(output, target) for tcc.from_torch's loss= and PyTorch,
               or None when the forward returns it (then loss_of_output
               picks it out of the output for the PyTorch runs)
    optimizer  optimizer(module) -> torch.optim.Optimizer
    expect     "imports" or "refused"
    refusal    for expect == "refused": a part of the expected message
    instead    for expect == "refused": what to write instead (the docs)
    """
    name: str
    family: str
    module: torch.nn.Module
    inputs: Tuple[torch.Tensor, ...]
    target: Optional[torch.Tensor]
    loss: Optional[Callable]
    optimizer: Callable
    expect: str = "imports"
    refusal: str = ""
    instead: str = ""
    loss_of_output: Optional[Callable] = None
    what: str = ""

    def torch_loss(self, out, target):
        if self.loss is not None:
            return self.loss(out, target)
        return self.loss_of_output(out)


def adamw_no_decay_1d(module, lr, weight_decay=0.1, betas=(0.9, 0.99), eps=1e-8):
    """AdamW as GPT / LLaMA training scripts group it: decay on matrices and
    embeddings, none on biases, norms and other 1-D tensors."""
    params = [p for p in module.parameters() if p.requires_grad]
    return torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=lr, betas=betas, eps=eps)


def token_batch(batch, context, vocab, seed):
    """(idx, targets) of next-token prediction on a random token stream."""
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, vocab, (batch, context + 1), generator=g)
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()
