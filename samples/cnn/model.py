"""A small CNN on Fashion-MNIST written with tcc's Python front end:
[Conv2d 3x3, BatchNorm2d, ReLU, MaxPool2d 2] x 2 -> Dropout -> Linear ->
10 logits (NCHW), trained with AdamW and a warmup + cosine schedule.

    python3 samples/cnn/model.py -o /tmp/cnn.pbtxt --epochs 3
    build/bin/tcc compile --target cpu /tmp/cnn.pbtxt -o /tmp/cnn.so
    build/bin/trun /tmp/cnn.so --data /usr/share/datasets/fashion-mnist --epochs 3
"""

import argparse

import tcc
from tcc import nn, ops


class CNN(nn.Module):
    """(B, 784) images -> (B, 10) logits: two conv-relu-pool stages (28 -> 14
    -> 7) then a linear head over the flattened (C2, 7, 7) features."""

    def __init__(self, channels=(32, 64), classes=10, dropout=0.0,
                 batch_norm=True):
        super().__init__()
        c1, c2 = channels
        # A conv followed by batch norm needs no bias (the norm's shift is one).
        self.conv1 = nn.Conv2d(1, c1, 3, padding=1, bias=not batch_norm)
        self.bn1 = nn.BatchNorm2d(c1) if batch_norm else nn.Sequential()
        self.act1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1, bias=not batch_norm)
        self.bn2 = nn.BatchNorm2d(c2) if batch_norm else nn.Sequential()
        self.act2 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(2)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(c2 * 7 * 7, classes)

    def forward(self, x):
        b = x.shape[0]
        h = ops.reshape(x, (b, 1, 28, 28), name="image_nchw")
        h = self.pool1(self.act1(self.bn1(self.conv1(h))))
        h = self.pool2(self.act2(self.bn2(self.conv2(h))))
        h = ops.reshape(h, (b, self.head.in_features), name="features")
        return self.head(self.drop(h))


def build(batch=64, channels=(32, 64), dropout=0.0, lr=3e-3, steps=2811,
          warmup=100, batch_norm=True):
    m = tcc.Model("cnn")
    images = m.input("image", (batch, 784))        # trun feeds x/255, normalized
    labels = m.input("label", (batch,), "i32")
    net = CNN(channels, dropout=dropout, batch_norm=batch_norm)
    logits = net(images)
    m.output("logits", logits)                     # trun's test accuracy reads it
    loss = nn.functional.cross_entropy(logits, labels, name="loss")
    for name, p in net.named_parameters():         # decay the weights only
        if len(p.shape) < 2:
            m.no_weight_decay(name)
    m.train(loss, tcc.AdamW(lr=lr, weight_decay=0.05),
            schedule=tcc.WarmupCosine(warmup, steps, lr / 20))
    return m


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True, help=".pb or .pbtxt")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--channels", default="32,64", help="conv widths, e.g. 16,32")
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="before the head")
    ap.add_argument("--no-batch-norm", action="store_true",
                    help="conv-relu-pool without BatchNorm2d (convs get biases)")
    ap.add_argument("--lr", type=float, default=3e-3, help="AdamW peak rate")
    ap.add_argument("--epochs", type=int, default=3,
                    help="the cosine's length in epochs of 60000 images")
    ap.add_argument("--steps", type=int, help="or in steps")
    a = ap.parse_args()
    try:
        channels = tuple(int(w) for w in a.channels.split(","))
        if len(channels) != 2:
            raise ValueError
    except ValueError:
        ap.error(f"--channels needs two widths like 32,64, got {a.channels!r}")
    try:
        steps = a.steps or a.epochs * (60000 // a.batch)
        model = build(a.batch, channels, a.dropout, a.lr, steps,
                      warmup=min(100, steps // 10),
                      batch_norm=not a.no_batch_norm)
        model.save(a.output)
    except tcc.TccError as e:
        raise SystemExit(f"model.py: error: {e}")
    print(f"wrote {a.output}: {len(model.params())} parameters")
