"""HuggingFace transformers' Qwen2 style: the LLaMA decoder of hf_llama.py
(transformers' Qwen2 modules are marked "Copied from" LLaMA's) with biases
on the q / k / v projections and none on o_proj, rope_theta 1e6, the
rotary tables computed in forward (transformers 4.4x), and the lm_head tied
to embed_tokens (tie_word_embeddings, as the small Qwen2 models ship)."""

import torch.nn as nn

from zoo.hf_llama import (LlamaAttention, LlamaConfig, LlamaDecoderLayer, LlamaForCausalLM,
                          LlamaModel, causal_lm_case)


class Qwen2Config(LlamaConfig):
    model_type = "qwen2"

    def __init__(self, rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
                 sliding_window=4096, **kwargs):
        super().__init__(rope_theta=rope_theta, tie_word_embeddings=tie_word_embeddings,
                         rope_in_forward=True, **kwargs)
        self.use_sliding_window = use_sliding_window
        self.sliding_window = sliding_window


class Qwen2Attention(LlamaAttention):
    """LlamaAttention with Qwen2's projections: q / k / v with bias, o
    without."""

    def __init__(self, config, layer_idx=None):
        super().__init__(config, layer_idx)
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim,
                                bias=True)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim,
                                bias=True)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)


class Qwen2DecoderLayer(LlamaDecoderLayer):
    attention_class = Qwen2Attention


class Qwen2Model(LlamaModel):
    decoder_layer_class = Qwen2DecoderLayer


class Qwen2ForCausalLM(LlamaForCausalLM):
    base_model_class = Qwen2Model


def make():
    return [causal_lm_case(
        "qwen2", "qwen2", Qwen2Config(), model_class=Qwen2ForCausalLM,
        what="HF Qwen2: the LLaMA decoder with q/k/v biases, rope_theta 1e6, rotary in "
             "forward, tied lm_head")]
