#!/usr/bin/env python3
"""The names the AMP checks depend on, in ONE place: tcc's precision and
loss-scaling flags, and the fields trun writes for the loss scale into its
--metrics JSON lines. If a name changes in tcc or trun, change it here only:
the Python checks import this module, the shell scripts read it through

    eval "$(python3 tests/gpu/amp_names.py --shell)"

which defines AMP_PRECISION_FLAG, AMP_LOSS_SCALE_FLAG,
AMP_INITIAL_LOSS_SCALE_FLAG and AMP_LOSS_SCALE_TOOL (tcc: the loss-scale
flags are compile flags; trun: run flags).
"""
import shlex
import sys

# tcc compile --precision bf16|fp16|tf32|fp32 (default bf16 for --target
# cuda, fp32 for cpu). The checks always pass it explicitly.
PRECISION_FLAG = "--precision"

# fp16 loss scaling: --loss-scale dynamic|none, --initial-loss-scale V.
LOSS_SCALE_FLAG = "--loss-scale"
INITIAL_LOSS_SCALE_FLAG = "--initial-loss-scale"
LOSS_SCALE_DYNAMIC = "dynamic"
LOSS_SCALE_NONE = "none"
# Which tool takes the two loss-scale flags: "tcc" (compile time) or "trun".
LOSS_SCALE_TOOL = "tcc"

# trun --metrics: each step record carries the loss scale and whether the
# step was skipped (inf/NaN in the scaled gradients: no update).
METRIC_LOSS_SCALE = "loss_scale"
METRIC_SKIPPED = "overflow"
# What METRIC_SKIPPED holds: "per_step" (true / 1 on the record of a skipped
# step, false / 0 otherwise) or "cumulative" (skipped steps so far).
SKIPPED_COUNTS = "per_step"
# trun's record kind of a step it rolled back (--on-nan skip); a skipped
# step may be written with this kind too.
SKIP_RECORD_KIND = "skip"

# PyTorch GradScaler's defaults, which the issue asks tcc to follow.
GRADSCALER_INIT_SCALE = 65536.0
GRADSCALER_BACKOFF = 0.5
GRADSCALER_GROWTH = 2.0
GRADSCALER_GROWTH_INTERVAL = 2000


def shell_assignments():
    names = {
        "AMP_PRECISION_FLAG": PRECISION_FLAG,
        "AMP_LOSS_SCALE_FLAG": LOSS_SCALE_FLAG,
        "AMP_INITIAL_LOSS_SCALE_FLAG": INITIAL_LOSS_SCALE_FLAG,
        "AMP_LOSS_SCALE_DYNAMIC": LOSS_SCALE_DYNAMIC,
        "AMP_LOSS_SCALE_NONE": LOSS_SCALE_NONE,
        "AMP_LOSS_SCALE_TOOL": LOSS_SCALE_TOOL,
    }
    return "\n".join(f"{k}={shlex.quote(v)}" for k, v in names.items())


if __name__ == "__main__":
    if sys.argv[1:] != ["--shell"]:
        sys.exit("usage: amp_names.py --shell")
    print(shell_assignments())
