"""A model with many parameters of odd sizes (1, 3, not multiples of 4 or 8,
several 65536-element chunks), each in the loss as sum(p * p), trained by
AdamW with clipping: the optimizer and gradient-norm groups get members of
every size and a group larger than one launch's parameter table."""
import sys
sizes = [1, 3, 4, 5, 7, 8, 9, 13, 31, 33, 100, 257, 1000, 4095, 4097, 10007]
shapes = []
for i in range(int(sys.argv[1])):
    n = sizes[i % len(sizes)]
    if i % 97 == 0:
        n = 200003  # several 65536-element sum chunks
    shapes.append([n] if i % 3 else [1, n] if n < 50 else [n // 7, 7] if n % 7 == 0 else [n])
out = ['schema_version: 1', 'name: "many"']
for i, s in enumerate(shapes):
    dims = " ".join("dims: %d" % d for d in s)
    nwd = " no_weight_decay: true" if i % 20 == 19 else ""
    out.append('params { name: "p%d" dtype: F32 shape { %s } init { kind: NORMAL scale: 0.5 seed: %d }%s }' % (i, dims, i + 1, nwd))
out.append('inputs { name: "x" dtype: F32 shape { dims: 1 } }')
for i in range(len(shapes)):
    out.append('nodes { name: "q%d" op: "mul" inputs: "p%d" inputs: "p%d" outputs: "q%d" }' % (i, i, i, i))
    out.append('nodes { name: "s%d" op: "sum" inputs: "q%d" outputs: "s%d" }' % (i, i, i))
prev = "s0"
for i in range(1, len(shapes)):
    out.append('nodes { name: "t%d" op: "add" inputs: "%s" inputs: "s%d" outputs: "t%d" }' % (i, prev, i, i))
    prev = "t%d" % i
out.append('nodes { name: "d" op: "sub" inputs: "%s" inputs: "x" outputs: "d" }' % prev)
out.append('nodes { name: "d2" op: "mul" inputs: "d" inputs: "d" outputs: "d2" }')
out.append('nodes { name: "loss" op: "sum" inputs: "d2" outputs: "loss" }')
out.append('training { loss: "loss" optimizer { adamw { learning_rate: 0.01 weight_decay: 0.1 } } grad_clip: 0.5 }')
print("\n".join(out))
