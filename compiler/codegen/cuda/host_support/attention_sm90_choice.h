// ---- tcc's Hopper attention (cuda/sm90/) as a candidate at attention sites ----
//
// When the step links tcc's sm90 attention units (the driver defines
// TCC_STEP_SM90_ATTENTION: target sm_90, no --no-sm90-attention, a 16-bit
// attention site cuDNN may run), each such site is timed on its first call
// (which never runs inside a CUDA graph capture) on the call's own operands:
// tcc's sm90 kernel against what the site runs otherwise (cuDNN's plan, or
// the flash kernels where cuDNN declined), a warm-up each, then two rounds
// of kGemmTimedRuns calls each, alternating; the faster round of each
// counts. The sm90 kernel replaces the other only when at least 2% faster
// (kGemmSearchMargin). One decision per shape in the process (the sites of
// a model's layers share theirs); each timing adds a line to the entry's
// note ("attention backward B16 H12 T1024 S1024 D64 causal: tcc sm90 0.272
// ms, cuDNN 0.290 ms: tcc sm90"), which trun prints, and a site that runs
// the sm90 kernel is named tcc_sm90_attention_forward / _backward in the
// profile. Not timed (the other stays): TCC_ATTENTION_SM90=0, a GPU other
// than sm_90, a shape the kernels refuse (the note says why), a
// deterministic backward (dq is summed with f32 atomics), a backward whose
// workspace the step did not plan. TCC_ATTENTION_SM90=force: the sm90
// kernel wherever it can run, untimed (tests and A/B runs).
#ifdef TCC_STEP_SM90_ATTENTION

enum Sm90AttentionMode { kSm90AttentionOff, kSm90AttentionTimed, kSm90AttentionForced };
inline Sm90AttentionMode sm90_attention_mode() {
  return static_cast<Sm90AttentionMode>(sm90_family_switch("TCC_ATTENTION_SM90"));
}

// "forward B16 H12/12 T1024 S1024 D64 bf16 causal" (+ strides: the same
// shape in another layout may time differently).
inline std::string sm90_site_key(const tcc_cudnn::Site &s) {
  char text[512];
  std::snprintf(text, sizeof text,
                "%s B%lld H%lld/%lld T%lld S%lld D%lld %s%s%s scale %a q %lld,%lld,%lld k "
                "%lld,%lld,%lld v %lld,%lld,%lld o %lld,%lld,%lld",
                s.backward ? "backward" : "forward", (long long)s.B, (long long)s.H,
                (long long)s.Hkv, (long long)s.T, (long long)s.S, (long long)s.D,
                s.f16 ? "f16" : "bf16", s.causal ? " causal" : "",
                s.deterministic ? " deterministic" : "", static_cast<double>(s.scale),
                (long long)s.q.b, (long long)s.q.h, (long long)s.q.r, (long long)s.k.b,
                (long long)s.k.h, (long long)s.k.r, (long long)s.v.b, (long long)s.v.h,
                (long long)s.v.r, (long long)s.o.b, (long long)s.o.h, (long long)s.o.r);
  return text;
}

// The note's name of a shape: "attention backward B16 H12 T1024 S1024 D64 causal"
// (H32/8 with grouped K/V heads).
inline std::string sm90_site_name(const tcc_cudnn::Site &s) {
  auto n = [](int64_t v) { return std::to_string(static_cast<long long>(v)); };
  return std::string("attention ") + (s.backward ? "backward" : "forward") + " B" + n(s.B) +
         " H" + n(s.H) + (s.Hkv != s.H ? "/" + n(s.Hkv) : "") + " T" + n(s.T) + " S" + n(s.S) +
         " D" + n(s.D) + (s.causal ? " causal" : "");
}

inline tcc_sm90::AttnSm90Strides sm90_strides(const tcc_cudnn::Strides &s) {
  return {s.b, s.h, s.r};
}

inline tcc_sm90::AttnSm90Forward sm90_forward_args(const AttentionSite &a, cudaStream_t s,
                                                   const void *q, const void *k, const void *v,
                                                   void *out, float *lse) {
  const tcc_cudnn::Site &c = a.site;
  tcc_sm90::AttnSm90Forward f;
  f.B = c.B, f.H = c.H, f.Hkv = c.Hkv, f.T = c.T, f.S = c.S, f.D = c.D;
  f.q = q, f.k = k, f.v = v, f.out = out, f.lse = lse;
  f.qs = sm90_strides(c.q), f.ks = sm90_strides(c.k), f.vs = sm90_strides(c.v);
  f.os = sm90_strides(c.o);
  f.scale = c.scale, f.causal = c.causal, f.f16 = c.f16;
  f.scheduler = a.sm90_scheduler;
  f.stream = s;
  return f;
}

inline tcc_sm90::AttnSm90Backward
sm90_backward_args(const AttentionSite &a, cudaStream_t s, const void *q, const void *k,
                   const void *v, const void *out, const void *dout, const float *lse, void *dq,
                   void *dk, void *dv, void *workspace) {
  const tcc_cudnn::Site &c = a.site;
  tcc_sm90::AttnSm90Backward b;
  b.B = c.B, b.H = c.H, b.Hkv = c.Hkv, b.T = c.T, b.S = c.S, b.D = c.D;
  b.q = q, b.k = k, b.v = v, b.out = out, b.dout = dout, b.lse = lse;
  b.dq = dq, b.dk = dk, b.dv = dv;
  b.qs = sm90_strides(c.q), b.ks = sm90_strides(c.k), b.vs = sm90_strides(c.v);
  b.os = sm90_strides(c.o), b.dos = sm90_strides(c.dout), b.dqs = sm90_strides(c.dq);
  b.dks = sm90_strides(c.dk), b.dvs = sm90_strides(c.dv);
  b.scale = c.scale, b.causal = c.causal, b.f16 = c.f16;
  b.workspace = workspace;
  b.stream = s;
  return b;
}

// Decisions per shape (sm90_site_key): 1 the sm90 kernel, 0 the other.
inline std::map<std::string, int8_t> &sm90_decisions() {
  static std::map<std::string, int8_t> d;
  return d;
}

// Settles a.sm90 (1 or 0) on the site's first call, timing `sm90` against
// `other` (callables returning 0 on success) unless the shape was decided
// before; leaves it -1 (undecided, the other runs) while capturing.
// `refused`: why the sm90 kernel cannot run this call (nullptr: it can).
template <class Sm90, class Other>
inline int32_t decide_sm90_attention(AttentionSite &a, cudaStream_t s, const char *refused,
                                     Sm90 &&sm90, Other &&other) {
  const Sm90AttentionMode mode = sm90_attention_mode();
  if (mode == kSm90AttentionOff || refused) {
    a.sm90 = 0;
    if (refused && mode != kSm90AttentionOff)
      if (EntryState *es = current_call())
        es->prepare_note += "; " + sm90_site_name(a.site) + ": not tcc sm90 (" + refused + ")";
    return 0;
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(s, &capturing);
  if (capturing != cudaStreamCaptureStatusNone)
    return 0; // decided by a later call outside the capture
  if (!a.site.backward && !a.sm90_scheduler) { // the forward's two work counters
    a.sm90_scheduler = static_cast<int *>(device_alloc(2 * sizeof(int)));
    if (!a.sm90_scheduler)
      return set_error("allocating tcc sm90 attention's work counters: %s",
                       state().error.c_str());
    if (cudaError_t e = cudaMemsetAsync(a.sm90_scheduler, 0, 2 * sizeof(int), s);
        e != cudaSuccess)
      return cuda_error(e, "cudaMemsetAsync (tcc sm90 attention's work counters)");
  }
  const std::string key = sm90_site_key(a.site) + (mode == kSm90AttentionForced ? " forced" : "");
  auto &decisions = sm90_decisions();
  if (auto it = decisions.find(key); it != decisions.end()) {
    a.sm90 = it->second;
    return 0;
  }
  if (mode == kSm90AttentionForced) {
    a.sm90 = 1;
    decisions[key] = 1;
    if (EntryState *es = current_call())
      es->prepare_note += "; " + sm90_site_name(a.site) + ": tcc sm90 (TCC_ATTENTION_SM90=force)";
    return 0;
  }
  // Two rounds in turn, each side's fastest kept: best[0] sm90, best[1] the other.
  std::vector<double> best;
  int32_t rc = 0;
  if (cudaError_t e = time_candidates(
          s, 2, 2, [&](int i) { return (i ? other() : sm90()) == 0; }, best);
      e != cudaSuccess)
    rc = cuda_error(e, ("timing tcc sm90 attention, " + where(a.kernel)).c_str());
  if (rc)
    return rc;
  if (int32_t mark = profile_mark(s, -1)) // the timing is no launch's time
    return mark;
  if (best[0] < 0 || best[1] < 0) {
    a.sm90 = 0; // nothing to compare (the note says so): the other
    if (EntryState *es = current_call())
      es->prepare_note += "; " + sm90_site_name(a.site) + ": not tcc sm90 (could not time it)";
    return 0;
  }
  a.sm90 = best[0] < kGemmSearchMargin * best[1] ? 1 : 0;
  decisions[key] = a.sm90;
  if (EntryState *es = current_call()) {
    const char *other_name = a.cudnn ? "cuDNN" : "tcc flash";
    char line[512];
    std::snprintf(line, sizeof line, "; %s: tcc sm90 %.3f ms, %s %.3f ms: %s",
                  sm90_site_name(a.site).c_str(), best[0], other_name, best[1],
                  a.sm90 ? "tcc sm90" : other_name);
    es->prepare_note += line;
  }
  return 0;
}

// Names the site's launch in the profile when the sm90 kernel runs it.
inline void name_sm90_launch(const AttentionSite &a) {
  EntryState *es = current_call();
  if (!es || !es->entry || a.kernel < 0 || a.kernel >= es->entry->num_kernels)
    return;
  if (es->kernel_names.empty())
    es->kernel_names.assign(es->entry->kernels, es->entry->kernels + es->entry->num_kernels);
  es->kernel_names[a.kernel] =
      a.site.backward ? "tcc_sm90_attention_backward" : "tcc_sm90_attention_forward";
}

// The host line of a forward site: the sm90 kernel when decided so, else
// `other` (cuDNN's plan or the flash kernels: the generated code's lambda).
template <class Other>
inline int32_t sm90_attention_forward(AttentionSite &a, cudaStream_t s, const void *q,
                                      const void *k, const void *v, void *out, float *lse,
                                      Other &&other) {
  // (A call it refuses, e.g. operands placed otherwise than at the first
  // call, runs the other: nothing was launched.)
  auto run = [&]() -> int32_t {
    const char *why = "";
    tcc_sm90::AttnSm90Forward f = sm90_forward_args(a, s, q, k, v, out, lse);
    if (tcc_sm90::attention_forward_sm90(f, &why))
      return other();
    cudaError_t e = cudaPeekAtLastError();
    return e == cudaSuccess ? 0 : cuda_error(e, ("tcc sm90 attention forward, " + where(a.kernel)).c_str());
  };
  if (a.sm90 < 0) {
    tcc_sm90::AttnSm90Forward f = sm90_forward_args(a, s, q, k, v, out, lse);
    f.scheduler = reinterpret_cast<int *>(16); // (a stand-in: the decision allocates it)
    if (int32_t rc = decide_sm90_attention(a, s, tcc_sm90::attention_forward_sm90_unsupported(f),
                                           run, other))
      return rc;
  }
  if (a.sm90 == 1) {
    name_sm90_launch(a);
    return run();
  }
  return other();
}

template <class Other>
inline int32_t sm90_attention_backward(AttentionSite &a, cudaStream_t s, const void *q,
                                       const void *k, const void *v, const void *out,
                                       const void *dout, const float *lse, void *dq, void *dk,
                                       void *dv, void *shared, uint64_t shared_bytes,
                                       Other &&other) {
  tcc_sm90::AttnSm90Backward b =
      sm90_backward_args(a, s, q, k, v, out, dout, lse, dq, dk, dv, shared);
  auto run = [&]() -> int32_t {
    const char *why = "";
    if (tcc_sm90::attention_backward_sm90(b, &why))
      return other(); // (refused, nothing launched: as the forward's)
    cudaError_t e = cudaPeekAtLastError();
    return e == cudaSuccess ? 0 : cuda_error(e, ("tcc sm90 attention backward, " + where(a.kernel)).c_str());
  };
  if (a.sm90 < 0) {
    const char *refused = a.site.deterministic
                              ? "a deterministic backward: its dq is summed with atomics"
                          : static_cast<uint64_t>(tcc_sm90::attention_backward_sm90_workspace(b)) >
                                  shared_bytes
                              ? "its workspace is larger than the step planned"
                              : tcc_sm90::attention_backward_sm90_unsupported(b);
    if (int32_t rc = decide_sm90_attention(a, s, refused, run, other))
      return rc;
  }
  if (a.sm90 == 1) {
    name_sm90_launch(a);
    return run();
  }
  return other();
}

#endif // TCC_STEP_SM90_ATTENTION
