// Small helpers for writing model protos from C++: parameters with their
// initializers, inputs, nodes. Builders for concrete models (mlp.cpp, ...)
// use these so a model reads like its diagram.
#ifndef TCC_MODELS_MODELBUILDER_H
#define TCC_MODELS_MODELBUILDER_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tcc_model.pb.h" // generated from frontend/proto/tcc_model.proto

namespace tcc::models {

class ModelBuilder {
public:
  explicit ModelBuilder(const std::string &name);

  // Adds a parameter; returns its name. Seeds count up from 1 in creation
  // order, so adding a layer does not change the seeds of earlier ones.
  std::string param(const std::string &name, std::vector<int64_t> shape,
                    model::Initializer::Kind init, double scale = 0.0,
                    bool frozen = false);
  std::string input(const std::string &name, model::DType dtype,
                    std::vector<int64_t> shape);
  // Adds a node with one output named `out`; returns `out`.
  std::string node(const std::string &op, const std::string &out,
                   std::vector<std::string> inputs,
                   std::map<std::string, model::Attribute> attrs = {});
  // Adds a node with several outputs (e.g. split); returns `outputs`.
  std::vector<std::string> nodeOutputs(const std::string &op,
                                       const std::string &name,
                                       std::vector<std::string> inputs,
                                       std::vector<std::string> outputs,
                                       std::map<std::string, model::Attribute> attrs = {});
  void output(const std::string &name, const std::string &value);

  // The training recipe (Training in frontend/proto/tcc_model.proto).
  // Optimizers set the loss too; the others may be called in any order.
  void sgd(const std::string &loss, double learningRate, double momentum = 0.0,
           double weightDecay = 0.0);
  struct AdamW {
    double learningRate = 1e-3;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    double weightDecay = 0.0;
  };
  void adamw(const std::string &loss, const AdamW &options);
  // Linear warmup to the optimizer's learning rate, cosine decay to `minLr`
  // at `decaySteps` (the formula of runtime/include/tcc/step_abi.h).
  void warmupCosine(int64_t warmupSteps, int64_t decaySteps, double minLr);
  void gradClip(double maxNorm); // 0: off
  void microBatches(int32_t k);
  // Exempts an existing parameter from weight decay (biases, norms, ...).
  void noWeightDecay(const std::string &param);
  // Records how PyTorch holds an existing parameter: torch = tcc.permute(perm)
  // (Parameter.torch; nn.Linear's (out, in) weight of an (in, out) one: {1, 0}),
  // so trun --save-weights / --init-from speak its state_dict layout.
  void torchPerm(const std::string &param, const std::vector<int64_t> &perm);

  static model::Attribute boolAttr(bool v);

  const model::Model &model() const { return model_; }

private:
  model::Model model_;
  uint64_t nextSeed_ = 1;
};

struct MlpOptions {
  int64_t batch = 64;
  int64_t inputs = 784;            // features per sample (28 x 28 images)
  std::vector<int64_t> hidden = {256}; // widths of the hidden layers
  int64_t classes = 10;
  double learningRate = 0.1;
};

// x (B, inputs) -> [linear -> relu] per hidden width -> linear -> logits
// (B, classes); loss = mean softmax cross-entropy against labels (B).
// Weights: normal with std sqrt(2 / fan_in) (He init, for relu); biases 0.
// Each layer is an nn.Linear: weights (in, out) with torch perm {1, 0}, as
// python/tcc/models.py's mlp() writes it (tests/python keeps them equal).
model::Model buildMlp(const MlpOptions &options);

} // namespace tcc::models

#endif
