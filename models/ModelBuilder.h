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
  void output(const std::string &name, const std::string &value);
  void sgd(const std::string &loss, double learningRate);

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
model::Model buildMlp(const MlpOptions &options);

} // namespace tcc::models

#endif
