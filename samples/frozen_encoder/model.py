"""A frozen encoder feeding a trainable head (issue 17's frozen-subgraph
caching): 784 -> [Linear, LayerNorm, GELU] x 2 (frozen, `Model.freeze`) ->
Linear head -> 10 logits, trained with SGD + momentum. Compiled with
`tcc compile --cache-frozen`, the step gets the entries encode and
train_cached (tg-cache-frozen), and trun encodes each image once in the
first epoch and trains the head from its cache afterwards.

    python3 samples/frozen_encoder/model.py -o /tmp/fe.pbtxt
    build/bin/tcc compile --target cpu --cache-frozen /tmp/fe.pbtxt -o /tmp/fe.so
    build/bin/trun /tmp/fe.so --data /usr/share/datasets/fashion-mnist --epochs 2
"""

import argparse

import tcc
from tcc import nn


class FrozenEncoderClassifier(nn.Module):
    def __init__(self, inputs=784, hidden=(512, 256), classes=10):
        super().__init__()
        layers, width = [], inputs
        for h in hidden:
            layers += [nn.Linear(width, h), nn.LayerNorm(h), nn.GELU()]
            width = h
        self.encoder = nn.Sequential(*layers)   # encoder.0.weight, ...
        self.head = nn.Linear(width, classes, init=tcc.normal(0.01))

    def forward(self, x):
        return self.head(self.encoder(x))


def build(batch=64, hidden=(512, 256), lr=0.05):
    m = tcc.Model("frozen_encoder")
    images = m.input("image", (batch, 784))
    labels = m.input("label", (batch,), "i32")
    net = FrozenEncoderClassifier(hidden=hidden)
    logits = net(images)
    m.output("logits", logits)
    loss = nn.functional.cross_entropy(logits, labels, name="loss")
    # The encoder stands for a pretrained one (trun --init-from would load
    # its weights); only the head trains.
    m.freeze(*[name for name, _ in net.named_parameters() if name.startswith("encoder.")])
    m.train(loss, tcc.SGD(lr=lr, momentum=0.9))
    return m


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True, help=".pb or .pbtxt")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", default="512,256", help="encoder widths")
    ap.add_argument("--lr", type=float, default=0.05)
    a = ap.parse_args()
    try:
        hidden = tuple(int(w) for w in a.hidden.split(","))
    except ValueError:
        ap.error(f"--hidden needs widths like 512,256, got {a.hidden!r}")
    try:
        model = build(a.batch, hidden, a.lr)
        model.save(a.output)
    except tcc.TccError as e:
        raise SystemExit(f"model.py: error: {e}")
    print(f"wrote {a.output}: {len(model.params())} parameters")
