// cuDNN scaled-dot-product attention for kern.attention / kern.attention_grad
// on the cuda target: the interface between a generated step's host unit and
// the cuDNN unit (cudnn_attention.cpp, compiled once per machine by tcc
// compile and cached like the kernel units).
//
// Why: cuDNN's fused attention (the cuDNN frontend's SDPA graphs) runs the
// forward ~1.7x and the backward ~1.3x faster than tcc's flash kernels on an
// H200 at GPT-2's shapes (docs/performance.md). cuDNN is loaded at run time
// (dlopen of libcudnn.so.9), so a step runs where cuDNN is missing: every
// call site falls back to tcc's flash kernels, which compute the same
// function and write the same log-sum-exp, so a forward of one and a
// backward of the other agree.
//
// Shapes: q, out, dout, dq are (B, H, T, D), k, v, dk, dv (B, Hkv, S, D),
// each placed by (batch, head, row) strides in elements (rows contiguous);
// lse is f32 (B, H, T) contiguous, natural-log units:
// lse[b,h,i] = log sum_j exp(scale * q_i . k_j) over the visible keys.
// causal: query i sees key j iff j <= i + S - T (bottom-right aligned).
#ifndef TCC_CUDNN_ATTENTION_H
#define TCC_CUDNN_ATTENTION_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tcc_cudnn {

struct Strides {
  int64_t b, h, r;
};

// One call site, as the code generator knows it.
struct Site {
  bool backward; // kern.attention_grad (else kern.attention)
  bool f16;      // f16 tensors (else bf16)
  bool causal;
  // Backward: bit-identical results run to run (cuDNN's deterministic
  // algorithm; tcc's own kernels always are, and exact resume relies on it).
  bool deterministic;
  int64_t B, H, Hkv, T, S, D;
  float scale;
  Strides q, k, v, o, dout, dq, dk, dv; // dout..dv: backward only
};

// A site's built cuDNN graph (opaque) and the workspace it needs.
struct Plan {
  void *graph = nullptr;
  int64_t workspace_bytes = 0;
};

// Loads libcudnn.so.9 once per process: $TCC_CUDNN_LIBRARY if set, else the
// loader's search path, else `toolkit_lib_dir`. TCC_CUDNN=0 turns cuDNN off.
// 0 when loaded; otherwise 1 and `why` says what was tried.
int32_t load(const char *toolkit_lib_dir, char *why, size_t why_size);
// "9.19.0" once loaded.
const char *version();
// Builds `site`'s graph (cuDNN's heuristics pick the engine). 0 when cuDNN
// runs this site; otherwise nonzero and `why` names the reason (the caller
// falls back to the flash kernels).
int32_t prepare(const Site &site, Plan &plan, char *why, size_t why_size);
// Enqueue on `stream`. `workspace`: plan.workspace_bytes of device memory.
int32_t forward(const Plan &plan, cudaStream_t stream, const void *q, const void *k,
                const void *v, void *out, float *lse, void *workspace, char *why,
                size_t why_size);
int32_t backward(const Plan &plan, cudaStream_t stream, const void *q, const void *k,
                 const void *v, const void *out, const void *dout, const float *lse,
                 void *dq, void *dk, void *dv, void *workspace, char *why, size_t why_size);

// Convolutions (kern.conv2d) through the same loaded library: the cuDNN
// frontend's conv_fprop / conv_dgrad / conv_wgrad graphs on NCHW tensors,
// or channels-last ones (nhwc: x (N, H, W, C), w (O, KH, KW, C / groups),
// y (N, HO, WO, O), which cuDNN's tensor-core engines read without a
// transposing copy), grouped by the weight's C / groups channels, f32 sums.
// product: 0 forward (out = y from a = x, b = w), 1 input gradient (out =
// dx from a = dy, b = w), 2 weight gradient (out = dw from a = dy, b = x).
// dtype: 0 f32 (engines without tensor cores, so no TF32: the results
// track the CPU's like tcc's own kernels), 1 bf16, 2 f16. Only
// deterministic engines are taken (no atomics: the same bits every run).
struct ConvSite {
  int32_t product, dtype;
  int64_t n, c, h, w, o, kh, kw, ho, wo, sh, sw, ph, pw, dh, dw, groups;
  int32_t nhwc = 0;
};
// Builds `site`'s graph and picks its engine once (cuDNN's heuristics, the
// first candidate that builds), among the engines whose workspace is at
// most `workspace_limit` bytes (< 0: any). 0 when cuDNN runs the site, else
// nonzero and `why` says why (the caller keeps tcc's kernels, or retries
// without the limit).
int32_t prepare_conv(const ConvSite &site, int64_t workspace_limit, Plan &plan, char *why,
                     size_t why_size);
int32_t conv(const Plan &plan, cudaStream_t stream, const void *a, const void *b, void *out,
             void *workspace, char *why, size_t why_size);

} // namespace tcc_cudnn

#endif
