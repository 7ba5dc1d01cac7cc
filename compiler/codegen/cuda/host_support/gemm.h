// ---- matrix products (cuBLASLt) ----

enum GemmType { kGemmF32 = 0, kGemmF64 = 1, kGemmBF16 = 2, kGemmF16 = 3 };

// One call site's descriptors and algorithm, made on its first call and
// remade (once per halving) if a later call's operands are less aligned
// than the ones it was chosen for.
struct GemmPlan {
  bool ready = false;
  uint64_t alignment = 0; // bytes every operand (and batch stride) is aligned to
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
  const GemmChoice *choice = nullptr; // how algo was chosen (gemm_search.h)
  // gemm_epilogue only: a CUTLASS kernel that replaces algo (gemm_cutlass.h)
  const GemmChoice *cutlass = nullptr;
};

// The largest power of two <= 256 dividing every address and batch stride
// (in bytes): cuBLASLt's heuristic assumes 256-byte aligned operands unless
// told otherwise, and an algorithm chosen for that fails on, e.g., a bf16
// matrix at an odd element offset inside a broadcast batch.
inline uint64_t gemm_alignment(const void *A, const void *B, const void *C, int64_t batch,
                               int64_t stride_a, int64_t stride_b, int64_t stride_c,
                               size_t element_bytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B) |
                  reinterpret_cast<uintptr_t>(C) | 256u;
  if (batch > 1)
    bits |= static_cast<uint64_t>(stride_a | stride_b | stride_c) * element_bytes;
  return bits & (~bits + 1); // the lowest set bit
}

// The heuristic's preference for a plan: the workspace it may use and the
// alignment (bytes) every operand has. The caller destroys it.
inline int32_t gemm_preference(cublasLtMatmulPreference_t &pref, uint64_t workspace_bytes,
                               uint64_t alignment, int32_t kernel) {
  if (int32_t rc = check_cublas(cublasLtMatmulPreferenceCreate(&pref), kernel))
    return rc;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace_bytes, sizeof(workspace_bytes));
  uint32_t align32 = static_cast<uint32_t>(alignment);
  for (cublasLtMatmulPreferenceAttributes_t attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(pref, attr, &align32, sizeof(align32));
  return 0;
}

inline void destroy_plan(GemmPlan &p) {
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  p = GemmPlan{};
}

// Row-major out[batch](m x n) = alpha * op(A)(m x k) op(B)(k x n) + beta * out,
// computed as the column-major product out^T = op(B)^T op(A)^T. Batch
// strides in elements (each operand contiguous within a matrix). bf16 / f16
// operands and result with fp32 accumulation and fp32 alpha / beta
// (CUBLAS_COMPUTE_32F; a 16-bit C is read and written in its own type).
inline int32_t gemm(GemmPlan &p, cudaStream_t s, int32_t kernel, GemmType type,
                    bool tf32, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                    int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c,
                    double alpha, double beta, const void *A, const void *B, void *C,
                    void *workspace, size_t workspace_bytes) {
  cudaDataType_t dt = type == kGemmF64    ? CUDA_R_64F
                      : type == kGemmBF16 ? CUDA_R_16BF
                      : type == kGemmF16  ? CUDA_R_16F
                                          : CUDA_R_32F;
  bool f64 = type == kGemmF64;
  size_t elementBytes = f64 ? 8 : type == kGemmF32 ? 4 : 2;
  uint64_t alignment =
      gemm_alignment(A, B, C, batch, stride_a, stride_b, stride_c, elementBytes);
  if (p.ready && alignment < p.alignment)
    destroy_plan(p);
  if (!p.ready) {
    cublasComputeType_t compute =
        f64 ? CUBLAS_COMPUTE_64F
            : (type == kGemmF32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;
    if (int32_t rc = check_cublas(cublasLtMatmulDescCreate(&p.op, compute, scale), kernel))
      return rc;
    cublasOperation_t opA = tb ? CUBLAS_OP_T : CUBLAS_OP_N; // cuBLAS "A" is our B
    cublasOperation_t opB = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA));
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB));
    uint64_t rowsA = tb ? k : n, colsA = tb ? n : k;
    uint64_t rowsB = ta ? m : k, colsB = ta ? k : m;
    if (int32_t rc = check_cublas(
            cublasLtMatrixLayoutCreate(&p.a, dt, rowsA, colsA, rowsA), kernel))
      return rc;
    if (int32_t rc = check_cublas(
            cublasLtMatrixLayoutCreate(&p.b, dt, rowsB, colsB, rowsB), kernel))
      return rc;
    if (int32_t rc = check_cublas(cublasLtMatrixLayoutCreate(&p.c, dt, n, m, n), kernel))
      return rc;
    if (batch > 1) {
      int32_t count = static_cast<int32_t>(batch);
      cublasLtMatrixLayout_t layouts[3] = {p.a, p.b, p.c};
      int64_t strides[3] = {stride_b, stride_a, stride_c};
      for (int i = 0; i < 3; ++i) {
        cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                         &count, sizeof(count));
        cublasLtMatrixLayoutSetAttribute(layouts[i],
                                         CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                         &strides[i], sizeof(strides[i]));
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    if (int32_t rc = gemm_preference(pref, workspace_bytes, alignment, kernel))
      return rc;
    float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
    // Timed on this call's operands; with beta != 0 D (= C) is read, so
    // the search writes a scratch D of C's extent.
    size_t extent = static_cast<size_t>((batch - 1) * stride_c + m * n) * elementBytes;
    GemmOperands o{p.op, p.a, p.b, p.c,
                   f64 ? static_cast<const void *>(&alpha) : &alpha32,
                   f64 ? static_cast<const void *>(&beta) : &beta32,
                   B, A, C, C, beta != 0 ? extent : 0, type == kGemmBF16 || type == kGemmF16,
                   workspace, workspace_bytes, s};
    const char *typeName = f64 ? "f64" : type == kGemmBF16 ? "bf16"
                                       : type == kGemmF16  ? "f16"
                                                           : "f32";
    std::string descriptor = gemm_descriptor(
        typeName, typeName, f64 ? "64F" : compute == CUBLAS_COMPUTE_32F ? "32F" : "32F_TF32",
        ta, tb, m, n, k, batch, stride_a, stride_b, stride_c, "none", beta != 0, alignment,
        workspace_bytes);
    int32_t rc = select_gemm_algo(descriptor, o, pref, kernel, p.choice);
    cublasLtMatmulPreferenceDestroy(pref);
    if (rc)
      return rc;
    p.algo = p.choice->algo;
    p.alignment = alignment;
    p.ready = true;
  }
  note_gemm_choice(kernel, p.choice);
  float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
  const void *pa = f64 ? static_cast<const void *>(&alpha) : &alpha32;
  const void *pb = f64 ? static_cast<const void *>(&beta) : &beta32;
  if (int32_t rc = check_cublas(cublasLtMatmul(state().lt, p.op, pa, B, p.a, A, p.b, pb, C, p.c, C,
                                     p.c, &p.algo, workspace, workspace_bytes, s),
                      kernel))
    return rc;
  return profile_mark(s, kernel);
}


// ---- matrix products with an epilogue (kern.gemm_epilogue) ----

// cuBLASLt epilogues tcc uses: bias (BIAS), bias then tanh-GELU (GELU_BIAS),
// and the same saving the pre-activation for the backward (GELU_AUX_BIAS).
// DGELU (kern.gemm_dgelu): D = gelu'(aux) * product, aux the saved
// pre-activation read as an input, no bias. The bias-gradient epilogues
// write the bias vector instead of reading it: kEpilogueBGradB (kern.gemm_bgrad,
// cuBLASLt's BGRADA: our B is cuBLAS's A) = the sums of our B over K, one
// per column N; kEpilogueDGeluBGrad (kern.gemm_dgelu with a bias gradient,
// DGELU_BGRAD) = the sums of D over its M rows. kEpilogueNone: no bias, only
// the residual (C with beta = 1; cuBLASLt's DEFAULT epilogue), for products
// of bias-free layers added to the residual stream.
enum GemmEpilogue {
  kEpilogueBias = 0,
  kEpilogueGeluBias = 1,
  kEpilogueGeluAuxBias = 2,
  kEpilogueDGelu = 3,
  kEpilogueBGradB = 4,
  kEpilogueDGeluBGrad = 5,
  kEpilogueNone = 6
};

// The epilogue's name in GEMM descriptors (gemm_search.h).
inline std::string gemm_epilogue_name(GemmEpilogue e) {
  switch (e) {
  case kEpilogueBias: return "bias";
  case kEpilogueGeluBias: return "gelu_bias";
  case kEpilogueGeluAuxBias: return "gelu_aux_bias";
  case kEpilogueDGelu: return "dgelu";
  case kEpilogueBGradB: return "bgrad";
  case kEpilogueDGeluBGrad: return "dgelu_bgrad";
  case kEpilogueNone: return "none";
  }
  return "epilogue#" + std::to_string(static_cast<int>(e));
}

inline bool epilogue_reads_aux(int epilogue) {
  return epilogue == kEpilogueDGelu || epilogue == kEpilogueDGeluBGrad;
}

#ifdef TCC_STEP_CUTLASS_SM90
// The CUTLASS epilogue (gemm_cutlass.h) that computes this product, or -1:
// tcc_cutlass::sm90_epilogue_for (the code generator's test too), and
// every pointer 16-byte aligned.
inline int cutlass_epilogue_for(GemmType in, GemmType out, bool ta, bool tb, int64_t n,
                                int64_t k, GemmEpilogue epilogue, bool residual,
                                uint64_t alignment) {
  using tcc_cutlass::Sm90Product;
  using tcc_cutlass::Sm90Type;
  if (alignment < 16)
    return -1;
  auto type = [](GemmType t) {
    return t == kGemmBF16 ? Sm90Type::kBF16 : t == kGemmF32 ? Sm90Type::kF32 : Sm90Type::kOther;
  };
  Sm90Product product = epilogue == kEpilogueGeluAuxBias ? Sm90Product::kGeluAuxBias
                        : epilogue == kEpilogueDGelu     ? Sm90Product::kDGelu
                        : epilogue == kEpilogueBias      ? Sm90Product::kBias
                                                         : Sm90Product::kOther;
  return tcc_cutlass::sm90_epilogue_for(product, type(in), type(out), ta, tb, n, k, residual);
}
#endif

inline uint64_t pointer_alignment(uint64_t alignment, const void *p) {
  if (!p)
    return alignment;
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | alignment;
  return bits & (~bits + 1);
}

// Row-major D(m x n) = epilogue(op(A) op(B) + bias) [+ residual], one
// product (no batch): A and B of type `in`, D, bias and residual of type
// `out` (in's, or f32 with 16-bit in: cuBLASLt's C/D type; the residual is C
// with beta = 1, added before the epilogue, so only with kEpilogueBias, or
// kEpilogueNone: no bias, bias unused).
// aux (kEpilogueGeluAuxBias) gets bias + product in D's type, leading
// dimension n (a multiple of 8); with kEpilogueDGelu it is read (the saved
// pre-activation) and bias is unused. With kEpilogueBGradB and
// kEpilogueDGeluBGrad `bias` (n, D's type) is written: the bias gradient
// (kEpilogueDGeluBGrad reads aux as kEpilogueDGelu does). Bias, aux and C
// pointers are set on every call; the plan is remade if they are less
// aligned than it assumed.
inline int32_t gemm_epilogue(GemmPlan &p, cudaStream_t s, int32_t kernel, GemmType in,
                             GemmType out, bool tf32, bool ta, bool tb, int64_t m, int64_t n,
                             int64_t k, GemmEpilogue epilogue, const void *A, const void *B,
                             const void *bias, const void *residual, void *D, void *aux,
                             void *workspace, size_t workspace_bytes) {
  auto dataType = [](GemmType t) {
    return t == kGemmF64 ? CUDA_R_64F : t == kGemmBF16 ? CUDA_R_16BF
                                      : t == kGemmF16  ? CUDA_R_16F
                                                       : CUDA_R_32F;
  };
  if (in == kGemmF64 || out == kGemmF64 ||
      (residual && epilogue != kEpilogueBias && epilogue != kEpilogueNone))
    return set_error("cuBLASLt epilogue: f64, or a residual with an activation, "
                     "is not supported in %s", where(kernel).c_str());
  if (epilogue == kEpilogueNone && !residual)
    return set_error("cuBLASLt epilogue: no bias and no residual in %s (a plain "
                     "product is gemm())", where(kernel).c_str());
  uint64_t alignment = gemm_alignment(A, B, D, 1, 0, 0, 0, 2);
  for (const void *q : {bias, residual, static_cast<const void *>(aux)})
    alignment = pointer_alignment(alignment, q);
  if (p.ready && alignment < p.alignment)
    destroy_plan(p);
  if (!p.ready) {
    cublasComputeType_t compute =
        in == kGemmF32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    if (int32_t rc =
            check_cublas(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F), kernel))
      return rc;
    cublasOperation_t opA = tb ? CUBLAS_OP_T : CUBLAS_OP_N; // cuBLAS "A" is our B
    cublasOperation_t opB = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA));
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB));
    // Column-major D^T (n x m): the bias runs along cuBLAS's rows, our N.
    // Our B is cuBLAS's A (n x k): the sums over k of BGRADA are ours over K.
    cublasLtEpilogue_t e = epilogue == kEpilogueBias          ? CUBLASLT_EPILOGUE_BIAS
                           : epilogue == kEpilogueGeluBias    ? CUBLASLT_EPILOGUE_GELU_BIAS
                           : epilogue == kEpilogueGeluAuxBias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                           : epilogue == kEpilogueDGelu       ? CUBLASLT_EPILOGUE_DGELU
                           : epilogue == kEpilogueBGradB      ? CUBLASLT_EPILOGUE_BGRADA
                           : epilogue == kEpilogueNone        ? CUBLASLT_EPILOGUE_DEFAULT
                                                              : CUBLASLT_EPILOGUE_DGELU_BGRAD;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
    int64_t ld = n;
    if (epilogue == kEpilogueGeluAuxBias || epilogue_reads_aux(epilogue))
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                     sizeof(ld));
    uint64_t rowsA = tb ? k : n, colsA = tb ? n : k;
    uint64_t rowsB = ta ? m : k, colsB = ta ? k : m;
    if (int32_t rc = check_cublas(
            cublasLtMatrixLayoutCreate(&p.a, dataType(in), rowsA, colsA, rowsA), kernel))
      return rc;
    if (int32_t rc = check_cublas(
            cublasLtMatrixLayoutCreate(&p.b, dataType(in), rowsB, colsB, rowsB), kernel))
      return rc;
    if (int32_t rc =
            check_cublas(cublasLtMatrixLayoutCreate(&p.c, dataType(out), n, m, n), kernel))
      return rc;
  }
  // Pointers of the epilogue: set before the heuristic (it reads their
  // alignment) and on every call (buffers may move between calls).
  if (epilogue != kEpilogueDGelu && epilogue != kEpilogueNone)
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                   sizeof(bias));
  if (epilogue == kEpilogueGeluAuxBias || epilogue_reads_aux(epilogue))
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                   sizeof(aux));
  if (!p.ready) {
    cublasLtMatmulPreference_t pref = nullptr;
    if (int32_t rc = gemm_preference(pref, workspace_bytes, alignment, kernel))
      return rc;
    float one = 1.0f, beta = residual ? 1.0f : 0.0f;
    // Timed on this call's operands; D is read when it may be the residual
    // or (DGELU) next to the aux it reads, so the search writes a scratch D.
    size_t outBytes = out == kGemmF32 ? 4 : 2;
    bool dRead = residual || epilogue_reads_aux(epilogue);
    GemmOperands o{p.op, p.a, p.b, p.c, &one, &beta, B, A, residual ? residual : D, D,
                   dRead ? static_cast<size_t>(m * n) * outBytes : 0, out != kGemmF32,
                   workspace, workspace_bytes, s};
    auto typeName = [](GemmType t) {
      return t == kGemmBF16 ? "bf16" : t == kGemmF16 ? "f16" : "f32";
    };
    std::string epilogueName = gemm_epilogue_name(epilogue);
    if (residual)
      epilogueName += "+residual";
    std::string descriptor = gemm_descriptor(
        typeName(in), typeName(out), in == kGemmF32 && tf32 ? "32F_TF32" : "32F", ta,
        tb, m, n, k, 1, 0, 0, 0, epilogueName.c_str(), residual != nullptr, alignment,
        workspace_bytes);
    int32_t rc = select_gemm_algo(descriptor, o, pref, kernel, p.choice);
    cublasLtMatmulPreferenceDestroy(pref);
    if (rc)
      return rc;
    p.algo = p.choice->algo;
    p.cutlass = nullptr;
#ifdef TCC_STEP_CUTLASS_SM90
    if (int e = cutlass_epilogue_for(in, out, ta, tb, n, k, epilogue, residual, alignment);
        e >= 0) {
      tcc_cutlass::Sm90GemmArgs args;
      args.m = m, args.n = n, args.k = k, args.A = A, args.B = B, args.bias = bias,
      args.aux = aux, args.residual = residual, args.D = D;
      if (int32_t rc = select_cutlass_epilogue(descriptor, o, *p.choice,
                                               static_cast<tcc_cutlass::Sm90Epilogue>(e), args,
                                               kernel, p.cutlass))
        return rc;
    }
#endif
    p.alignment = alignment;
    p.ready = true;
  }
#ifdef TCC_STEP_CUTLASS_SM90
  if (p.cutlass) {
    note_gemm_choice(kernel, p.cutlass);
    tcc_cutlass::Sm90GemmArgs args;
    args.m = m, args.n = n, args.k = k, args.A = A, args.B = B, args.bias = bias,
    args.aux = aux, args.residual = residual, args.D = D, args.workspace = workspace,
    args.workspace_bytes = workspace_bytes, args.stream = s;
    if (int32_t rc = run_cutlass_epilogue(
            *p.cutlass,
            static_cast<tcc_cutlass::Sm90Epilogue>(cutlass_epilogue_for(
                in, out, ta, tb, n, k, epilogue, residual != nullptr, alignment)),
            args, kernel))
      return rc;
    return profile_mark(s, kernel);
  }
#endif
  note_gemm_choice(kernel, p.choice);
  float alpha = 1.0f, beta = residual ? 1.0f : 0.0f;
  const void *C = residual ? residual : D;
  if (int32_t rc = check_cublas(cublasLtMatmul(state().lt, p.op, &alpha, B, p.a, A, p.b, &beta,
                                               C, p.c, D, p.c, &p.algo, workspace,
                                               workspace_bytes, s),
                                kernel))
    return rc;
  return profile_mark(s, kernel);
}
