// The control block of a generated CUDA step: one layout that the CUDA
// code generator (which places the loss, hyper-parameters and train
// outputs in it) and cuda_host_support.h (which uploads and reads it back)
// both include (cuda_host_support.h: its piece host_support/run_call.h).
//
// Constants only, no includes, no namespace: it is included inside a
// namespace by both (tcc::codegen::control, tcc_cuda_host), after
// <cstdint>. cuda_host_support.h is text pasted into generated sources:
// EmbedSources.cmake puts the lines between the two embed markers in
// place of its #include, so the generated host unit reads as before.
#ifndef TCC_COMPILER_CODEGEN_CUDA_CONTROLBLOCKLAYOUT_H
#define TCC_COMPILER_CODEGEN_CUDA_CONTROLBLOCKLAYOUT_H
// tcc-embed-begin
// The control block at `control_offset` in the workspace: written by the
// host before the kernels (status 0, hyper-parameters) and read back after
// them (status, loss, train outputs), both as one copy from / to a pinned
// mirror, so a captured graph replays them with the values of each call.
//   [0, 4)    status: 0, or 1 + the index of the kernel that found a bad id
//   [8, 16)   the loss (f32 or f64)
//   [16, 64)  hyper-parameters, 8 bytes each (learning rate, step, seed)
//   [64, ...) train outputs (grad_norm, ...), each 64-byte aligned
constexpr uint64_t kControlLossOffset = 8;
constexpr uint64_t kControlHyperOffset = 16;
constexpr uint64_t kControlHeaderBytes = 64;
// tcc-embed-end
#endif // TCC_COMPILER_CODEGEN_CUDA_CONTROLBLOCKLAYOUT_H
