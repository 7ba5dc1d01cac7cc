// The geometry of a 2-D sliding window (conv2d, max_pool2d, avg_pool2d;
// TgVisionOps.td), shared by the verifiers, the interpreter and the
// codegen. Plain C++: no MLIR types.
#ifndef TCC_DIALECTS_COMMON_WINDOW2D_H
#define TCC_DIALECTS_COMMON_WINDOW2D_H

#include <cstdint>
#include <string>

namespace tcc {

struct Window2d {
  int64_t kh = 1, kw = 1;         // kernel (for conv2d: the weight's KH, KW)
  int64_t sh = 1, sw = 1;         // stride
  int64_t ph = 0, pw = 0;         // zero padding, each side
  int64_t dh = 1, dw = 1;         // dilation

  // Floor division output size along one axis (the caller checks >= 1).
  static int64_t outSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
  }
  int64_t outH(int64_t h) const { return outSize(h, kh, sh, ph, dh); }
  int64_t outW(int64_t w) const { return outSize(w, kw, sw, pw, dw); }

  // The output size of the transposed convolution (conv_transpose2d) of an
  // `in`-long axis: the `out` this window maps back to `in` (plus
  // output_padding `op` rows that no window reaches).
  static int64_t transposedSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                                int64_t op) {
    return (in - 1) * s - 2 * p + d * (k - 1) + op + 1;
  }

  // Empty when stride, padding, dilation and kernel are valid, else why not.
  std::string checkAttributes() const {
    if (sh < 1 || sw < 1)
      return "stride must be >= 1, got (" + std::to_string(sh) + ", " + std::to_string(sw) + ")";
    if (ph < 0 || pw < 0)
      return "padding must be >= 0, got (" + std::to_string(ph) + ", " + std::to_string(pw) + ")";
    if (dh < 1 || dw < 1)
      return "dilation must be >= 1, got (" + std::to_string(dh) + ", " + std::to_string(dw) +
             ")";
    if (kh < 1 || kw < 1)
      return "kernel must be >= 1, got (" + std::to_string(kh) + ", " + std::to_string(kw) + ")";
    return "";
  }

  // Empty when the attributes are valid for an (h, w) input, else why not.
  std::string check(int64_t h, int64_t w) const {
    if (std::string why = checkAttributes(); !why.empty())
      return why;
    int64_t spanH = dh * (kh - 1) + 1, spanW = dw * (kw - 1) + 1;
    if (spanH > h + 2 * ph || spanW > w + 2 * pw)
      return "kernel extent (" + std::to_string(spanH) + ", " + std::to_string(spanW) +
             ") is larger than the padded input (" + std::to_string(h + 2 * ph) + ", " +
             std::to_string(w + 2 * pw) + ")";
    return "";
  }
};

} // namespace tcc

#endif // TCC_DIALECTS_COMMON_WINDOW2D_H
