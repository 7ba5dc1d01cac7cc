#!/usr/bin/env python3
"""PyTorch's per-step losses for an AMP check: the model of amp_models.py
NAME in gpt_reference.py, from tcc's initial weights (a trun
--save-weights file), on the batches trun --data-order sequential feeds,
epoch after epoch (gpt_parity_test.sequential_batches), trained STEPS AdamW steps with the
model's recipe, once per MODE:

  bf16   each forward under torch.autocast(bfloat16) (fp32 master weights)
  fp32   plain float32; TF32 off (torch.backends.*.allow_tf32 = False)

Each mode writes OUT_PREFIX_MODE.jsonl in trun's --metrics form
({"kind":"step","step":S,"loss":L,"grad_norm":G,...}), so compare_losses.py
compares it with a trun run.

    torch_amp_losses.py NAME --init INIT.safetensors --data SHARD
        --out-prefix PREFIX [--modes bf16,fp32] [--steps 200]
        [--device cuda|cpu]

--device cpu (Debian's torch 1.13 here) runs the same code with CPU
autocast, for checking the script on a small --steps.
"""
import argparse
import json
import os
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "parity"))
import amp_models  # noqa: E402
import gpt_parity_test  # noqa: E402  (sequential_batches: trun's batch order)
import gpt_reference as ref  # noqa: E402
import tcc_files  # noqa: E402

MODES = {"bf16": torch.bfloat16, "fp32": None}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("name", choices=sorted(amp_models.CONFIGS))
    p.add_argument("--init", required=True, help="trun --save-weights file")
    p.add_argument("--data", required=True, help="the token shard trun trained on")
    p.add_argument("--out-prefix", required=True)
    p.add_argument("--modes", default="bf16,fp32")
    p.add_argument("--steps", type=int, default=amp_models.STEPS)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    modes = a.modes.split(",")
    for mode in modes:
        if mode not in MODES:
            sys.exit(f"torch_amp_losses.py: unknown mode '{mode}' (bf16, fp32)")
    device = torch.device(a.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("torch_amp_losses.py: torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    cfg = amp_models.CONFIGS[a.name]
    init, _ = tcc_files.read_safetensors(a.init)
    try:
        batches = gpt_parity_test.sequential_batches(
            tcc_files.read_shard(a.data), cfg, a.steps)
    except gpt_parity_test.Failure as e:
        sys.exit(f"torch_amp_losses.py: {e}")
    for mode in modes:
        path = f"{a.out_prefix}_{mode}.jsonl"
        P = ref.make_params(cfg, init, device)
        start = time.time()
        with open(path, "w") as out:
            def on_step(step, loss, grad_norm):
                out.write(json.dumps({"kind": "step", "step": step, "loss": loss,
                                      "lr": ref.learning_rate(cfg, step - 1),
                                      "grad_norm": grad_norm,
                                      "time_s": time.time() - start}) + "\n")
                out.flush()
            losses, _ = ref.train(cfg, P, batches, autocast_dtype=MODES[mode],
                                  on_step=on_step)
        print(f"torch {a.name} {mode} on {device} (torch {torch.__version__}): "
              f"{a.steps} steps in {time.time() - start:.1f} s, loss "
              f"{losses[0]:.4f} -> {losses[-1]:.4f}; {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
