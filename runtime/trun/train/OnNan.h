// What training does with a step whose loss or grad norm is not finite
// (trun --on-nan): stop with an error, or undo the step and go on.
#ifndef TCC_RUNTIME_TRUN_TRAIN_ONNAN_H
#define TCC_RUNTIME_TRUN_TRAIN_ONNAN_H

namespace tcc::trun {

enum class OnNan { kStop, kSkip };

} // namespace tcc::trun

#endif // TCC_RUNTIME_TRUN_TRAIN_ONNAN_H
