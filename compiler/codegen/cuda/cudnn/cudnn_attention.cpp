// cuDNN SDPA graphs behind tcc_cudnn (cudnn_attention.h): built with the
// cuDNN frontend (header-only, its dynamic-loading mode: nothing links
// libcudnn, load() opens it). Compiled by tcc compile as its own host unit,
// identical for every step, so the object cache builds it once.
#ifndef TCC_CUDNN_ATTENTION_H
#include "compiler/codegen/cuda/cudnn/cudnn_attention.h"
#endif

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <cudnn_frontend.h>

// The frontend's dynamic-loading mode looks its cuDNN symbols up here.
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
}

namespace tcc_cudnn {
namespace {

namespace fe = cudnn_frontend;

// Tensor ids of the variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDout, kDq, kDk, kDv };

struct Library {
  std::once_flag once;
  int32_t status = 1;
  std::string why, version;
  cudnnHandle_t handle = nullptr;
};

Library &library() {
  static Library *l = new Library; // never destroyed: plans outlive static teardown
  return *l;
}

void setWhy(char *why, size_t size, const std::string &text) {
  if (why && size)
    std::snprintf(why, size, "%s", text.c_str());
}

std::string failed(const char *what, fe::error_t e) {
  return std::string(what) + ": " + e.get_message();
}

std::vector<int64_t> dims(int64_t b, int64_t h, int64_t rows, int64_t d) {
  return {b, h, rows, d};
}
std::vector<int64_t> strides(const Strides &s) { return {s.b, s.h, s.r, 1}; }

void openLibrary(const char *toolkitLibDir) {
  Library &l = library();
  const char *off = std::getenv("TCC_CUDNN");
  if (off && std::strcmp(off, "0") == 0) {
    l.why = "turned off (TCC_CUDNN=0)";
    return;
  }
  std::string tried;
  auto attempt = [&](const std::string &name) {
    if (fe::cudnn_dlhandle)
      return;
    fe::cudnn_dlhandle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!fe::cudnn_dlhandle) {
      const char *e = dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(e ? e : name.c_str());
    }
  };
  if (const char *path = std::getenv("TCC_CUDNN_LIBRARY"); path && *path) {
    attempt(path);
    if (!fe::cudnn_dlhandle) {
      l.why = "TCC_CUDNN_LIBRARY=" + std::string(path) + " does not load (" + tried + ")";
      return;
    }
  }
  attempt("libcudnn.so.9");
  if (toolkitLibDir && *toolkitLibDir)
    attempt(std::string(toolkitLibDir) + "/libcudnn.so.9");
  if (!fe::cudnn_dlhandle) {
    l.why = "libcudnn.so.9 not found (set TCC_CUDNN_LIBRARY or LD_LIBRARY_PATH; tried: " +
            tried + ")";
    return;
  }
  try {
    size_t v = fe::detail::get_backend_version();
    l.version = fe::detail::get_backend_version_string();
    if (v < 90500) { // SDPA backward with these layouts: cuDNN 9.5+
      l.why = "cuDNN " + l.version + " is older than 9.5";
      return;
    }
    if (cudnnStatus_t s = fe::detail::create_handle(&l.handle); s != CUDNN_STATUS_SUCCESS) {
      l.why = "cudnnCreate failed (status " + std::to_string(static_cast<int>(s)) + ")";
      l.handle = nullptr;
      return;
    }
  } catch (const std::exception &e) {
    l.why = std::string("loading cuDNN failed: ") + e.what();
    return;
  }
  l.status = 0;
}

using GraphPtr = std::shared_ptr<fe::graph::Graph>;

// An empty graph with the site's tensor type (bf16 or f16) and f32
// intermediates and compute.
GraphPtr newGraph(const Site &s) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(s.f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

std::shared_ptr<fe::graph::Tensor_attributes> input(const GraphPtr &g, const char *name,
                                                    Uid uid, std::vector<int64_t> dim,
                                                    std::vector<int64_t> stride) {
  return g->tensor(fe::graph::Tensor_attributes()
                       .set_name(name)
                       .set_uid(uid)
                       .set_dim(std::move(dim))
                       .set_stride(std::move(stride)));
}

template <class Attributes> void mask(Attributes &a, const Site &s) {
  if (!s.causal)
    return;
  // j <= i + S - T: the top-left diagonal when T == S (cuDNN's common
  // case), bottom-right otherwise.
  a.set_diagonal_alignment(s.T == s.S ? fe::DiagonalAlignment_t::TOP_LEFT
                                      : fe::DiagonalAlignment_t::BOTTOM_RIGHT)
      .set_diagonal_band_right_bound(0);
}

std::string build(const Site &s, GraphPtr &out) {
  GraphPtr g = newGraph(s);
  auto q = input(g, "q", kQ, dims(s.B, s.H, s.T, s.D), strides(s.q));
  auto k = input(g, "k", kK, dims(s.B, s.Hkv, s.S, s.D), strides(s.k));
  auto v = input(g, "v", kV, dims(s.B, s.Hkv, s.S, s.D), strides(s.v));
  std::vector<int64_t> statsDim = {s.B, s.H, s.T, 1}, statsStride = {s.H * s.T, s.T, 1, 1};
  if (!s.backward) {
    auto a = fe::graph::SDPA_attributes()
                 .set_name("tcc_attention")
                 .set_generate_stats(true)
                 .set_attn_scale(s.scale);
    mask(a, s);
    auto [o, stats] = g->sdpa(q, k, v, a);
    o->set_output(true).set_uid(kO).set_dim(dims(s.B, s.H, s.T, s.D)).set_stride(strides(s.o));
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(statsDim)
        .set_stride(statsStride);
  } else {
    auto o = input(g, "out", kO, dims(s.B, s.H, s.T, s.D), strides(s.o));
    auto dout = input(g, "dout", kDout, dims(s.B, s.H, s.T, s.D), strides(s.dout));
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("lse")
                               .set_uid(kStats)
                               .set_dim(statsDim)
                               .set_stride(statsStride)
                               .set_data_type(fe::DataType_t::FLOAT));
    auto a = fe::graph::SDPA_backward_attributes()
                 .set_name("tcc_attention_grad")
                 .set_attn_scale(s.scale)
                 .set_deterministic_algorithm(s.deterministic);
    mask(a, s);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, a);
    dq->set_output(true).set_uid(kDq).set_dim(dims(s.B, s.H, s.T, s.D)).set_stride(strides(s.dq));
    dk->set_output(true)
        .set_uid(kDk)
        .set_dim(dims(s.B, s.Hkv, s.S, s.D))
        .set_stride(strides(s.dk));
    dv->set_output(true)
        .set_uid(kDv)
        .set_dim(dims(s.B, s.Hkv, s.S, s.D))
        .set_stride(strides(s.dv));
  }
  cudnnHandle_t h = library().handle;
  if (auto e = g->validate(); e.is_bad())
    return failed("cuDNN rejects the graph", e);
  if (auto e = g->build_operation_graph(h); e.is_bad())
    return failed("cuDNN cannot build the operation graph", e);
  if (auto e = g->create_execution_plans({fe::HeurMode_t::A}); e.is_bad())
    return failed("cuDNN has no engine for it", e);
  if (auto e = g->check_support(h); e.is_bad())
    return failed("cuDNN does not support it", e);
  if (auto e = g->build_plans(h); e.is_bad())
    return failed("cuDNN cannot build a plan", e);
  out = std::move(g);
  return "";
}

int32_t execute(const Plan &plan, cudaStream_t stream,
                std::unordered_map<int64_t, void *> &pack, void *workspace, char *why,
                size_t why_size) {
  Library &l = library();
  try {
    if (cudnnStatus_t s = fe::detail::set_stream(l.handle, stream); s != CUDNN_STATUS_SUCCESS) {
      setWhy(why, why_size, "cudnnSetStream failed (status " +
                                std::to_string(static_cast<int>(s)) + ")");
      return 1;
    }
    auto &g = *static_cast<GraphPtr *>(plan.graph);
    if (auto e = g->execute(l.handle, pack, workspace); e.is_bad()) {
      setWhy(why, why_size, failed("cuDNN failed", e));
      return 1;
    }
  } catch (const std::exception &e) {
    setWhy(why, why_size, std::string("cuDNN failed: ") + e.what());
    return 1;
  }
  return 0;
}

// Builds a site's graph with `build` (attention or convolution) and keeps it
// with its workspace size in `plan`; 1 and the reason in `why` when cuDNN
// declines or fails.
template <typename Build>
int32_t makePlan(Build build, Plan &plan, char *why, size_t why_size) {
  try {
    GraphPtr g;
    std::string error = build(g);
    if (!error.empty()) {
      setWhy(why, why_size, error);
      return 1;
    }
    int64_t bytes = 0;
    if (auto e = g->get_workspace_size(bytes); e.is_bad()) {
      setWhy(why, why_size, failed("cuDNN workspace size", e));
      return 1;
    }
    plan.graph = new GraphPtr(std::move(g)); // lives as long as the step
    plan.workspace_bytes = bytes;
  } catch (const std::exception &e) {
    setWhy(why, why_size, std::string("cuDNN graph construction failed: ") + e.what());
    return 1;
  }
  return 0;
}

} // namespace

int32_t load(const char *toolkit_lib_dir, char *why, size_t why_size) {
  Library &l = library();
  std::call_once(l.once, [&] { openLibrary(toolkit_lib_dir); });
  if (l.status != 0)
    setWhy(why, why_size, l.why);
  return l.status;
}

const char *version() { return library().version.c_str(); }

int32_t prepare(const Site &site, Plan &plan, char *why, size_t why_size) {
  if (library().status != 0) {
    setWhy(why, why_size, library().why.empty() ? "cuDNN not loaded" : library().why);
    return 1;
  }
  if (site.causal && site.T > site.S) {
    // Rows before T - S see no key: tcc defines them (out 0, lse -inf);
    // cuDNN leaves them to its engine.
    setWhy(why, why_size, "causal with more queries than keys (fully masked rows)");
    return 1;
  }
  return makePlan([&](GraphPtr &g) { return build(site, g); }, plan, why, why_size);
}

int32_t forward(const Plan &plan, cudaStream_t stream, const void *q, const void *k,
                const void *v, void *out, float *lse, void *workspace, char *why,
                size_t why_size) {
  std::unordered_map<int64_t, void *> pack = {
      {kQ, const_cast<void *>(q)}, {kK, const_cast<void *>(k)}, {kV, const_cast<void *>(v)},
      {kO, out},                   {kStats, lse}};
  return execute(plan, stream, pack, workspace, why, why_size);
}

int32_t backward(const Plan &plan, cudaStream_t stream, const void *q, const void *k,
                 const void *v, const void *out, const void *dout, const float *lse,
                 void *dq, void *dk, void *dv, void *workspace, char *why, size_t why_size) {
  std::unordered_map<int64_t, void *> pack = {
      {kQ, const_cast<void *>(q)},       {kK, const_cast<void *>(k)},
      {kV, const_cast<void *>(v)},       {kO, const_cast<void *>(out)},
      {kDout, const_cast<void *>(dout)}, {kStats, const_cast<float *>(lse)},
      {kDq, dq},                         {kDk, dk},
      {kDv, dv}};
  return execute(plan, stream, pack, workspace, why, why_size);
}

// ---- convolutions (ConvSite) ----

namespace {

enum ConvUid : int64_t { kConvA = 1, kConvB, kConvOut };

// Strides of a (N, C, H, W)-ordered tensor stored NCHW, or channels-last
// (N, H, W, C; a weight (O, KH, KW, C/g) likewise).
std::vector<int64_t> contiguous(const std::vector<int64_t> &d, bool nhwc) {
  if (nhwc)
    return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

std::string buildConv(const ConvSite &s, int64_t workspaceLimit, GraphPtr &out) {
  const fe::DataType_t io = s.dtype == 1   ? fe::DataType_t::BFLOAT16
                            : s.dtype == 2 ? fe::DataType_t::HALF
                                           : fe::DataType_t::FLOAT;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const std::vector<int64_t> x = {s.n, s.c, s.h, s.w}, w = {s.o, s.c / s.groups, s.kh, s.kw},
                             y = {s.n, s.o, s.ho, s.wo};
  auto tensor = [&](const char *name, int64_t uid, const std::vector<int64_t> &dim) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(dim)
                         .set_stride(contiguous(dim, s.nhwc != 0)));
  };
  const std::vector<int64_t> pad = {s.ph, s.pw}, stride = {s.sh, s.sw}, dil = {s.dh, s.dw};
  std::shared_ptr<fe::graph::Tensor_attributes> result;
  std::vector<int64_t> dim;
  if (s.product == 0) {
    auto a = fe::graph::Conv_fprop_attributes().set_name("tcc_conv_fprop").set_padding(pad)
                 .set_stride(stride).set_dilation(dil);
    result = g->conv_fprop(tensor("x", kConvA, x), tensor("w", kConvB, w), a);
    dim = y;
  } else if (s.product == 1) {
    auto a = fe::graph::Conv_dgrad_attributes().set_name("tcc_conv_dgrad").set_padding(pad)
                 .set_stride(stride).set_dilation(dil);
    result = g->conv_dgrad(tensor("dy", kConvA, y), tensor("w", kConvB, w), a);
    dim = x;
  } else {
    auto a = fe::graph::Conv_wgrad_attributes().set_name("tcc_conv_wgrad").set_padding(pad)
                 .set_stride(stride).set_dilation(dil);
    result = g->conv_wgrad(tensor("dy", kConvA, y), tensor("x", kConvB, x), a);
    dim = w;
  }
  result->set_output(true).set_uid(kConvOut).set_dim(dim).set_stride(contiguous(dim, s.nhwc != 0));
  cudnnHandle_t h = library().handle;
  if (auto e = g->validate(); e.is_bad())
    return failed("cuDNN rejects the convolution", e);
  if (auto e = g->build_operation_graph(h); e.is_bad())
    return failed("cuDNN cannot build the operation graph", e);
  if (auto e = g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
      e.is_bad())
    return failed("cuDNN has no engine for it", e);
  // The same bits every run, no kernels compiled at run time, and in f32 no
  // tensor cores (TF32 would round the operands to 10 mantissa bits).
  g->deselect_numeric_notes(s.dtype == 0 ? std::vector<fe::NumericalNote_t>{
                                               fe::NumericalNote_t::NONDETERMINISTIC,
                                               fe::NumericalNote_t::TENSOR_CORE}
                                         : std::vector<fe::NumericalNote_t>{
                                               fe::NumericalNote_t::NONDETERMINISTIC});
  g->deselect_behavior_notes({fe::BehaviorNote_t::RUNTIME_COMPILATION});
  // Within the workspace the step planned (CudnnConvWorkspace.h).
  if (workspaceLimit >= 0)
    g->deselect_workspace_greater_than(workspaceLimit);
  if (auto e = g->check_support(h); e.is_bad())
    return failed("cuDNN does not support it", e);
  if (auto e = g->build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE); e.is_bad())
    return failed("cuDNN cannot build a plan", e);
  out = std::move(g);
  return "";
}

} // namespace

int32_t prepare_conv(const ConvSite &site, int64_t workspace_limit, Plan &plan, char *why,
                     size_t why_size) {
  if (library().status != 0) {
    setWhy(why, why_size, library().why.empty() ? "cuDNN not loaded" : library().why);
    return 1;
  }
  return makePlan([&](GraphPtr &g) { return buildConv(site, workspace_limit, g); }, plan, why,
                  why_size);
}

int32_t conv(const Plan &plan, cudaStream_t stream, const void *a, const void *b, void *out,
             void *workspace, char *why, size_t why_size) {
  std::unordered_map<int64_t, void *> pack = {
      {kConvA, const_cast<void *>(a)}, {kConvB, const_cast<void *>(b)}, {kConvOut, out}};
  return execute(plan, stream, pack, workspace, why, why_size);
}

} // namespace tcc_cudnn
