// A 64-byte aligned, zero-initialized host buffer owned by trun.
#ifndef TCC_RUNTIME_TRUN_BASE_ALIGNEDBUFFER_H
#define TCC_RUNTIME_TRUN_BASE_ALIGNEDBUFFER_H

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace tcc::trun {

// The step ABI promises 64-byte alignment (a cache line, the widest AVX-512
// load); a later GPU path replaces this with pinned memory.
inline constexpr size_t kBufferAlignment = 64;

class AlignedBuffer {
public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size_bytes) : size_(size_bytes) {
    // aligned_alloc needs a multiple of the alignment; never hand out null,
    // even for empty tensors, so steps can rely on non-null pointers.
    size_t rounded = (size_bytes + kBufferAlignment - 1) / kBufferAlignment *
                     kBufferAlignment;
    if (rounded == 0)
      rounded = kBufferAlignment;
    data_.reset(std::aligned_alloc(kBufferAlignment, rounded));
    if (data_)
      std::memset(data_.get(), 0, rounded);
  }

  // False when the allocation failed.
  bool ok() const { return data_ != nullptr; }
  void *data() { return data_.get(); }
  const void *data() const { return data_.get(); }
  size_t size() const { return size_; }
  template <typename T> T *as() { return static_cast<T *>(data_.get()); }
  template <typename T> const T *as() const {
    return static_cast<const T *>(data_.get());
  }

private:
  struct FreeDeleter {
    void operator()(void *p) const { std::free(p); }
  };
  std::unique_ptr<void, FreeDeleter> data_;
  size_t size_ = 0;
};

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_BASE_ALIGNEDBUFFER_H
