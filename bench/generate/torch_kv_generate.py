"""Greedy generation with a KV cache in PyTorch: the baseline trun's
prefill / decode entries are measured against (bench/generate/run.sh).

The model is tests/parity/gpt_reference.py's GPT (the function tcc-models
gpt builds), with the weights trun --save-weights wrote; rows are B copies
of one prompt (token ids), greedy (argmax) decoding, a (B, H, T, D) cache per
layer preallocated, written at each position, attention over positions
<= pos (the slice cache[:, :, :pos + 1]). One prefill of the prompt, then
one decode step per new token, as trun does. Prints one JSON line: tokens/s
over the whole generation (prefill included), ms per decode step, and the
first row's tokens (to compare with trun's greedy output).

  python3 torch_kv_generate.py --weights W.safetensors --model-args
      "--vocab 256 --context 256 ..." --batch 8 --prompt-ids 10,104,101
      --new 200 --device cpu|cuda [--repeat 3]
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "parity"))
import gpt_reference as ref  # noqa: E402
import tcc_files  # noqa: E402


def config(model_args):
    """GptConfig from tcc-models gpt flags (the ones this benchmark uses)."""
    cfg = ref.GptConfig()
    words = model_args.split()
    i = 0
    while i < len(words):
        flag = words[i]
        if flag == "--untied":
            cfg.tied = False
            i += 1
            continue
        if flag == "--no-bias":
            cfg.bias = False
            i += 1
            continue
        value = words[i + 1]
        field = {"--vocab": "vocab", "--context": "context", "--layers": "layers",
                 "--width": "width", "--heads": "heads", "--norm": "norm",
                 "--mlp": "mlp", "--positions": "positions",
                 "--batch": "batch"}.get(flag)
        if field is None:
            raise SystemExit(f"torch_kv_generate: flag {flag} not supported here")
        old = getattr(cfg, field)
        setattr(cfg, field, type(old)(value))
        i += 2
    return cfg


class KvGpt:
    def __init__(self, cfg, P, batch, device):
        self.cfg, self.P, self.B = cfg, P, batch
        C, H, D, T = cfg.width, cfg.heads, cfg.head_size, cfg.context
        self.k = [torch.zeros(batch, H, T, D, device=device) for _ in range(cfg.layers)]
        self.v = [torch.zeros(batch, H, T, D, device=device) for _ in range(cfg.layers)]
        self.rope = ref.rope_tables(cfg, device) if cfg.positions == "rope" else None
        self.scale = 1.0 / math.sqrt(D)

    def _attend(self, layer, x, start):
        """x (B, S, C) at positions start .. start + S - 1."""
        cfg, P = self.cfg, self.P
        B, S, C = x.shape
        H, D = cfg.heads, cfg.head_size
        name = f"h.{layer}.attn"
        qkv = ref._linear(cfg, P, name + ".c_attn", x)
        q, k, v = (t.reshape(B, S, H, D).transpose(1, 2) for t in qkv.split(C, dim=2))
        if self.rope is not None:
            cos, sin = (t[start:start + S] for t in self.rope)
            q, k = ref._rope(q, cos, sin), ref._rope(k, cos, sin)
        self.k[layer][:, :, start:start + S] = k
        self.v[layer][:, :, start:start + S] = v
        keys = self.k[layer][:, :, :start + S]
        values = self.v[layer][:, :, :start + S]
        scores = (q @ keys.transpose(-2, -1)) * self.scale
        if S > 1:
            mask = torch.ones(S, start + S, dtype=torch.bool, device=x.device).triu(
                diagonal=start + 1)
            scores = scores.masked_fill(mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ values
        return ref._linear(cfg, P, name + ".c_proj", y.transpose(1, 2).reshape(B, S, C))

    def step(self, tokens, start):
        """tokens (B, S) at positions start..: the logits of the last one."""
        cfg, P = self.cfg, self.P
        x = F.embedding(tokens, P["wte"])
        if cfg.positions == "learned":
            x = x + P["wpe"][start:start + tokens.shape[1]]
        for layer in range(cfg.layers):
            p = f"h.{layer}"
            x = x + self._attend(layer, ref._norm(cfg, P, p + ".ln_1", x), start)
            x = x + ref._mlp(cfg, P, p + ".mlp", ref._norm(cfg, P, p + ".ln_2", x))
        x = ref._norm(cfg, P, "ln_f", x[:, -1:])
        return (x @ (P["wte"].t() if cfg.tied else P["lm_head.weight"]))[:, 0]


def generate(model, prompt, new, device):
    tokens = torch.tensor([prompt] * model.B, dtype=torch.long, device=device)
    out = []
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    logits = model.step(tokens, 0)
    nxt = logits.argmax(-1)
    out.append(nxt)
    sync()
    prefill = time.perf_counter() - start
    pos = len(prompt)
    for _ in range(new - 1):
        logits = model.step(nxt[:, None], pos)
        nxt = logits.argmax(-1)
        out.append(nxt)
        pos += 1
    first_row = [int(t[0]) for t in out]  # (syncs the GPU)
    sync()
    total = time.perf_counter() - start
    return total, prefill, first_row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--model-args", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("--new", type=int, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    cfg = config(a.model_args)
    prompt = [int(t) for t in a.prompt_ids.split(",")]
    if len(prompt) + a.new > cfg.context:
        raise SystemExit("torch_kv_generate: prompt + new tokens exceed the context")
    weights, _ = tcc_files.read_safetensors(a.weights)
    P = {name: torch.tensor(weights[name], dtype=torch.float32, device=a.device)
         for name, _, _ in ref.param_specs(cfg)}
    best = None
    with torch.no_grad():
        for _ in range(a.repeat):
            model = KvGpt(cfg, P, a.batch, a.device)
            run = generate(model, prompt, a.new, a.device)
            if best is None or run[0] < best[0]:
                best = run
    total, prefill, first_row = best
    tokens = a.batch * a.new
    print(json.dumps({
        "torch": torch.__version__, "device": a.device, "batch": a.batch,
        "prompt": len(prompt), "new": a.new, "seconds": round(total, 4),
        "tokens_per_s": round(tokens / total, 1),
        "prefill_ms": round(prefill * 1e3, 3),
        "decode_ms": round((total - prefill) * 1e3 / max(a.new - 1, 1), 3),
        "threads": torch.get_num_threads(), "first_row": first_row}))


if __name__ == "__main__":
    main()
