"""A GPT as a torch.nn.Module, the same function as gpt_reference.py's
gpt2 configuration (LayerNorm, GELU tanh, learned positions, tied
embedding, biases) written the way PyTorch users write it: nn.Linear
layers in an nn.ModuleList "h", a registered tril buffer as the causal
mask applied with masked_fill, F.layer_norm, view/transpose/split."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        # Not persistent: the state_dict holds only weights, so the weights
        # trun saves load with load_state_dict(strict=True).
        self.register_buffer("mask", torch.tril(torch.ones(context, context))
                             .view(1, 1, context, context), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // self.heads
        q = q.view(B, T, self.heads, hs).transpose(1, 2)
        k = k.view(B, T, self.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Mlp(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.ln_1 = LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, context)
        self.ln_2 = LayerNorm(width)
        self.mlp = Mlp(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, context, layers, width, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.h = nn.ModuleList([Block(width, heads, context) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.zeros_(m.bias)

    def forward(self, tokens):
        B, T = tokens.size()
        pos = torch.arange(0, T, dtype=torch.long, device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class NanoSelfAttention(nn.Module):
    """nanoGPT's attention: F.scaled_dot_product_attention(is_causal=True)
    where torch has it (2.x), else the tril-buffer form."""

    def __init__(self, width, heads, context):
        super().__init__()
        self.n_head, self.n_embd = heads, width
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.flash = hasattr(F, "scaled_dot_product_attention")
        if not self.flash:
            self.register_buffer("bias", torch.tril(torch.ones(context, context))
                                 .view(1, 1, context, context), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0,
                                               is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class NanoBlock(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = NanoSelfAttention(width, heads, context)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(width, 4 * width), gelu=nn.GELU(),
                                      c_proj=nn.Linear(4 * width, width),
                                      dropout=nn.Dropout(0.0)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        m = self.mlp
        return x + m.dropout(m.c_proj(m.gelu(m.c_fc(self.ln_2(x)))))


class NanoGpt(nn.Module):
    """nanoGPT's model.py structure: transformer ModuleDict, forward(idx,
    targets=None) returning (logits, loss) with ignore_index=-1, GELU (erf),
    tied head; the inputs are named tokens/targets for trun's token model."""

    def __init__(self, vocab, context, layers, width, heads):
        super().__init__()
        self.block_size = context
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width), wpe=nn.Embedding(context, width),
            drop=nn.Dropout(0.0),
            h=nn.ModuleList([NanoBlock(width, heads, context) for _ in range(layers)]),
            ln_f=nn.LayerNorm(width)))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(Gpt._init)

    def forward(self, tokens, targets=None):
        b, t = tokens.size()
        assert t <= self.block_size, "sequence longer than the block size"
        pos = torch.arange(0, t, dtype=torch.long, device=tokens.device)
        x = self.transformer.drop(self.transformer.wte(tokens) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1)
        return logits, loss
