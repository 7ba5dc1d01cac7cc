// ---- attention through cuDNN (cudnn_attention.h), else the flash kernels ----
//
// A step's kern.attention / kern.attention_grad call sites that cuDNN can
// run (no dropout, 16-bit, head sizes the flash kernels also take) become
// AttentionSites. Before an entry's first call (and so before any graph
// capture: building a cuDNN plan allocates and loads code) prepare_attention
// loads cuDNN and builds each site's plan; a site cuDNN declines keeps the
// flash kernels, which write the same out and log-sum-exp, so forward and
// backward may come from different sides.

#ifndef TCC_CUDA_LIB_DIR // the generated host unit names the toolkit's lib64
#define TCC_CUDA_LIB_DIR ""
#endif

struct AttentionSite {
  tcc_cudnn::Site site;
  int32_t kernel;          // the launch index (label, profile)
  bool cudnn = false;      // prepare_attention: cuDNN runs this site
  tcc_cudnn::Plan plan;
  // tcc's sm90 kernels (attention_sm90_choice.h): -1 not decided yet, 1 they
  // run this site, 0 they do not; the forward's work counters.
  int8_t sm90 = -1;
  int *sm90_scheduler = nullptr;
};

// Device memory for plans that need more workspace than the cuBLASLt
// workspace they share (stream order keeps the two from overlapping).
struct AttentionWorkspace {
  void *ptr = nullptr;
  uint64_t bytes = 0;
};
inline AttentionWorkspace &attention_workspace() {
  static AttentionWorkspace w;
  return w;
}

// Builds the sites' plans; `note` gets a line for trun ("attention: cuDNN
// 9.19.0 for 24 of 24 call sites"). Never fails the step: a site cuDNN
// cannot run keeps the flash kernels (the note says why).
inline void prepare_attention(AttentionSite *const *sites, int32_t count,
                                 uint64_t shared_workspace_bytes, std::string &note) {
  char why[512] = "";
  int32_t ran = 0;
  std::string declined;
  if (tcc_cudnn::load(TCC_CUDA_LIB_DIR, why, sizeof why) != 0) {
    note = std::string("attention: tcc flash kernels (cuDNN: ") + why + ")";
    return;
  }
  uint64_t need = 0;
  int32_t beyond = 0; // sites whose plan needs more than the planned workspace
  for (int32_t i = 0; i < count; ++i) {
    AttentionSite &a = *sites[i];
    if (tcc_cudnn::prepare(a.site, a.plan, why, sizeof why) == 0) {
      a.cudnn = true;
      ++ran;
      need = std::max<uint64_t>(need, static_cast<uint64_t>(a.plan.workspace_bytes));
      beyond += static_cast<uint64_t>(a.plan.workspace_bytes) > shared_workspace_bytes;
    } else if (declined.empty()) {
      declined = std::string("; the others keep the flash kernels: ") + why;
    }
  }
  AttentionWorkspace &w = attention_workspace();
  if (need > shared_workspace_bytes && need > w.bytes) {
    void *p = device_alloc(need);
    if (!p) { // out of memory: all sites keep the flash kernels
      for (int32_t i = 0; i < count; ++i)
        sites[i]->cudnn = false;
      note = "attention: tcc flash kernels (cuDNN's workspace does not fit: " +
             state().error + ")";
      return;
    }
    device_release(w.ptr);
    w.ptr = p;
    w.bytes = need;
  }
  note = "attention: cuDNN " + std::string(tcc_cudnn::version()) + " for " +
         std::to_string(ran) + " of " + std::to_string(count) + " call sites" + declined;
  // Memory the plan did not count (trun's measured peak shows it too):
  // e.g. cuDNN's deterministic backward wants more than the shared
  // workspace at the 1B decoder's shape.
  if (beyond) {
    char extra[96];
    std::snprintf(extra, sizeof extra, " (%d beyond the planned workspace: +%.1f MiB)", beyond,
                  need / 1048576.0);
    note += extra;
  }
}

// The workspace of a prepared site: the shared (cuBLASLt) one when large
// enough, else the attention workspace.
inline void *attention_workspace_for(const AttentionSite &a, void *shared, uint64_t shared_bytes) {
  return static_cast<uint64_t>(a.plan.workspace_bytes) <= shared_bytes
             ? shared
             : attention_workspace().ptr;
}

inline int32_t cudnn_attention_forward(const AttentionSite &a, cudaStream_t s, const void *q,
                                       const void *k, const void *v, void *out, float *lse,
                                       void *shared, uint64_t shared_bytes) {
  char why[512] = "";
  if (tcc_cudnn::forward(a.plan, s, q, k, v, out, lse,
                         attention_workspace_for(a, shared, shared_bytes), why, sizeof why))
    return set_error("%s in %s", why, where(a.kernel).c_str());
  return 0;
}

inline int32_t cudnn_attention_backward(const AttentionSite &a, cudaStream_t s, const void *q,
                                        const void *k, const void *v, const void *out,
                                        const void *dout, const float *lse, void *dq, void *dk,
                                        void *dv, void *shared, uint64_t shared_bytes) {
  char why[512] = "";
  if (tcc_cudnn::backward(a.plan, s, q, k, v, out, dout, lse, dq, dk, dv,
                          attention_workspace_for(a, shared, shared_bytes), why, sizeof why))
    return set_error("%s in %s", why, where(a.kernel).c_str());
  return 0;
}

// Entry::prepare of an entry with attention sites: plans, note, and the
// profile's kernel names of the sites cuDNN runs.
inline int32_t prepare_entry_attention(EntryState &es, AttentionSite *const *sites,
                                       int32_t count, uint64_t shared_workspace_bytes) {
  prepare_attention(sites, count, shared_workspace_bytes, es.prepare_note);
  const Entry &e = *es.entry;
  es.kernel_names.assign(e.kernels, e.kernels + e.num_kernels);
  for (int32_t i = 0; i < count; ++i)
    if (sites[i]->cudnn && sites[i]->kernel >= 0 && sites[i]->kernel < e.num_kernels)
      es.kernel_names[sites[i]->kernel] =
          sites[i]->site.backward ? "cudnn_sdpa_backward" : "cudnn_sdpa_forward";
  return 0;
}

// ---- convolutions through cuDNN (tcc_cudnn::ConvSite), else tcc's kernels ----
//
// A kern.conv2d call site on f32 / bf16 / f16 becomes a ConvSite; the
// entry's prepare (before its first call, so before any capture) builds
// its cuDNN plan; a site cuDNN declines, or every site when cuDNN does not
// load, keeps tcc's direct kernels (prelude conv_kernels.cuh), which
// compute the same function.
struct ConvSite {
  tcc_cudnn::ConvSite site;
  int32_t kernel;     // the launch index (label, profile)
  bool cudnn = false; // prepare_conv_sites: cuDNN runs this site
  tcc_cudnn::Plan plan;
};

// Plans for `sites` (cuDNN already loaded, or not: then none): cuDNN's
// first engine, or where that needs more than the shared workspace the step
// planned, its first engine within it; a site with none that fits keeps the
// first, and the largest such plan's workspace is allocated beyond the
// plan. `note` gets "convolutions: cuDNN 9.19.0 for 6 of 6 call sites",
// "(3 within the planned workspace instead of cuDNN's first choice)" and
// "(2 beyond the planned workspace: +12.0 MiB)" when those happen.
// TCC_DEBUG_CONV_PLANS=1 prints each site's shape and workspaces.
inline void prepare_conv_sites(ConvSite *const *sites, int32_t count,
                               uint64_t shared_workspace_bytes, std::string &note) {
  char why[512] = "";
  if (tcc_cudnn::load(TCC_CUDA_LIB_DIR, why, sizeof why) != 0) {
    note = std::string("convolutions: tcc kernels (cuDNN: ") + why + ")";
    return;
  }
  int32_t ran = 0, beyond = 0, held = 0;
  uint64_t need = 0;
  std::string declined;
  for (int32_t i = 0; i < count; ++i) {
    ConvSite &c = *sites[i];
    // cuDNN's first choice; only when it needs more than the planned
    // workspace, the first choice within it (none: the first choice).
    // (Within the estimate every site of ResNet-50 and a UNet keeps its
    // first choice; engines without workspace ran 5x slower.)
    bool ok = tcc_cudnn::prepare_conv(c.site, -1, c.plan, why, sizeof why) == 0;
    const int64_t first = ok ? c.plan.workspace_bytes : -1;
    if (ok && static_cast<uint64_t>(c.plan.workspace_bytes) > shared_workspace_bytes) {
      tcc_cudnn::Plan within;
      if (tcc_cudnn::prepare_conv(c.site, static_cast<int64_t>(shared_workspace_bytes), within,
                                  why, sizeof why) == 0) {
        c.plan = within; // (the first plan's graph stays allocated: once per site)
        ++held;
      }
    }
    if (std::getenv("TCC_DEBUG_CONV_PLANS")) {
      const tcc_cudnn::ConvSite &q = c.site;
      std::fprintf(stderr,
                   "conv plan: product %d dtype %d%s x %lldx%lldx%lldx%lld w %lldx%lldx%lld s%lld "
                   "first %lld chosen %lld\n",
                   q.product, q.dtype, q.nhwc ? " NHWC" : "", (long long)q.n, (long long)q.c, (long long)q.h,
                   (long long)q.w, (long long)q.o, (long long)q.kh, (long long)q.kw,
                   (long long)q.sh, (long long)first, (long long)c.plan.workspace_bytes);
    }
    if (ok) {
      c.cudnn = true;
      ++ran;
      if (static_cast<uint64_t>(c.plan.workspace_bytes) > shared_workspace_bytes) {
        ++beyond;
        need = std::max<uint64_t>(need, static_cast<uint64_t>(c.plan.workspace_bytes));
      }
    } else if (declined.empty()) {
      declined = std::string("; the others keep tcc's kernels: ") + why;
    }
  }
  AttentionWorkspace &w = attention_workspace();
  if (need > shared_workspace_bytes && need > w.bytes) {
    void *p = device_alloc(need);
    if (!p) { // out of memory: every site keeps tcc's kernels
      for (int32_t i = 0; i < count; ++i)
        sites[i]->cudnn = false;
      note = "convolutions: tcc kernels (cuDNN's workspace does not fit: " + state().error + ")";
      return;
    }
    device_release(w.ptr);
    w.ptr = p;
    w.bytes = need;
  }
  note = "convolutions: cuDNN " + std::string(tcc_cudnn::version()) + " for " +
         std::to_string(ran) + " of " + std::to_string(count) + " call sites" + declined;
  if (held)
    note += " (" + std::to_string(held) +
            " within the planned workspace instead of cuDNN's first choice)";
  if (beyond) {
    char extra[96];
    std::snprintf(extra, sizeof extra, " (%d beyond the planned workspace: +%.1f MiB)", beyond,
                  need / 1048576.0);
    note += extra;
  }
}

inline int32_t cudnn_conv(const ConvSite &c, cudaStream_t s, const void *a, const void *b,
                          void *out, void *shared, uint64_t shared_bytes) {
  char why[512] = "";
  void *workspace = static_cast<uint64_t>(c.plan.workspace_bytes) <= shared_bytes
                        ? shared
                        : attention_workspace().ptr;
  if (tcc_cudnn::conv(c.plan, s, a, b, out, workspace, why, sizeof why))
    return set_error("%s in %s", why, where(c.kernel).c_str());
  return 0;
}

// Entry::prepare of an entry with cuDNN sites (attention, convolutions):
// plans, the note, and the profile's kernel names of the sites cuDNN runs.
inline int32_t prepare_entry_cudnn(EntryState &es, AttentionSite *const *attention,
                                   int32_t num_attention, ConvSite *const *convs,
                                   int32_t num_convs, uint64_t shared_workspace_bytes) {
  if (num_attention > 0)
    prepare_entry_attention(es, attention, num_attention, shared_workspace_bytes);
  else {
    const Entry &e = *es.entry;
    es.kernel_names.assign(e.kernels, e.kernels + e.num_kernels);
  }
  if (num_convs > 0) {
    std::string note;
    prepare_conv_sites(convs, num_convs, shared_workspace_bytes, note);
    es.prepare_note += (es.prepare_note.empty() ? "" : "; ") + note;
    const Entry &e = *es.entry;
    static const char *const kNames[] = {"cudnn_conv_fprop", "cudnn_conv_dgrad",
                                         "cudnn_conv_wgrad"};
    for (int32_t i = 0; i < num_convs; ++i)
      if (convs[i]->cudnn && convs[i]->kernel >= 0 && convs[i]->kernel < e.num_kernels)
        es.kernel_names[convs[i]->kernel] = kNames[convs[i]->site.product];
  }
  return 0;
}
