"""The char-level GPT sample written with tcc's Python front end: the same
model file as gpt_char.pbtxt (which `tcc-models gpt` wrote; the test
python_models_equal compares the two). The network itself is
tcc.models.GPT, a few dozen lines of tcc.nn modules (python/tcc/models.py).

    python3 samples/gpt_char/model.py -o /tmp/gpt_char.pbtxt
    build/bin/tcc compile /tmp/gpt_char.pbtxt -o /tmp/gpt_char.so
"""

import argparse

import tcc
from tcc import models

# 4 layers, width 128, 4 heads, context 128, the 113 characters of Debian's
# fortunes; AdamW, warmup 50 steps then cosine to step 1000, clip 1.0.
SAMPLE = dict(vocab=113, context=128, layers=4, width=128, heads=4, batch=32,
              lr=5e-3, warmup=50, decay_steps=1000, min_lr=5e-4)


def build(**overrides) -> tcc.Model:
    return models.gpt(**{**SAMPLE, **overrides})


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True, help=".pb or .pbtxt")
    ap.add_argument("--vocab", type=int, default=SAMPLE["vocab"],
                    help="characters in the text (tcc-data prints it)")
    a = ap.parse_args()
    try:
        build(vocab=a.vocab).save(a.output)
    except tcc.TccError as e:
        raise SystemExit(f"model.py: error: {e}")
    print(f"wrote {a.output}")
