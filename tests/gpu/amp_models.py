#!/usr/bin/env python3
"""The models of the AMP checks (tests/gpu/amp_checks.sh), in one place:
prepare.sh builds them with tcc-models from these configurations, and
torch_amp_losses.py builds the same ones in PyTorch (gpt_reference.py).

  gpt_char    the samples/gpt_char model (prepare.sh checks that these flags
              write exactly samples/gpt_char/gpt_char.pbtxt), on the
              fortunes as characters (113 ids)
  gpt2_short  GPT-2 small's shape (12 layers, width 768, 12 heads, vocab
              50304) at context 128, batch 32: 4096 tokens a step; on the
              fortunes as bytes (ids < 256 of the 50304: real text, so the
              loss falls, unlike random tokens); lr 6e-4, betas 0.9/0.95,
              20 warmup steps, cosine to step 200
  underflow   gpt_char with its loss multiplied by LOSS_WEIGHT = 2^-14 and
              AdamW's eps and the clip threshold multiplied by it too: in
              exact arithmetic the same training as gpt_char (AdamW divides
              the gradient's scale out; a power of two scales exactly), but
              every gradient is 2^-14 times smaller. The largest element of
              d loss / d logits is then below LOSS_WEIGHT / (B T) = 2^-26,
              under half of fp16's smallest subnormal (2^-24): in fp16
              without loss scaling every gradient rounds to zero. With
              GradScaler's initial scale 2^16 the products see gradients 4x
              gpt_char's; bf16 has fp32's exponent range and needs no scale.

    amp_models.py args NAME         the tcc-models gpt flags, one per line
    amp_models.py --shell           AMP_DEFAULT_STEPS, AMP_LOSS_WEIGHT,
                                    AMP_OVERFLOW_SCALE and AMP_DATA_<NAME>
                                    (the token shard prefix) for eval
    amp_models.py weight-loss IN OUT
                                    IN (a tcc-models gpt .pbtxt) with its
                                    training loss multiplied by LOSS_WEIGHT
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "parity"))
import gpt_reference as ref  # noqa: E402

STEPS = 200
LOSS_WEIGHT = 2.0 ** -14

_GPT_CHAR = dict(vocab=113, context=128, layers=4, width=128, heads=4,
                 batch=32, lr=5e-3, warmup=50, decay_steps=1000, min_lr=5e-4)

CONFIGS = {
    "gpt_char": ref.GptConfig(**_GPT_CHAR),
    "gpt2_short": ref.GptConfig(vocab=50304, context=128, layers=12, width=768,
                                heads=12, batch=32, lr=6e-4, beta1=0.9,
                                beta2=0.95, eps=1e-8, weight_decay=0.1,
                                grad_clip=1.0, warmup=20, decay_steps=STEPS,
                                min_lr=6e-5),
    "underflow": ref.GptConfig(**_GPT_CHAR, eps=1e-8 * LOSS_WEIGHT,
                               grad_clip=1.0 * LOSS_WEIGHT),
}

# Token shards (prepare.sh: shuffle_fortunes.py, then tcc-data tokenize
# --level char / byte): DIR/data/NAME_train.bin.
DATA = {"gpt_char": "fortunes_shuffled", "gpt2_short": "fortunes_shuffled_bytes",
        "underflow": "fortunes_shuffled"}

# The fp16 overflow check's initial loss scale: 2^16 times GradScaler's
# default. gpt_char's d loss / d logits alone reaches S / (B T) = S / 2^12,
# past fp16's largest value (65504) for any S above about 2^28.
OVERFLOW_INITIAL_SCALE = 2.0 ** 32


def weight_loss(text, weight):
    """A tcc-models gpt model text with training.loss = weight * loss."""
    nodes = f'''nodes {{
  name: "loss_weight"
  op: "constant"
  outputs: "loss_weight"
  attrs {{
    key: "dtype"
    value {{
      s: "f32"
    }}
  }}
  attrs {{
    key: "shape"
    value {{
      ints {{
      }}
    }}
  }}
  attrs {{
    key: "value"
    value {{
      f: {weight!r}
    }}
  }}
}}
nodes {{
  name: "weighted_loss"
  op: "mul"
  inputs: "loss"
  inputs: "loss_weight"
  outputs: "weighted_loss"
}}
'''
    # The nodes go after the last node (before the outputs / training).
    last = text.rfind("\nnodes {")
    end = text.find("\n}\n", last)
    loss = re.compile(r'^(training \{\n  loss: )"loss"$', re.MULTILINE)
    if last < 0 or end < 0 or len(loss.findall(text)) != 1:
        raise ValueError("not a tcc-models gpt model text: no nodes, or no "
                         "training block with loss: \"loss\"")
    text = text[:end + 3] + nodes + text[end + 3:]
    return loss.sub(r'\1"weighted_loss"', text)


def main(argv):
    if len(argv) == 2 and argv[0] == "args" and argv[1] in CONFIGS:
        print("\n".join(CONFIGS[argv[1]].tcc_models_args()))
    elif argv == ["--shell"]:
        print(f"AMP_DEFAULT_STEPS={STEPS}")
        print(f"AMP_LOSS_WEIGHT={LOSS_WEIGHT!r}")
        print(f"AMP_OVERFLOW_SCALE={OVERFLOW_INITIAL_SCALE:.0f}")
        for name, prefix in DATA.items():
            print(f"AMP_DATA_{name}={prefix}")
    elif len(argv) == 3 and argv[0] == "weight-loss":
        with open(argv[1]) as f:
            text = weight_loss(f.read(), LOSS_WEIGHT)
        with open(argv[2], "w") as f:
            f.write(text)
    else:
        sys.exit(f"usage: amp_models.py args NAME (NAME: {', '.join(CONFIGS)}) "
                 "| --shell | weight-loss IN OUT")


if __name__ == "__main__":
    main(sys.argv[1:])
