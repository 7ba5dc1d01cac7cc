#include "models/ModelBuilder.h"

#include <cmath>

namespace tcc::models {

ModelBuilder::ModelBuilder(const std::string &name) {
  model_.set_schema_version(1);
  model_.set_name(name);
}

std::string ModelBuilder::param(const std::string &name,
                                std::vector<int64_t> shape,
                                model::Initializer::Kind init, double scale,
                                bool frozen) {
  model::Parameter *p = model_.add_params();
  p->set_name(name);
  p->set_dtype(model::F32);
  for (int64_t d : shape)
    p->mutable_shape()->add_dims(d);
  p->mutable_init()->set_kind(init);
  p->mutable_init()->set_scale(scale);
  p->mutable_init()->set_seed(nextSeed_++);
  p->set_frozen(frozen);
  return name;
}

std::string ModelBuilder::input(const std::string &name, model::DType dtype,
                                std::vector<int64_t> shape) {
  model::Input *in = model_.add_inputs();
  in->set_name(name);
  in->set_dtype(dtype);
  for (int64_t d : shape)
    in->mutable_shape()->add_dims(d);
  return name;
}

std::string ModelBuilder::node(const std::string &op, const std::string &out,
                               std::vector<std::string> inputs,
                               std::map<std::string, model::Attribute> attrs) {
  model::Node *n = model_.add_nodes();
  n->set_name(out);
  n->set_op(op);
  for (const std::string &in : inputs)
    n->add_inputs(in);
  n->add_outputs(out);
  for (auto &[k, v] : attrs)
    (*n->mutable_attrs())[k] = v;
  return out;
}

std::vector<std::string>
ModelBuilder::nodeOutputs(const std::string &op, const std::string &name,
                          std::vector<std::string> inputs,
                          std::vector<std::string> outputs,
                          std::map<std::string, model::Attribute> attrs) {
  model::Node *n = model_.add_nodes();
  n->set_name(name);
  n->set_op(op);
  for (const std::string &in : inputs)
    n->add_inputs(in);
  for (const std::string &out : outputs)
    n->add_outputs(out);
  for (auto &[k, v] : attrs)
    (*n->mutable_attrs())[k] = v;
  return outputs;
}

void ModelBuilder::output(const std::string &name, const std::string &value) {
  model::Output *o = model_.add_outputs();
  o->set_name(name);
  o->set_value(value);
}

void ModelBuilder::sgd(const std::string &loss, double learningRate,
                       double momentum, double weightDecay) {
  model_.mutable_training()->set_loss(loss);
  model::Optimizer::Sgd *sgd =
      model_.mutable_training()->mutable_optimizer()->mutable_sgd();
  sgd->set_learning_rate(learningRate);
  sgd->set_momentum(momentum);
  sgd->set_weight_decay(weightDecay);
}

void ModelBuilder::adamw(const std::string &loss, const AdamW &options) {
  model_.mutable_training()->set_loss(loss);
  model::Optimizer::AdamW *adam =
      model_.mutable_training()->mutable_optimizer()->mutable_adamw();
  adam->set_learning_rate(options.learningRate);
  adam->set_beta1(options.beta1);
  adam->set_beta2(options.beta2);
  adam->set_eps(options.eps);
  adam->set_weight_decay(options.weightDecay);
}

void ModelBuilder::warmupCosine(int64_t warmupSteps, int64_t decaySteps,
                                double minLr) {
  model::LrSchedule::WarmupCosine *wc =
      model_.mutable_training()->mutable_lr_schedule()->mutable_warmup_cosine();
  wc->set_warmup_steps(warmupSteps);
  wc->set_decay_steps(decaySteps);
  wc->set_min_lr(minLr);
}

void ModelBuilder::gradClip(double maxNorm) {
  model_.mutable_training()->set_grad_clip(maxNorm);
}

void ModelBuilder::microBatches(int32_t k) {
  model_.mutable_training()->set_micro_batches(k);
}

void ModelBuilder::noWeightDecay(const std::string &param) {
  for (model::Parameter &p : *model_.mutable_params())
    if (p.name() == param)
      p.set_no_weight_decay(true);
}

void ModelBuilder::torchPerm(const std::string &param,
                             const std::vector<int64_t> &perm) {
  for (model::Parameter &p : *model_.mutable_params())
    if (p.name() == param)
      for (int64_t d : perm)
        p.mutable_torch()->add_perm(d);
}

model::Attribute ModelBuilder::boolAttr(bool v) {
  model::Attribute a;
  a.set_b(v);
  return a;
}

model::Model buildMlp(const MlpOptions &o) {
  ModelBuilder b("mlp");
  std::string x = b.input("image", model::F32, {o.batch, o.inputs});
  std::string labels = b.input("label", model::I32, {o.batch});
  std::vector<int64_t> widths = o.hidden;
  widths.push_back(o.classes);
  int64_t fanIn = o.inputs;
  for (size_t i = 0; i < widths.size(); ++i) {
    std::string layer = "fc" + std::to_string(i + 1);
    bool last = i + 1 == widths.size();
    std::string w = b.param(layer + ".weight", {fanIn, widths[i]},
                            model::Initializer::NORMAL,
                            std::sqrt(2.0 / static_cast<double>(fanIn)));
    b.torchPerm(w, {1, 0}); // nn.Linear's (out, in) in PyTorch
    std::string bias = b.param(layer + ".bias", {widths[i]}, model::Initializer::ZEROS);
    x = b.node("matmul", layer, {x, w});                        // (B, width)
    x = b.node("add", last ? "logits" : layer + ".biased", {x, bias});
    if (!last)
      x = b.node("relu", layer + ".relu", {x});
    fanIn = widths[i];
  }
  std::string perSample = b.node("softmax_cross_entropy", "xent", {x, labels}); // (B)
  std::string loss = b.node("mean", "loss", {perSample});                      // ()
  b.output("logits", x);
  b.sgd(loss, o.learningRate);
  return b.model();
}

} // namespace tcc::models
