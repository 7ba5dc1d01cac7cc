"""HuggingFace transformers' LLaMA / Mistral decoder style (modeling_llama,
eager attention), in two generations of its rotary code:

  hf_llama            transformers 4.3x: LlamaRotaryEmbedding builds the
                      cos / sin tables in __init__ from inv_freq and
                      registers them as buffers (persistent=False); each
                      attention slices them to the sequence length and
                      indexes them with position_ids; the 4-D additive
                      causal mask of _make_causal_mask (torch.full of the
                      dtype's min, masked_fill_ of the lower triangle);
  hf_llama_rope_fwd   transformers 4.4x: one rotary module at the model
                      level computes cos / sin in forward from the inv_freq
                      buffer and position_ids (inv_freq[None, :, None] @
                      position_ids[:, None, :], under autocast disabled,
                      @torch.no_grad) and passes them down as
                      position_embeddings; the mask of
                      _prepare_4d_causal_attention_mask_with_cache_position
                      (torch.triu of a full min tensor, sliced to the keys).

Both: LlamaRMSNorm written out (float32 variance, torch.rsqrt), q/k/v/o
projections, grouped-query attention through repeat_kv (expand +
reshape), softmax upcast to float32 (softmax(..., dtype=torch.float32)),
SwiGLU LlamaMLP (gate_proj, up_proj, down_proj, F.silu through ACT2FN), an
untied lm_head, HF's _init_weights, and Trainer's AdamW groups (no decay on
biases and norm weights). The loss is LlamaForCausalLM's shifted
cross-entropy, given to tcc.from_torch as loss= (causal_lm_loss): the
forward returns the logits tensor (HF wraps them in CausalLMOutputWithPast).

  hf_llama_labels     LlamaForCausalLM.forward as HF writes it, called
                      with labels: the loss made inside forward by a
                      CrossEntropyLoss() constructed there, (loss, logits)
                      returned, optional arguments defaulting to None.
                      labels is its second argument (HF's has
                      attention_mask second): tcc.from_torch's example
                      inputs are positional."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import CrossEntropyLoss

from zoo import Case, token_batch

ACT2FN = {"silu": F.silu, "gelu": F.gelu}


class LlamaConfig:
    """The fields of transformers' LlamaConfig this decoder reads."""

    def __init__(self, vocab_size=64, hidden_size=48, intermediate_size=128,
                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 hidden_act="silu", max_position_embeddings=32, initializer_range=0.02,
                 rms_norm_eps=1e-6, pad_token_id=None, tie_word_embeddings=False,
                 rope_theta=10000.0, attention_bias=False, attention_dropout=0.0,
                 rope_in_forward=False):
        self.vocab_size = vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        if num_key_value_heads is None:
            num_key_value_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.rms_norm_eps = rms_norm_eps
        self.pad_token_id = pad_token_id
        self.tie_word_embeddings = tie_word_embeddings
        self.rope_theta = rope_theta
        self.attention_bias = attention_bias
        self.attention_dropout = attention_dropout
        self.rope_in_forward = rope_in_forward  # 4.4x's rotary (the module docstring)


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        """LlamaRMSNorm is equivalent to T5LayerNorm"""
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    """transformers 4.3x: cos / sin cached as buffers up to
    max_position_embeddings, sliced to seq_len in forward."""

    def __init__(self, dim, max_position_embeddings=2048, base=10000, device=None):
        super().__init__()
        self.dim = dim
        self.max_position_embeddings = max_position_embeddings
        self.base = base
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2).float().to(device) / self.dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._set_cos_sin_cache(seq_len=max_position_embeddings,
                                device=self.inv_freq.device, dtype=torch.get_default_dtype())

    def _set_cos_sin_cache(self, seq_len, device, dtype):
        self.max_seq_len_cached = seq_len
        t = torch.arange(self.max_seq_len_cached, device=device, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        # a different permutation from the paper's, for the same result
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)
        self.register_buffer("sin_cached", emb.sin().to(dtype), persistent=False)

    def forward(self, x, seq_len=None):
        # x: [bs, num_attention_heads, seq_len, head_size]
        if seq_len > self.max_seq_len_cached:
            self._set_cos_sin_cache(seq_len=seq_len, device=x.device, dtype=x.dtype)
        return (
            self.cos_cached[:seq_len].to(dtype=x.dtype),
            self.sin_cached[:seq_len].to(dtype=x.dtype),
        )


class LlamaDynamicRotaryEmbedding(nn.Module):
    """transformers 4.4x: only inv_freq is a buffer; cos / sin are computed
    in forward for the given position_ids."""

    def __init__(self, config, device=None):
        super().__init__()
        self.rope_type = "default"
        self.max_seq_len_cached = config.max_position_embeddings
        self.original_max_seq_len = config.max_position_embeddings
        self.config = config
        base = config.rope_theta
        dim = config.hidden_size // config.num_attention_heads
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64)
                                   .float().to(device) / dim))
        self.attention_scaling = 1.0
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.original_inv_freq = self.inv_freq

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        # Force float32 (autocast would lower the precision of long contexts)
        device_type = x.device.type
        device_type = device_type if isinstance(device_type, str) and device_type != "mps" else "cpu"
        with torch.autocast(device_type=device_type, enabled=False):
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = emb.cos()
            sin = emb.sin()
        cos = cos * self.attention_scaling
        sin = sin * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    """Rotary position embedding of q and k. With position_ids (4.3x), cos
    and sin are the [seq_len, dim] tables and are gathered at the
    positions; without (4.4x), they are already [bs, seq_len, dim]."""
    if position_ids is not None:
        cos = cos[position_ids]
        sin = sin[position_ids]
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class LlamaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        self.act_fn = ACT2FN[config.hidden_act]

    def forward(self, x):
        down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        return down_proj


def repeat_kv(hidden_states, n_rep):
    """torch.repeat_interleave(x, dim=1, repeats=n_rep): (batch,
    num_key_value_heads, seqlen, head_dim) -> (batch, num_attention_heads,
    seqlen, head_dim)."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep,
                                                           slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
    """Multi-headed attention from 'Attention Is All You Need'."""

    def __init__(self, config, layer_idx=None):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.attention_dropout = config.attention_dropout
        self.hidden_size = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.hidden_size // self.num_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.max_position_embeddings = config.max_position_embeddings
        self.rope_theta = config.rope_theta
        self.is_causal = True

        if (self.head_dim * self.num_heads) != self.hidden_size:
            raise ValueError("hidden_size must be divisible by num_heads")
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim,
                                bias=config.attention_bias)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim,
                                bias=config.attention_bias)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim,
                                bias=config.attention_bias)
        self.o_proj = nn.Linear(self.hidden_size, self.hidden_size, bias=config.attention_bias)
        if not config.rope_in_forward:
            self._init_rope()

    def _init_rope(self):
        self.rotary_emb = LlamaRotaryEmbedding(
            self.head_dim, max_position_embeddings=self.max_position_embeddings,
            base=self.rope_theta)

    def forward(self, hidden_states, attention_mask=None, position_ids=None,
                position_embeddings=None):
        bsz, q_len, _ = hidden_states.size()

        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)

        query_states = query_states.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, self.num_key_value_heads,
                                     self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, self.num_key_value_heads,
                                         self.head_dim).transpose(1, 2)

        if position_embeddings is None:  # 4.3x: this layer's cached tables
            kv_seq_len = key_states.shape[-2]
            cos, sin = self.rotary_emb(value_states, seq_len=kv_seq_len)
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin,
                                                            position_ids)
        else:
            cos, sin = position_embeddings
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)

        if attention_mask is not None:  # no matter the length, we just slice it
            causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
            attn_weights = attn_weights + causal_mask

        # upcast attention to fp32
        attn_weights = nn.functional.softmax(attn_weights, dim=-1,
                                             dtype=torch.float32).to(query_states.dtype)
        attn_weights = nn.functional.dropout(attn_weights, p=self.attention_dropout,
                                             training=self.training)
        attn_output = torch.matmul(attn_weights, value_states)

        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
        attn_output = self.o_proj(attn_output)
        return attn_output


class LlamaDecoderLayer(nn.Module):
    attention_class = LlamaAttention  # HF: LLAMA_ATTENTION_CLASSES[config._attn_implementation]

    def __init__(self, config, layer_idx):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.self_attn = self.attention_class(config=config, layer_idx=layer_idx)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None,
                position_embeddings=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states=hidden_states,
                                       attention_mask=attention_mask,
                                       position_ids=position_ids,
                                       position_embeddings=position_embeddings)
        hidden_states = residual + hidden_states

        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return (hidden_states,)


def _make_causal_mask(input_ids_shape, dtype, device, past_key_values_length=0):
    """4.3x: the [bsz, 1, tgt_len, tgt_len + past] additive causal mask."""
    bsz, tgt_len = input_ids_shape
    # dtype=: HF leaves the default dtype, which cannot hold float64's min
    # (the float64 reference run of the test)
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min, dtype=dtype, device=device)
    mask_cond = torch.arange(mask.size(-1), device=device)
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    if past_key_values_length > 0:
        mask = torch.cat([torch.zeros(tgt_len, past_key_values_length, dtype=dtype,
                                      device=device), mask], dim=-1)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_key_values_length)


def _prepare_4d_causal_attention_mask_with_cache_position(
        sequence_length, target_length, dtype, device, cache_position, batch_size):
    """4.4x: the causal mask from cache_position (no padding mask given)."""
    min_dtype = torch.finfo(dtype).min
    causal_mask = torch.full((sequence_length, target_length), fill_value=min_dtype,
                             dtype=dtype, device=device)
    if sequence_length != 1:
        causal_mask = torch.triu(causal_mask, diagonal=1)
    causal_mask *= torch.arange(target_length, device=device) > cache_position.reshape(-1, 1)
    causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1)
    return causal_mask


class LlamaPreTrainedModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()

    def post_init(self):
        self.apply(self._init_weights)
        self.tie_weights()

    def tie_weights(self):
        if getattr(self.config, "tie_word_embeddings", False) and hasattr(self, "lm_head"):
            self.lm_head.weight = self.model.embed_tokens.weight


class LlamaModel(LlamaPreTrainedModel):
    decoder_layer_class = LlamaDecoderLayer

    def __init__(self, config):
        super().__init__(config)
        self.padding_idx = config.pad_token_id
        self.vocab_size = config.vocab_size
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, self.padding_idx)
        self.layers = nn.ModuleList([self.decoder_layer_class(config, layer_idx)
                                     for layer_idx in range(config.num_hidden_layers)])
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        if config.rope_in_forward:
            self.rotary_emb = LlamaDynamicRotaryEmbedding(config=config)
        self.gradient_checkpointing = False
        self.post_init()

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        batch_size, seq_length = input_ids.shape[:2]
        past_key_values_length = 0
        inputs_embeds = self.embed_tokens(input_ids)
        hidden_states = inputs_embeds

        if not self.config.rope_in_forward:
            if position_ids is None:
                device = input_ids.device
                position_ids = torch.arange(past_key_values_length,
                                            seq_length + past_key_values_length,
                                            dtype=torch.long, device=device)
                position_ids = position_ids.unsqueeze(0)
            attention_mask = _make_causal_mask((batch_size, seq_length), inputs_embeds.dtype,
                                               inputs_embeds.device, past_key_values_length)
            position_embeddings = None
        else:
            past_seen_tokens = 0
            cache_position = torch.arange(past_seen_tokens,
                                          past_seen_tokens + inputs_embeds.shape[1],
                                          device=inputs_embeds.device)
            if position_ids is None:
                position_ids = cache_position.unsqueeze(0)
            attention_mask = _prepare_4d_causal_attention_mask_with_cache_position(
                seq_length, past_seen_tokens + seq_length + 1, inputs_embeds.dtype,
                inputs_embeds.device, cache_position, batch_size)
            # create position embeddings to be shared across the decoder layers
            position_embeddings = self.rotary_emb(hidden_states, position_ids)

        for decoder_layer in self.layers:
            layer_outputs = decoder_layer(hidden_states, attention_mask=attention_mask,
                                          position_ids=position_ids,
                                          position_embeddings=position_embeddings)
            hidden_states = layer_outputs[0]

        hidden_states = self.norm(hidden_states)
        return (hidden_states,)


class LlamaForCausalLM(LlamaPreTrainedModel):
    """The decoder and its head. forward(input_ids) returns the logits
    (HF returns them in a CausalLMOutputWithPast, or as (logits,) with
    return_dict=False; tcc.from_torch's loss= takes one tensor); the loss
    is then causal_lm_loss, as a training loop computes it."""
    _tied_weights_keys = ["lm_head.weight"]
    base_model_class = LlamaModel

    def __init__(self, config):
        super().__init__(config)
        self.model = self.base_model_class(config)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(self, input_ids):
        outputs = self.model(input_ids=input_ids)
        hidden_states = outputs[0]
        logits = self.lm_head(hidden_states)
        logits = logits.float()
        return logits


class LlamaForCausalLMWithLabels(LlamaForCausalLM):
    """LlamaForCausalLM.forward as transformers 4.3x writes it, called with
    labels (Trainer does): the shifted cross-entropy made by a
    CrossEntropyLoss() created inside forward, (loss, logits) returned
    (return_dict=False). The optional arguments follow labels, which is
    second here (positional example inputs)."""

    def forward(self, input_ids, labels=None, attention_mask=None, position_ids=None):
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             position_ids=position_ids)
        hidden_states = outputs[0]
        logits = self.lm_head(hidden_states)
        logits = logits.float()

        loss = None
        if labels is not None:
            # Shift so that tokens < n predict n
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            # Flatten the tokens
            loss_fct = CrossEntropyLoss()
            shift_logits = shift_logits.view(-1, self.config.vocab_size)
            shift_labels = shift_labels.view(-1)
            shift_labels = shift_labels.to(shift_logits.device)
            loss = loss_fct(shift_logits, shift_labels)

        output = (logits,)
        return (loss,) + output if loss is not None else output


def trainer_optimizer(model, learning_rate, weight_decay=0.01):
    """Trainer.create_optimizer's grouping: weight decay on everything but
    biases and the norms' weights; AdamW with Trainer's betas / eps."""
    norm_types = (nn.LayerNorm, LlamaRMSNorm)
    no_decay = set()
    for mname, module in model.named_modules():
        for pname, _ in module.named_parameters(recurse=False):
            full = f"{mname}.{pname}" if mname else pname
            if isinstance(module, norm_types) or "bias" in pname:
                no_decay.add(full)
    decay_parameters = [n for n, _ in model.named_parameters() if n not in no_decay]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters()
                    if n in decay_parameters and p.requires_grad],
         "weight_decay": weight_decay},
        {"params": [p for n, p in model.named_parameters()
                    if n not in decay_parameters and p.requires_grad],
         "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(optimizer_grouped_parameters, lr=learning_rate,
                             betas=(0.9, 0.999), eps=1e-8)


def causal_lm_loss(logits, labels):
    """LlamaForCausalLM's shifted cross-entropy on its logits, as a
    training loop that calls the model without labels computes it."""
    logits = logits.float()
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    return F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))


def causal_lm_case(name, family, config, what, labels_in_forward=False, seq_len=16, batch=4,
                   lr=3e-3, model_class=None, **expect):
    """A LlamaForCausalLM-style row: input_ids and labels (the same tokens:
    the shift is the model's), the loss computed by the forward
    (labels_in_forward) or by causal_lm_loss on the returned logits."""
    torch.manual_seed(0)
    model_class = model_class or (LlamaForCausalLMWithLabels if labels_in_forward
                                  else LlamaForCausalLM)
    model = model_class(config)
    input_ids, _ = token_batch(batch, seq_len, config.vocab_size, seed=2)
    if labels_in_forward:
        return Case(name=name, family=family, module=model, inputs=(input_ids, input_ids),
                    target=None, loss=None, loss_of_output=lambda out: out[0],
                    optimizer=lambda m: trainer_optimizer(m, lr), what=what, **expect)
    return Case(name=name, family=family, module=model, inputs=(input_ids,),
                target=input_ids, loss=causal_lm_loss,
                optimizer=lambda m: trainer_optimizer(m, lr), what=what, **expect)


def make():
    return [
        causal_lm_case("hf_llama", "hf_llama", LlamaConfig(),
                       "HF LLaMA 4.3x: cos/sin buffers from inv_freq, sliced + position_ids, "
                       "rotate_half, RMSNorm, GQA repeat_kv, SwiGLU, untied head"),
        causal_lm_case("hf_llama_rope_fwd", "hf_llama", LlamaConfig(rope_in_forward=True),
                       "HF LLaMA 4.4x: cos/sin computed in forward from inv_freq @ "
                       "position_ids, shared position_embeddings"),
        causal_lm_case("hf_llama_labels", "hf_llama", LlamaConfig(),
                       "HF LLaMA 4.3x called with labels: the forward's shifted loss through "
                       "loss_fct = CrossEntropyLoss() made inside forward",
                       labels_in_forward=True, expect="refused",
                       refusal="module is not installed as a submodule",
                       instead="create the loss module in __init__ (self.loss_fct = "
                               "nn.CrossEntropyLoss()) or call F.cross_entropy, or give "
                               "tcc.from_torch loss= and call the model without labels"),
    ]
