"""A Fashion-MNIST classifier written with tcc's Python front end (tcc.nn):
784 -> [Linear, LayerNorm, GELU, Dropout] x 2 -> Linear -> 10 logits,
trained with AdamW (no weight decay on biases and norms), gradient clipping
and a warmup + cosine schedule — what `tcc-models mlp` cannot express.

    python3 samples/python_mlp/model.py -o /tmp/pmlp.pbtxt
    build/bin/tcc compile --target cpu /tmp/pmlp.pbtxt -o /tmp/pmlp.so
    build/bin/trun /tmp/pmlp.so --data /usr/share/datasets/fashion-mnist --epochs 2
"""

import argparse

import tcc
from tcc import nn


class Classifier(nn.Module):
    def __init__(self, inputs=784, hidden=(256, 128), classes=10, dropout=0.1):
        super().__init__()
        layers, width = [], inputs
        for h in hidden:
            layers += [nn.Linear(width, h), nn.LayerNorm(h), nn.GELU(),
                       nn.Dropout(dropout)]
            width = h
        self.body = nn.Sequential(*layers)  # body.0.weight, body.1.weight, ...
        self.head = nn.Linear(width, classes, init=tcc.normal(0.01))

    def forward(self, x):
        return self.head(self.body(x))


def build(batch=128, hidden=(256, 128), dropout=0.1, lr=2e-3, steps=936,
          warmup=50):
    m = tcc.Model("python_mlp")
    images = m.input("image", (batch, 784))       # trun feeds x/255, normalized
    labels = m.input("label", (batch,), "i32")
    net = Classifier(hidden=hidden, dropout=dropout)
    logits = net(images)
    m.output("logits", logits)                    # trun's test accuracy reads it
    loss = nn.functional.cross_entropy(logits, labels, name="loss")
    for name, p in net.named_parameters():        # decay the matrices only
        if len(p.shape) < 2:
            m.no_weight_decay(name)
    m.train(loss, tcc.AdamW(lr=lr, weight_decay=0.05), grad_clip=1.0,
            schedule=tcc.WarmupCosine(warmup, steps, lr / 20))
    return m


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True, help=".pb or .pbtxt")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--hidden", default="256,128", help="widths, e.g. 512,256")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=2e-3, help="AdamW peak rate")
    ap.add_argument("--epochs", type=int, default=2,
                    help="the cosine's length in epochs of 60000 images")
    ap.add_argument("--steps", type=int, help="or in steps")
    a = ap.parse_args()
    try:
        hidden = tuple(int(w) for w in a.hidden.split(","))
    except ValueError:
        ap.error(f"--hidden needs widths like 256,128, got {a.hidden!r}")
    try:
        steps = a.steps or a.epochs * (60000 // a.batch)
        model = build(a.batch, hidden, a.dropout, a.lr, steps,
                      warmup=min(50, steps // 10))
        model.save(a.output)
    except tcc.TccError as e:
        raise SystemExit(f"model.py: error: {e}")
    print(f"wrote {a.output}: {len(model.params())} parameters "
          f"({', '.join(p.name for p in model.params()[:3])}, ...)")
