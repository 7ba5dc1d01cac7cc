} // namespace tcc_cuda

#endif // TCC_CUDA_PRELUDE_CUH
