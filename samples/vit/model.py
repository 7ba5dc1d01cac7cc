"""A small vision transformer on Fashion-MNIST written with tcc's Python
front end: 7x7 (or 4x4) patches embedded by reshape + transpose + matmul
(or a stride-p Conv2d), learned 2-D positions (a row table plus a column
table) or 2-D rotary positions over the patch grid, pre-norm transformer
blocks (bidirectional multi-head attention, GELU MLP), mean-pooled tokens,
a linear head; AdamW with a warmup + cosine schedule.

    python3 samples/vit/model.py -o /tmp/vit.pbtxt --epochs 6
    build/bin/tcc compile --target cpu /tmp/vit.pbtxt -o /tmp/vit.so
    build/bin/trun /tmp/vit.so --data /usr/share/datasets/fashion-mnist --epochs 6

Other code can build the network itself: `ViT(...)(images)` on a
(B, 784) tensor of a tcc.Model gives (B, classes) logits, and
`ViT.features` the pooled (B, dim) encoding.
"""

import argparse
import math

import tcc
from tcc import nn, ops

IMAGE = 28  # Fashion-MNIST's side


class Attention(nn.Module):
    """Multi-head self-attention over all tokens (no mask): a packed q/k/v
    projection, softmax(q kᵀ / sqrt(D)) v, an output projection."""

    def __init__(self, dim, heads):
        super().__init__()
        if dim % heads:
            raise tcc.TccError(f"Attention: dim {dim} does not divide into "
                               f"{heads} heads")
        self.dim, self.heads = dim, heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, rope=None):
        B, T, C = x.shape
        H, D = self.heads, C // self.heads
        m = x.model
        parts = ops.split(self.qkv(x), [C, C, C], axis=2,
                          name=self.node_name("split"),
                          outputs=[self.node_name(s) for s in "qkv"])

        def heads(v):  # (B, T, C) -> (B, H, T, D)
            r = ops.reshape(v, [B, T, H, D], name=m.unique_name(f"{v.name}.heads"))
            return ops.transpose(r, [0, 2, 1, 3], name=m.unique_name(f"{v.name}.bhtd"))
        q, k, v = (heads(p) for p in parts)
        if rope is not None:
            q, k = rope.apply(q), rope.apply(k)
        scores = ops.matmul(q, k, transpose_b=True, name=self.node_name("scores"))
        scale = ops.constant(m, 1.0 / math.sqrt(D), name=self.node_name("scale"))
        probs = ops.softmax(ops.mul(scores, scale, name=self.node_name("scaled")),
                            axis=-1, name=self.node_name("probs"))
        y = ops.matmul(probs, v, name=self.node_name("context"))  # (B, H, T, D)
        y = ops.transpose(y, [0, 2, 1, 3], name=self.node_name("context.bthd"))
        return self.proj(ops.reshape(y, [B, T, C], name=self.node_name("context.btc")))


class Block(nn.Module):
    """Pre-norm: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, dim, heads, mlp_ratio=2):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp_ratio * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(mlp_ratio * dim, dim)

    def forward(self, x, rope=None):
        x = ops.add(x, self.attn(self.ln1(x), rope), name=self.node_name("attn_out"))
        h = self.fc2(self.act(self.fc1(self.ln2(x))))
        return ops.add(x, h, name=self.node_name("mlp_out"))


class Rope2d:
    """Rotary positions over the G x G patch grid: the first half of each
    head's D dims rotates by the patch's row, the second half by its
    column (each half: D/4 frequencies theta^(-4i/D), rotate_half pairs)."""

    def __init__(self, model, grid, head_size, theta=100.0):
        if head_size % 4:
            raise tcc.TccError(f"2-D rotary positions need a head size divisible "
                               f"by 4, got {head_size}")
        self.half = head_size // 2
        q, n = head_size // 4, model.fresh_name
        shape = [grid, grid, q]
        idx = ops.iota(model, shape, axis=2, dtype="f32", name=n("rope.idx"))
        step = ops.constant(model, -2.0 * math.log(theta) / self.half,
                            name=n("rope.log_freq_step"))
        inv_freq = ops.exp(ops.mul(idx, step, name=n("rope.log_freq")),
                           name=n("rope.inv_freq"))
        self.tables = []
        for axis, what in ((0, "row"), (1, "col")):
            pos = ops.iota(model, shape, axis=axis, dtype="f32", name=n(f"rope.{what}"))
            angle = ops.reshape(ops.mul(pos, inv_freq, name=n(f"rope.{what}_angle3")),
                                [grid * grid, q], name=n(f"rope.{what}_angle"))
            c = ops.cos(angle, name=n(f"rope.{what}_cos_half"))
            s = ops.sin(angle, name=n(f"rope.{what}_sin_half"))
            self.tables.append((ops.concat([c, c], axis=1, name=n(f"rope.{what}_cos")),
                                ops.concat([s, s], axis=1, name=n(f"rope.{what}_sin"))))

    def apply(self, x):  # x (B, H, T, D)
        m, d, u = x.model, x.shape[-1], x.model.unique_name
        halves = [ops.slice(x, [0], [self.half], axes=[3], name=u(f"{x.name}.rows")),
                  ops.slice(x, [self.half], [d], axes=[3], name=u(f"{x.name}.cols"))]
        rotated = [nn.apply_rotary(h, c, s, f"{h.name}.rope")
                   for h, (c, s) in zip(halves, self.tables)]
        return ops.concat(rotated, axis=3, name=m.unique_name(f"{x.name}.rope"))


class ViT(nn.Module):
    """(B, 784) images -> (B, classes) logits."""

    def __init__(self, patch=7, dim=64, heads=4, depth=4, mlp_ratio=2,
                 classes=10, pos="rope", embed="matmul"):
        super().__init__()
        if IMAGE % patch:
            raise tcc.TccError(f"ViT: patch {patch} does not divide {IMAGE}")
        if pos not in ("learned", "rope") or embed not in ("matmul", "conv"):
            raise tcc.TccError(f"ViT: pos must be learned or rope, embed matmul "
                               f"or conv (got {pos!r}, {embed!r})")
        self.patch, self.grid, self.dim = patch, IMAGE // patch, dim
        self.heads, self.pos, self.embed = heads, pos, embed
        if embed == "conv":
            self.patch_embed = nn.Conv2d(1, dim, patch, stride=patch)
        else:
            self.patch_embed = nn.Linear(patch * patch, dim)
        if pos == "learned":  # position (r, c) = row_pos[r] + col_pos[c]
            self.row_pos = nn.Parameter((self.grid, 1, dim), tcc.normal(0.02))
            self.col_pos = nn.Parameter((1, self.grid, dim), tcc.normal(0.02))
        self.blocks = nn.ModuleList([Block(dim, heads, mlp_ratio) for _ in range(depth)])
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def tokens(self, x):
        """(B, 784) -> (B, G*G, dim) patch embeddings, row-major patches."""
        b, p, g, n = x.shape[0], self.patch, self.grid, self.node_name
        if self.embed == "conv":
            img = ops.reshape(x, [b, 1, IMAGE, IMAGE], name=n("image_nchw"))
            y = ops.reshape(self.patch_embed(img), [b, self.dim, g * g], name=n("bct"))
            return ops.transpose(y, [0, 2, 1], name=n("tokens"))
        # (B, r, i, c, j) -> (B, r, c, i, j): pixel (r*p + i, c*p + j)
        grid = ops.reshape(x, [b, g, p, g, p], name=n("grid"))
        patches = ops.transpose(grid, [0, 1, 3, 2, 4], name=n("patches5"))
        patches = ops.reshape(patches, [b, g * g, p * p], name=n("patches"))
        return self.patch_embed(patches)

    def features(self, x):
        """(B, 784) -> (B, dim): the mean of the final normed tokens."""
        h, n, rope = self.tokens(x), self.node_name, None
        if self.pos == "learned":
            table = ops.add(self.row_pos, self.col_pos, name=n("pos_grid"))
            table = ops.reshape(table, [self.grid * self.grid, self.dim], name=n("pos"))
            h = ops.add(h, table, name=n("positioned"))
        else:
            rope = Rope2d(x.model, self.grid, self.dim // self.heads)
        for block in self.blocks:
            h = block(h, rope)
        return ops.mean(self.ln_f(h), axes=[1], name=n("pooled"))

    def forward(self, x):
        return self.head(self.features(x))


def build(batch=128, patch=7, dim=64, heads=4, depth=4, mlp_ratio=2,
          pos="rope", embed="matmul", lr=3e-3, weight_decay=0.05,
          steps=2808, warmup=100, name="vit"):
    """The training model: inputs image (batch, 784) and label (batch,),
    output logits, loss cross-entropy; AdamW (no decay on biases, norms and
    position tables), gradient clipping at 1, warmup + cosine to lr / 20."""
    m = tcc.Model(name)
    images = m.input("image", (batch, IMAGE * IMAGE))  # trun feeds x/255, normalized
    labels = m.input("label", (batch,), "i32")
    net = ViT(patch, dim, heads, depth, mlp_ratio, pos=pos, embed=embed)
    logits = net(images)
    m.output("logits", logits)                          # trun's test accuracy reads it
    loss = nn.functional.cross_entropy(logits, labels, name="loss")
    for pname, p in net.named_parameters():
        if len(p.shape) < 2 or pname.endswith("_pos"):
            m.no_weight_decay(pname)
    m.train(loss, tcc.AdamW(lr=lr, weight_decay=weight_decay), grad_clip=1.0,
            schedule=tcc.WarmupCosine(warmup, steps, lr / 20))
    return m


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True, help=".pb or .pbtxt")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--patch", type=int, default=7, help="4 or 7 (divides 28)")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--depth", type=int, default=4, help="transformer blocks")
    ap.add_argument("--mlp-ratio", type=int, default=2)
    ap.add_argument("--pos", choices=("learned", "rope"), default="rope",
                    help="learned row + column tables, or 2-D rotary")
    ap.add_argument("--embed", choices=("matmul", "conv"), default="matmul",
                    help="patches by reshape + transpose + matmul, or a "
                         "stride-p Conv2d")
    ap.add_argument("--lr", type=float, default=3e-3, help="AdamW peak rate")
    ap.add_argument("--epochs", type=int, default=6,
                    help="the cosine's length in epochs of 60000 images")
    ap.add_argument("--steps", type=int, help="or in steps")
    a = ap.parse_args()
    try:
        steps = a.steps or a.epochs * (60000 // a.batch)
        model = build(a.batch, a.patch, a.dim, a.heads, a.depth, a.mlp_ratio,
                      a.pos, a.embed, a.lr, steps=steps,
                      warmup=min(100, steps // 10))
        model.save(a.output)
    except tcc.TccError as e:
        raise SystemExit(f"model.py: error: {e}")
    print(f"wrote {a.output}: {len(model.params())} parameters")
