// ---- FP8 matrix products (cuBLASLt, sm_89 and later; issue 37) ----

enum Fp8Type { kFp8E4M3 = 0, kFp8E5M2 = 1 };

// Row-major out(m x n) = (*dequant_a) (*dequant_b) * A(m x k) . B(n x k)^T
// [+ residual]:
// both operands row-major FP8 with K contiguous, the one layout cuBLASLt's
// FP8 kernels take ("TN" in its column-major terms: out^T = B A^T with its
// A = our B transposed). fp32 accumulation; out bf16 or f32 (out_type
// kGemmBF16 / kGemmF32). dequant_a and dequant_b are device floats, the
// inverses of the scales the operands were cast with (launch_fp8_cast_transpose),
// read by the kernel, so delayed scaling updates them without a host sync;
// each 16-byte aligned.
// residual (m x n, out's type; may be out itself) is cuBLASLt's C with beta
// = 1, or null. E5M2 x E5M2 is not a cuBLASLt FP8 product. fast_accum: cuBLASLt's
// CUBLASLT_MATMUL_DESC_FAST_ACCUM (no periodic promotion of the tensor cores'
// partial sums to fp32: faster, less accurate for long K; Transformer Engine
// uses it in the forward only). Leading dimensions must be 16-byte aligned:
// k a multiple of 16, n a multiple of 8 (bf16 out) or 4 (f32).
// The algorithm is chosen as gemm()'s are (gemm_search.h): up to 16 of
// cuBLASLt's candidates timed on the first call's operands, the choice
// cached per GPU and cuBLASLt version under a descriptor such as
// "e4m3xe5m2->bf16 8192x2048x5632 NT none beta0 align256 ws33554432 32F"
// ("32F_FAST" with fast accumulation); TCC_GEMM_SEARCH=0: the first answer.
inline int32_t gemm_fp8(GemmPlan &p, cudaStream_t s, int32_t kernel, Fp8Type type_a,
                        Fp8Type type_b, GemmType out_type, bool fast_accum, int64_t m,
                        int64_t n, int64_t k, const float *dequant_a, const float *dequant_b,
                        const void *A, const void *B, const void *residual, void *out,
                        void *workspace, size_t workspace_bytes) {
  if (type_a == kFp8E5M2 && type_b == kFp8E5M2)
    return set_error("kernel %d: an FP8 product of two E5M2 operands (cuBLASLt has none)",
                     kernel);
  if (k % 16 != 0 || n % (out_type == kGemmBF16 ? 8 : 4) != 0)
    return set_error("kernel %d: FP8 product %lldx%lldx%lld: k must be a multiple of 16 and n "
                     "of %d (16-byte rows)",
                     kernel, static_cast<long long>(m), static_cast<long long>(n),
                     static_cast<long long>(k), out_type == kGemmBF16 ? 8 : 4);
  // A scale 4 bytes into a 16-byte line is refused at the call
  // (CUBLAS_STATUS_NOT_SUPPORTED; H200, cuBLASLt 13.1, 2026-11-30).
  if ((reinterpret_cast<uintptr_t>(dequant_a) | reinterpret_cast<uintptr_t>(dequant_b)) % 16 != 0)
    return set_error("kernel %d: FP8 product: its dequantization scales must be 16-byte aligned",
                     kernel);
  auto fp8 = [](Fp8Type t) { return t == kFp8E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; };
  const cudaDataType_t outType = out_type == kGemmBF16 ? CUDA_R_16BF : CUDA_R_32F;
  if (!p.ready) {
    if (int32_t rc = check_cublas(
            cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), kernel))
      return rc;
    cublasOperation_t opA = CUBLAS_OP_T, opB = CUBLAS_OP_N; // cuBLAS's A is our B
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA));
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB));
    int8_t fast = fast_accum ? 1 : 0;
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
    if (int32_t rc = check_cublas(cublasLtMatrixLayoutCreate(&p.a, fp8(type_b), k, n, k), kernel))
      return rc;
    if (int32_t rc = check_cublas(cublasLtMatrixLayoutCreate(&p.b, fp8(type_a), k, m, k), kernel))
      return rc;
    if (int32_t rc = check_cublas(cublasLtMatrixLayoutCreate(&p.c, outType, n, m, n), kernel))
      return rc;
    // Scale pointers before the heuristic, which may weigh them.
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dequant_b,
                                   sizeof(dequant_b));
    cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dequant_a,
                                   sizeof(dequant_a));
    cublasLtMatmulPreference_t pref = nullptr;
    uint64_t alignment = pointer_alignment(gemm_alignment(A, B, out, 1, 0, 0, 0, 1), residual);
    if (int32_t rc = gemm_preference(pref, workspace_bytes, alignment, kernel))
      return rc;
    // Timed on this call's operands. Beta 0: out is only written, and the
    // call below writes it again; with a residual (beta 1), which out may
    // be, the search writes a scratch D.
    const float alpha = 1.0f, beta = residual ? 1.0f : 0.0f;
    const size_t outBytes = out_type == kGemmBF16 ? 2 : 4;
    GemmOperands o{p.op,
                   p.a,
                   p.b,
                   p.c,
                   &alpha,
                   &beta,
                   B,
                   A,
                   residual ? residual : out,
                   out,
                   residual ? static_cast<size_t>(m * n) * outBytes : 0,
                   out_type == kGemmBF16,
                   workspace,
                   workspace_bytes,
                   s};
    const char *name[2] = {"e4m3", "e5m2"};
    const std::string in = std::string(name[type_a]) + "x" + name[type_b];
    std::string descriptor = gemm_descriptor(
        in.c_str(), out_type == kGemmBF16 ? "bf16" : "f32", fast_accum ? "32F_FAST" : "32F",
        false, true, m, n, k, 1, 0, 0, 0, "none", residual != nullptr,
        alignment, workspace_bytes);
    int32_t rc = select_gemm_algo(descriptor, o, pref, kernel, p.choice);
    cublasLtMatmulPreferenceDestroy(pref);
    if (rc)
      return rc;
    p.algo = p.choice->algo;
    p.alignment = alignment;
    p.ready = true;
  }
  note_gemm_choice(kernel, p.choice);
  // The scale pointers may differ from call to call (attributes are cheap).
  cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dequant_b,
                                 sizeof(dequant_b));
  cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dequant_a,
                                 sizeof(dequant_a));
  const float alpha = 1.0f, beta = residual ? 1.0f : 0.0f;
  if (int32_t rc = check_cublas(cublasLtMatmul(state().lt, p.op, &alpha, B, p.a, A, p.b, &beta,
                                               residual ? residual : out, p.c, out, p.c,
                                               &p.algo, workspace, workspace_bytes, s),
                                kernel))
    return rc;
  return profile_mark(s, kernel);
}
