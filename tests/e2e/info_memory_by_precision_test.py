#!/usr/bin/env python3
"""trun --info's memory-by-precision table on a real tcc-compiled step.

A small classifier with a bf16 activation is compiled for the cpu target:

  h   = x @ w1                 f32 [B, H]
  hb  = cast(h, bf16)          bf16 [B, H]   (kernel output: read by the
  hbt = transpose(hb)          bf16 [H, B]    transpose, a kernel of its own)
  r   = relu(cast(hbt, f32))   f32 [H, B]
  logits = r^T @ w2            f32 [B, C]
  loss = mean(softmax_cross_entropy(logits, y)),  AdamW

and every number of the table is checked against values computed here from
the shapes (never read back from tcc's output):

  parameters       f32: (D*H + H*C) * 4 bytes; no bf16
  gradients        f32: one per parameter, the parameters' bytes (the
                   compiler's count of the workspace's gradient temporaries)
  optimizer state  f32: AdamW's m and v, twice the parameters
  temporaries      bf16: the two bf16 tensors of the forward and their two
                   gradients of the same shapes and type in the backward
                   (the cast's gradient is cast back): 4 * B*H * 2 bytes
  activations at peak: a part of the temporaries, per dtype, and at most
                   the workspace
  workspace        the descriptor's workspace bytes (the "workspace:" line)

usage: info_memory_by_precision_test.py TCC TRUN WORKDIR
"""
import os
import re
import subprocess
import sys

B, D, H, C = 64, 128, 256, 16
MIB = 1024.0 * 1024.0

MODEL = f"""
schema_version: 1
name: "bf16_info"
params {{ name: "w1" dtype: F32 shape {{ dims: {D} dims: {H} }} init {{ kind: NORMAL scale: 0.05 seed: 1 }} }}
params {{ name: "w2" dtype: F32 shape {{ dims: {H} dims: {C} }} init {{ kind: NORMAL scale: 0.05 seed: 2 }} }}
inputs {{ name: "x" dtype: F32 shape {{ dims: {B} dims: {D} }} }}
inputs {{ name: "y" dtype: I32 shape {{ dims: {B} }} }}
nodes {{ name: "h" op: "matmul" inputs: "x" inputs: "w1" outputs: "h" }}
nodes {{ name: "hb" op: "cast" inputs: "h" outputs: "hb" attrs {{ key: "dtype" value {{ s: "bf16" }} }} }}
nodes {{ name: "hbt" op: "transpose" inputs: "hb" outputs: "hbt" attrs {{ key: "perm" value {{ ints {{ values: 1 values: 0 }} }} }} }}
nodes {{ name: "hft" op: "cast" inputs: "hbt" outputs: "hft" attrs {{ key: "dtype" value {{ s: "f32" }} }} }}
nodes {{ name: "r" op: "relu" inputs: "hft" outputs: "r" }}
nodes {{ name: "logits" op: "matmul" inputs: "r" inputs: "w2" outputs: "logits" attrs {{ key: "transpose_a" value {{ b: true }} }} }}
nodes {{ name: "xent" op: "softmax_cross_entropy" inputs: "logits" inputs: "y" outputs: "xent" }}
nodes {{ name: "loss" op: "mean" inputs: "xent" outputs: "loss" }}
outputs {{ name: "logits" value: "logits" }}
training {{ loss: "loss" optimizer {{ adamw {{ learning_rate: 0.01 }} }} }}
"""


def run(*args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} exited {result.returncode}\n"
                 f"{result.stdout}\n{result.stderr}")
    return result.stdout


def parse_table(info):
    """{category: {column: MiB or None}} and the column names."""
    lines = info.splitlines()
    start = lines.index("memory by precision (MiB):")
    columns = lines[start + 1].split()
    table = {}
    for line in lines[start + 2:]:
        if not line.startswith("  ") or line.startswith("  ("):
            break
        match = re.match(r"  (.{24})(.*)$", line)
        category, cells = match.group(1).strip(), match.group(2)
        # Cells are 13 characters wide, right-aligned; blank ones are absent.
        values = [cells[i:i + 13].strip() for i in range(0, len(cells), 13)]
        values = values[-len(columns):] if len(values) >= len(columns) else \
            [""] * (len(columns) - len(values)) + values
        table[category] = {
            col: (None if v in ("", "-") else float(v))
            for col, v in zip(columns, values)
        }
    return columns, table


def expect_mib(what, actual, expected_bytes):
    # The table prints MiB with four decimals: half a unit of the last digit.
    if actual is None or abs(actual - expected_bytes / MIB) > 0.00005 + 1e-12:
        sys.exit(f"FAIL: {what}: table says {actual} MiB, "
                 f"shapes say {expected_bytes} bytes = {expected_bytes / MIB:.6f} MiB")


def main():
    tcc, trun, workdir = sys.argv[1:4]
    os.makedirs(workdir, exist_ok=True)
    model = os.path.join(workdir, "bf16_info.pbtxt")
    with open(model, "w") as f:
        f.write(MODEL)
    step = os.path.join(workdir, "bf16_info.so")
    run(tcc, "compile", model, "--target", "cpu", "-o", step)
    info = run(trun, step, "--info")
    print(info)

    columns, table = parse_table(info)
    if columns != ["f32", "bf16", "total"]:
        sys.exit(f"FAIL: columns {columns}, expected f32, bf16, total")
    param_bytes = (D * H + H * C) * 4
    expect_mib("parameters f32", table["parameters"]["f32"], param_bytes)
    if table["parameters"]["bf16"] is not None:
        sys.exit("FAIL: parameters have no bf16 bytes")
    expect_mib("optimizer state f32", table["optimizer state"]["f32"],
               2 * param_bytes)
    if "gradients" not in table:
        sys.exit("FAIL: no 'gradients' row")
    expect_mib("gradients f32", table["gradients"]["f32"], param_bytes)
    if table["gradients"]["bf16"] is not None:
        sys.exit("FAIL: the gradients of f32 parameters have no bf16 bytes")
    bf16_temporaries = 4 * B * H * 2
    expect_mib("temporaries bf16", table["temporaries (no reuse)"]["bf16"],
               bf16_temporaries)

    workspace = int(re.search(r"^workspace: (\d+) bytes$", info, re.M).group(1))
    expect_mib("workspace total", table["workspace (total)"]["total"], workspace)
    peak, temporaries = table["activations at peak"], table["temporaries (no reuse)"]
    if not peak["f32"] or peak["f32"] <= 0:
        sys.exit("FAIL: no f32 activations at the peak")
    for col in ("f32", "bf16"):
        if (peak[col] or 0) > (temporaries[col] or 0) + 1e-4:
            sys.exit(f"FAIL: {col} at the peak exceeds all {col} temporaries")
    if peak["total"] > workspace / MIB + 1e-4:
        sys.exit("FAIL: activations at the peak exceed the workspace")
    print("PASS")


if __name__ == "__main__":
    main()
