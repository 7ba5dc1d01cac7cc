#include "compiler/codegen/common/StepInterface.h"

#include "compiler/codegen/common/CTypes.h"
#include "dialects/kern/KernDialect.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>

namespace tcc::codegen {

FailureOr<SmallVector<ArgumentRole>> classifyArguments(func::FuncOp f,
                                                       StringRef generator) {
  SmallVector<ArgumentRole> roles;
  int counts[ArgumentRole::Buffer + 1] = {};
  auto add = [&](ArgumentRole::Kind kind, std::string label) -> ArgumentRole & {
    roles.push_back(ArgumentRole{kind, counts[kind]++, std::move(label), "", std::nullopt});
    return roles.back();
  };
  // Optimizer state names its parameter by index, which may come later in
  // the signature: labelled once all parameters are known.
  SmallVector<std::pair<size_t, DictionaryAttr>> states;
  SmallVector<std::string> paramNames;
  for (BlockArgument a : f.getArguments()) {
    unsigned i = a.getArgNumber();
    if (auto info = model::ParamInfo::fromAttr(f.getArgAttr(i, model::kParamAttr))) {
      add(ArgumentRole::Param, info->name).param = info;
      paramNames.push_back(info->name);
    } else if (auto in = f.getArgAttrOfType<StringAttr>(i, model::kInputAttr)) {
      add(ArgumentRole::Input, in.getValue().str());
    } else if (auto buffer = model::ParamInfo::fromAttr(f.getArgAttr(i, model::kBufferAttr))) {
      add(ArgumentRole::Buffer, buffer->name).param = buffer;
    } else if (Attribute s = f.getArgAttr(i, model::kOptStateAttr)) {
      states.push_back({roles.size(), dyn_cast<DictionaryAttr>(s)});
      add(ArgumentRole::OptimizerState, "");
      if (!states.back().second)
        return f.emitError(generator) << ": malformed " << model::kOptStateAttr << " " << s;
    } else if (auto h = f.getArgAttrOfType<StringAttr>(i, model::kHyperAttr)) {
      std::string value;
      if (h.getValue() == model::kLearningRateHyper)
        value = "args->learning_rate";
      else if (h.getValue() == model::kStepHyper)
        value = "args->step";
      else if (h.getValue() == model::kRngSeedHyper)
        value = "args->rng_seed";
      else
        return f.emitError(generator) << ": unknown hyper-parameter " << h;
      MemRefType t = mrt(a);
      if (t.getNumElements() != 1 || bufferBytes(t) > 8)
        return f.emitError(generator) << ": hyper-parameter " << h << " must be a scalar";
      add(ArgumentRole::Hyper, h.getValue().str()).hyperValue = value;
    } else if (Attribute loss = f.getArgAttr(i, model::kLossAttr)) {
      auto lossName = dyn_cast<StringAttr>(loss);
      add(ArgumentRole::Loss, lossName ? lossName.str() : "loss");
    } else if (auto o = f.getArgAttrOfType<StringAttr>(i, model::kOutputAttr)) {
      add(ArgumentRole::Output, o.getValue().str());
    } else if (auto o = f.getArgAttrOfType<StringAttr>(i, model::kTrainOutputAttr)) {
      add(ArgumentRole::TrainOutput, o.getValue().str());
    } else if (auto st = f.getArgAttrOfType<StringAttr>(i, model::kEntryStateAttr)) {
      add(ArgumentRole::EntryState, st.getValue().str());
    } else if (f.getArgAttr(i, model::kGradOfAttr)) {
      return f.emitError(generator)
             << ": @" << f.getName()
             << " returns gradients; run an optimizer pass (tg-sgd-update) first";
    } else {
      return f.emitError(generator) << ": argument " << i << " has no role";
    }
  }
  for (auto [role, s] : states) {
    auto param = s.getAs<IntegerAttr>("param");
    auto stateName = s.getAs<StringAttr>("name");
    if (!param && stateName) {
      // State of the whole step (the loss scale): named by itself, starting
      // at its init_value (the descriptor's "constant" initializer).
      auto init = s.getAs<FloatAttr>("init_value");
      if (!init)
        return f.emitError(generator) << ": malformed " << model::kOptStateAttr << " " << s;
      model::ParamInfo start;
      start.name = stateName.str();
      start.scale = init.getValueAsDouble();
      start.init = start.scale == 0 ? "zeros" : "constant";
      start.trainable = false;
      roles[role].label = stateName.str();
      roles[role].param = start;
      continue;
    }
    if (!param || !stateName || param.getInt() < 0 ||
        param.getInt() >= static_cast<int64_t>(paramNames.size()))
      return f.emitError(generator) << ": malformed " << model::kOptStateAttr << " " << s;
    roles[role].label = paramNames[param.getInt()] + "." + stateName.str();
  }
  return roles;
}

namespace {

void emitTensorTable(llvm::raw_ostream &os, StringRef table, ArrayRef<TableEntry> tensors) {
  if (tensors.empty())
    return;
  for (auto [i, t] : llvm::enumerate(tensors)) {
    if (t.type.getRank() == 0)
      continue;
    os << "static const int64_t " << table << "_shape" << i << "[] = {";
    for (auto [j, d] : llvm::enumerate(t.type.getShape()))
      os << (j ? ", " : "") << d;
    os << "};\n";
  }
  os << "static const tcc_tensor_desc " << table << "[] = {\n";
  for (auto [i, t] : llvm::enumerate(tensors)) {
    MemRefType type = t.type;
    std::string kind = "TCC_INIT_ZEROS", scale = "0.0", seed = "0", trainable = "0";
    if (t.param) {
      const model::ParamInfo &p = *t.param;
      kind = "TCC_INIT_" + StringRef(p.init).upper();
      // A constant (the loss scale) is the value itself: exact, so that a
      // power-of-two scale stays one.
      scale = p.init == "constant" ? llvm::formatv("{0:e16}", p.scale).str()
                                   : llvm::formatv("{0:e}", p.scale).str();
      seed = std::to_string(p.seed) + "ull";
      trainable = p.trainable ? "1" : "0";
    }
    std::string shape = type.getRank() == 0
                            ? std::string("nullptr")
                            : (table + "_shape" + std::to_string(i)).str();
    // name, dtype, rank, shape, num_elements, size_bytes, init_kind,
    // trainable, init_scale, init_seed
    os << llvm::formatv("  {{\"{0}\", {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}},\n",
                        t.name, abiDType(type.getElementType()), type.getRank(),
                        shape, type.getNumElements(), bufferBytes(type), kind,
                        trainable, scale, seed);
  }
  os << "};\n";
}

// The descriptor's lr_schedule initializer from the module's tg.lr_schedule.
FailureOr<std::string> lrSchedule(ModuleOp module, double baseLr, StringRef who) {
  std::string base = llvm::formatv("{0:e}", baseLr).str();
  auto dict = module->getAttrOfType<DictionaryAttr>(model::kLrScheduleAttr);
  auto kind = dict ? dict.getAs<StringAttr>("kind") : StringAttr();
  if (!dict || (kind && kind.getValue() == "constant"))
    return "{TCC_LR_CONSTANT, " + base + ", 0, 0, " + base + "}";
  if (kind && kind.getValue() == "warmup_cosine") {
    auto warmup = dict.getAs<IntegerAttr>("warmup_steps");
    auto decay = dict.getAs<IntegerAttr>("decay_steps");
    auto minLr = dict.getAs<FloatAttr>("min_lr");
    if (warmup && decay && minLr)
      return llvm::formatv("{TCC_LR_WARMUP_COSINE, {0}, {1}, {2}, {3:e}}", base,
                           warmup.getInt(), decay.getInt(),
                           minLr.getValueAsDouble())
          .str();
  }
  return module.emitError(who) << ": cannot read " << model::kLrScheduleAttr << " = " << dict;
}

// A kern-plan-memory bytes-by-type attribute ([[type, bytes], ...]) of f
// as ABI dtypes; a missing attribute is an empty list.
FailureOr<SmallVector<DtypeBytes>> dtypeBytes(func::FuncOp f, StringRef name,
                                              StringRef who) {
  SmallVector<DtypeBytes> out;
  auto list = f->getAttrOfType<ArrayAttr>(name);
  if (!list)
    return out;
  for (Attribute entry : list) {
    auto pair = dyn_cast<ArrayAttr>(entry);
    auto type = pair && pair.size() == 2 ? dyn_cast<TypeAttr>(pair[0]) : nullptr;
    auto bytes = pair && pair.size() == 2 ? dyn_cast<IntegerAttr>(pair[1]) : nullptr;
    if (!type || !bytes)
      return f.emitError(who) << ": cannot read " << name << " entry " << entry;
    std::string abi = abiDType(type.getValue());
    if (abi == "TCC_DTYPE_INVALID")
      return f.emitError(who) << ": " << name << " has element type "
                              << type.getValue() << ", which the step ABI has no dtype for";
    auto same = llvm::find_if(out, [&](const DtypeBytes &d) { return d.abiDtype == abi; });
    if (same != out.end())
      same->bytes += bytes.getInt();
    else
      out.push_back({abi, bytes.getInt()});
  }
  return out;
}

// A static tcc_dtype_bytes array, or nothing for an empty list.
void emitDtypeBytes(llvm::raw_ostream &s, StringRef name, ArrayRef<DtypeBytes> list) {
  if (list.empty())
    return;
  s << "static const tcc_dtype_bytes " << name << "[] = {\n";
  for (const DtypeBytes &d : list)
    s << "  {" << d.abiDtype << ", " << d.bytes << "},\n";
  s << "};\n";
}

// `text` as a C string literal (quotes included); bytes other than
// printable ASCII as 3-digit octal escapes, which never run into the next
// character.
std::string cString(StringRef text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char octal[8];
      std::snprintf(octal, sizeof(octal), "\\%03o", static_cast<unsigned>(c));
      out += octal;
    }
  }
  return out + "\"";
}

// The descriptor's param_torch table (tcc_torch_tensor per parameter), or
// nothing when no parameter has a Parameter.torch: returns whether it wrote
// one. Parameters without one keep their name and layout.
bool emitTorchTable(llvm::raw_ostream &os, ArrayRef<TableEntry> params,
                    StringRef table = "tcc_param_torch") {
  if (llvm::none_of(params, [](const TableEntry &t) { return t.param && t.param->hasTorch(); }))
    return false;
  SmallVector<std::string> entries;
  for (auto [i, t] : llvm::enumerate(params)) {
    std::string perm = "nullptr", aliases = "nullptr", name = cString(t.name);
    size_t numAliases = 0;
    if (t.param && t.param->hasTorch()) {
      const model::ParamInfo &p = *t.param;
      name = cString(p.torchKey());
      bool identity = true;
      for (auto [d, v] : llvm::enumerate(p.torchPerm))
        identity = identity && v == static_cast<int64_t>(d);
      if (!identity) {
        perm = table.str() + "_perm" + std::to_string(i);
        os << "static const int32_t " << perm << "[] = {";
        for (auto [d, v] : llvm::enumerate(p.torchPerm))
          os << (d ? ", " : "") << v;
        os << "};\n";
      }
      if (!p.torchAliases.empty()) {
        aliases = table.str() + "_aliases" + std::to_string(i);
        numAliases = p.torchAliases.size();
        os << "static const char *const " << aliases << "[] = {";
        for (auto [d, a] : llvm::enumerate(p.torchAliases))
          os << (d ? ", " : "") << cString(a);
        os << "};\n";
      }
    }
    // name, perm, num_aliases, aliases
    entries.push_back(llvm::formatv("  {{{0}, {1}, {2}, {3}},\n", name, perm, numAliases,
                                    aliases));
  }
  os << "static const tcc_torch_tensor " << table << "[] = {\n";
  for (const std::string &e : entries)
    os << e;
  os << "};\n";
  return true;
}

} // namespace

int64_t outputScratchBase(func::FuncOp f, int64_t modulePlanned, int64_t alignment) {
  int64_t planned = modulePlanned;
  if (auto own = f->getAttrOfType<IntegerAttr>("kern.workspace_bytes"))
    planned = own.getInt();
  return (planned + alignment - 1) / alignment * alignment;
}

FailureOr<StepInterface> collectStepInterface(ModuleOp module, StringRef who) {
  StepInterface r;
  auto train = module.lookupSymbol<func::FuncOp>(model::kTrainStepFunc);
  auto eval = module.lookupSymbol<func::FuncOp>(model::kForwardFunc);
  if (!train || !eval)
    return module.emitError(who.str() + ": needs @train_step and @forward");
  auto wsAttr = module->getAttrOfType<IntegerAttr>("kern.workspace_bytes");
  if (!wsAttr)
    return module.emitError(who.str() + ": run kern-plan-memory first");
  auto modelName = module->getAttrOfType<StringAttr>(model::kModelNameAttr);
  auto optimizer = module->getAttrOfType<DictionaryAttr>(model::kOptimizerAttr);
  double defaultLr = 0;
  std::string optimizerKind = "none";
  if (optimizer) {
    if (auto lr = optimizer.getAs<FloatAttr>("learning_rate"))
      defaultLr = lr.getValueAsDouble();
    if (auto k = optimizer.getAs<StringAttr>("kind"))
      optimizerKind = k.str();
  }
  FailureOr<std::string> schedule = lrSchedule(module, defaultLr, who);
  if (failed(schedule))
    return failure();
  int64_t microBatches = 1;
  if (auto k = module->getAttrOfType<IntegerAttr>(model::kMicroBatchesAttr))
    microBatches = k.getInt();

  // Descriptor tables: parameters, inputs and outputs from @forward's
  // signature (same parameter and input order as @train_step); optimizer
  // state and train outputs from @train_step's.
  FailureOr<SmallVector<ArgumentRole>> trainRoles = classifyArguments(train, who);
  if (failed(trainRoles))
    return failure();
  FailureOr<SmallVector<ArgumentRole>> evalRoles = classifyArguments(eval, who);
  if (failed(evalRoles))
    return failure();
  SmallVector<TableEntry> params, inputs, outputs, states, trainOutputs;
  SmallVector<int32_t> labelInputs; // inputs with tg.labels
  std::string lossName = "loss", precision = "f32";
  // tg-amp's policy (bf16, fp16, tf32, fp32); modules compiled without it
  // (tcc-opt pipelines, tests) report the parameters' type.
  if (auto policy = module->getAttrOfType<StringAttr>(model::kPrecisionAttr))
    precision = policy.getValue().str();
  for (auto [a, role] : llvm::zip_equal(eval.getArguments(), *evalRoles)) {
    if (role.kind == ArgumentRole::Param) {
      params.push_back({role.label, mrt(a), role.param});
      // ZeRO-3: the whole parameter behind this rank's shard.
      MemRefType whole = mrt(a);
      if (auto shard = eval.getArgAttrOfType<DictionaryAttr>(a.getArgNumber(),
                                                             model::kParamShardAttr)) {
        auto shape = shard.getAs<DenseI64ArrayAttr>("shape");
        auto ranks = shard.getAs<IntegerAttr>("ranks");
        if (!shape || !ranks)
          return eval.emitError(who) << ": " << model::kParamShardAttr << " of " << role.label
                                     << " needs ranks and shape";
        whole = MemRefType::get(shape.asArrayRef(), whole.getElementType());
        r.shardParameterRanks = ranks.getInt();
      }
      r.wholeParams.push_back({role.label, whole, role.param});
      if (mrt(a).getElementType().isF64())
        precision = "f64";
    } else if (role.kind == ArgumentRole::Input) {
      inputs.push_back({role.label, mrt(a), std::nullopt});
      if (eval.getArgAttr(a.getArgNumber(), model::kLabelsAttr))
        labelInputs.push_back(static_cast<int32_t>(inputs.size()) - 1);
    } else if (role.kind == ArgumentRole::Buffer) {
      r.buffers.push_back({role.label, mrt(a), role.param});
    } else if (role.kind == ArgumentRole::Output) {
      outputs.push_back({role.label, mrt(a), std::nullopt});
    } else if (role.kind == ArgumentRole::Loss) {
      lossName = role.label;
    }
  }
  // Two losses over different labels leave no one input to measure
  // accuracy against: none is named.
  if (labelInputs.size() == 1)
    r.labelInput = labelInputs.front();
  if (auto ranks = module->getAttrOfType<IntegerAttr>(model::kShardOptimizerAttr))
    r.shardRanks = ranks.getInt();
  for (auto [a, role] : llvm::zip_equal(train.getArguments(), *trainRoles)) {
    if (role.kind == ArgumentRole::OptimizerState) {
      states.push_back({role.label, mrt(a), role.param}); // initializer if not zeros
      auto state = train.getArgAttrOfType<DictionaryAttr>(a.getArgNumber(), model::kOptStateAttr);
      auto param = state ? state.getAs<IntegerAttr>("param") : nullptr;
      bool sharded = state && state.get(model::kShardRanksField);
      r.stateShardOf.push_back(sharded && param ? static_cast<int32_t>(param.getInt()) : -1);
      if (sharded && r.shardRanks == 0)
        return train.emitError(who) << ": sharded optimizer state without "
                                    << model::kShardOptimizerAttr << " on the module";
    }
    else if (role.kind == ArgumentRole::TrainOutput)
      trainOutputs.push_back({role.label, mrt(a), std::nullopt});
  }

  FailureOr<SmallVector<DtypeBytes>> planned =
      dtypeBytes(train, "kern.planned_bytes_by_dtype", who);
  FailureOr<SmallVector<DtypeBytes>> peak =
      dtypeBytes(train, "kern.peak_bytes_by_dtype", who);
  FailureOr<SmallVector<DtypeBytes>> gradients =
      dtypeBytes(train, model::kGradientBytesAttr, who);
  if (failed(planned) || failed(peak) || failed(gradients))
    return failure();
  r.trainGradientBytes = std::move(*gradients);
  train.walk([&](tcc::kern::ConstantOp c) {
    MemRefType t = c.getType();
    r.trainConstantBytes += t.getNumElements() * tcc::kern::elementBytes(t.getElementType());
  });
  train.walk([&](Operation *op) {
    if (isa<tcc::kern::AllReduceOp, tcc::kern::AllReduceBucketOp, tcc::kern::ReduceScatterOp,
            tcc::kern::AllGatherOp>(op))
      r.dataParallel = true;
  });
  r.trainPlannedBytes = std::move(*planned);
  r.trainPeakBytes = std::move(*peak);

  r.train = train;
  r.eval = eval;
  r.plannedWorkspace = wsAttr.getInt();
  if (modelName)
    r.modelName = modelName.getValue().str();
  r.optimizerKind = optimizerKind;
  r.defaultLr = defaultLr;
  r.schedule = *schedule;
  r.microBatches = microBatches;
  r.lossName = lossName;
  r.precision = precision;
  r.params = std::move(params);
  r.inputs = std::move(inputs);
  r.outputs = std::move(outputs);
  r.states = std::move(states);
  r.trainOutputs = std::move(trainOutputs);

  // Further entry points: functions marked tcc.entry, in module order.
  for (func::FuncOp f : module.getOps<func::FuncOp>()) {
    auto name = f->getAttrOfType<StringAttr>(model::kEntryAttr);
    if (!name)
      continue;
    StringRef n = name.getValue();
    bool identifier = !n.empty() && !llvm::isDigit(n.front()) &&
                      llvm::all_of(n, [](char c) { return llvm::isAlnum(c) || c == '_'; });
    if (!identifier || n == "train" || n == "eval")
      return f.emitError(who) << ": entry name '" << n
                              << "' must be a C identifier other than train and eval";
    if (llvm::any_of(r.entries, [&](const EntryInterface &e) { return e.name == n; }))
      return f.emitError(who) << ": two functions are entry '" << n << "'";
    FailureOr<SmallVector<ArgumentRole>> roles = classifyArguments(f, who);
    if (failed(roles) || failed(remapToDescriptor(f, r, *roles, who)))
      return failure();
    EntryInterface e;
    e.name = n.str();
    e.f = f;
    e.trainLike = n.starts_with("train");
    for (auto [a, role] : llvm::zip_equal(f.getArguments(), *roles)) {
      if (role.kind == ArgumentRole::Input)
        e.inputs.push_back({role.label, mrt(a), std::nullopt});
      else if (role.kind == ArgumentRole::Output)
        e.outputs.push_back({role.label, mrt(a), std::nullopt});
      else if (role.kind == ArgumentRole::EntryState)
        e.state.push_back({role.label, mrt(a), std::nullopt});
      else if (!e.trainLike &&
               (role.kind == ArgumentRole::OptimizerState || role.kind == ArgumentRole::TrainOutput))
        return f.emitError(who) << ": entry '" << n << "' has " << role.label
                                << ", which only entries named train... may update";
    }
    r.entries.push_back(std::move(e));
  }
  return r;
}

LogicalResult remapToDescriptor(func::FuncOp f, const StepInterface &iface,
                                SmallVectorImpl<ArgumentRole> &roles, StringRef who) {
  for (auto [a, role] : llvm::zip_equal(f.getArguments(), roles)) {
    const SmallVector<TableEntry> *table =
        role.kind == ArgumentRole::Param            ? &iface.params
        : role.kind == ArgumentRole::OptimizerState ? &iface.states
        : role.kind == ArgumentRole::TrainOutput    ? &iface.trainOutputs
                                                    : nullptr;
    if (!table)
      continue;
    auto it = llvm::find_if(*table, [&](const TableEntry &t) { return t.name == role.label; });
    if (it == table->end() || it->type != mrt(a))
      return f.emitError(who) << ": @" << f.getName() << " takes " << role.label << " ("
                              << mrt(a) << "), which the step's train / eval tables "
                              << (it == table->end() ? "do not have" : "hold with another type");
    role.index = static_cast<int>(it - table->begin());
  }
  return success();
}

void emitDescriptor(llvm::raw_ostream &s, const StepInterface &iface, StringRef target,
                    StringRef archLines, int64_t workspaceBytes, double trainFlops,
                    double evalFlops, StringRef deviceApi, ArrayRef<double> entryFlops) {
  const auto &params = iface.params, &states = iface.states,
             &inputs = iface.inputs, &outputs = iface.outputs,
             &trainOutputs = iface.trainOutputs;
  emitTensorTable(s, "tcc_params", params);
  emitTensorTable(s, "tcc_optimizer_state", states);
  emitTensorTable(s, "tcc_inputs", inputs);
  emitTensorTable(s, "tcc_outputs", outputs);
  emitTensorTable(s, "tcc_train_outputs", trainOutputs);
  emitDtypeBytes(s, "tcc_train_planned_bytes", iface.trainPlannedBytes);
  emitDtypeBytes(s, "tcc_train_peak_bytes", iface.trainPeakBytes);
  emitDtypeBytes(s, "tcc_train_gradient_bytes", iface.trainGradientBytes);
  bool sharded = iface.shardRanks > 0 && !iface.stateShardOf.empty();
  if (sharded) {
    s << "static const int32_t tcc_optimizer_state_shard_of[] = {";
    for (auto [i, p] : llvm::enumerate(iface.stateShardOf))
      s << (i ? ", " : "") << p;
    s << "};\n";
  }
  bool shardedParams = iface.shardParameterRanks > 0;
  if (shardedParams)
    emitTensorTable(s, "tcc_whole_params", iface.wholeParams);
  bool torch = emitTorchTable(s, params);
  emitTensorTable(s, "tcc_buffers", iface.buffers);
  bool bufferTorch = emitTorchTable(s, iface.buffers, "tcc_buffer_torch");
  // Further entries: their own tensor tables, then the tcc_step_entry list.
  for (const EntryInterface &e : iface.entries) {
    // (Not tcc_entry_<name>_state: the cuda host's EntryState is called so.)
    emitTensorTable(s, "tcc_entry_" + e.name + "_input_table", e.inputs);
    emitTensorTable(s, "tcc_entry_" + e.name + "_output_table", e.outputs);
    emitTensorTable(s, "tcc_entry_" + e.name + "_state_table", e.state);
  }
  if (!iface.entries.empty()) {
    s << "static const tcc_step_entry tcc_entries[] = {\n";
    for (auto [k, e] : llvm::enumerate(iface.entries)) {
      auto list = [&](const SmallVector<TableEntry> &t, StringRef what) {
        return std::to_string(t.size()) + ", " +
               (t.empty() ? std::string("nullptr")
                          : "tcc_entry_" + e.name + "_" + what.str() + "_table");
      };
      // name, fn, inputs, outputs, state, flops_per_call
      s << "  {\"" << e.name << "\", " << e.cName() << ", " << list(e.inputs, "input") << ", "
        << list(e.outputs, "output") << ", " << list(e.state, "state") << ", "
        << llvm::formatv("{0:e}", k < entryFlops.size() ? entryFlops[k] : 0.0) << "},\n";
    }
    s << "};\n";
  }
  auto table = [](const auto &t, StringRef name) {
    return std::to_string(t.size()) + ", " +
           (t.empty() ? std::string("nullptr") : name.str());
  };
  s << "\nstatic const tcc_step_descriptor tcc_descriptor = {\n"
    << "  TCC_STEP_ABI_VERSION, sizeof(tcc_step_descriptor),\n"
    << "  \"" << iface.modelName << "\", \"" << target << "\",\n"
    << archLines
    << "  \"" << iface.precision << "\", \"" << iface.optimizerKind << "\", \"" << iface.lossName
    << "\", " << llvm::formatv("{0:e}", iface.defaultLr) << ",\n"
    << "  " << iface.schedule << ", // lr schedule\n"
    << "  " << iface.microBatches << ", // micro-batches per step\n"
    << "  " << table(params, "tcc_params") << ", // params\n"
    << "  " << table(states, "tcc_optimizer_state") << ", // optimizer state\n"
    << "  " << table(inputs, "tcc_inputs") << ",\n"
    << "  " << table(outputs, "tcc_outputs") << ",\n"
    << "  " << table(trainOutputs, "tcc_train_outputs") << ", // train outputs\n"
    << "  " << workspaceBytes << ", // workspace bytes\n"
    << "  " << llvm::formatv("{0:e}, {1:e}", trainFlops, evalFlops)
    << ", // FLOPs per train / eval call\n"
    << "  tcc_train, tcc_eval,\n"
    << "  " << deviceApi << ", // device API\n"
    << "  " << table(iface.trainPlannedBytes, "tcc_train_planned_bytes")
    << ", // train temporaries by dtype\n"
    << "  " << table(iface.trainPeakBytes, "tcc_train_peak_bytes")
    << ", // train temporaries live at the memory peak\n"
    << "  " << iface.trainConstantBytes << ", // train constant-table bytes\n"
    << "  " << (iface.dataParallel ? 1 : 0) << ", // data parallel (kern.all_reduce)\n"
    << "  " << iface.shardRanks << ", " << (sharded ? "tcc_optimizer_state_shard_of" : "nullptr")
    << ", // ZeRO-1: ranks, each optimizer state's parameter (-1: whole)\n"
    << "  " << (torch ? "tcc_param_torch" : "nullptr")
    << ", // PyTorch state_dict keys and layouts of the params\n"
    << "  " << table(iface.buffers, "tcc_buffers") << ", "
    << (bufferTorch ? "tcc_buffer_torch" : "nullptr")
    << ", // buffers (batch norm's running statistics), their state_dict keys\n"
    << "  " << table(iface.entries, "tcc_entries") << ", // further entries\n"
    << "  " << table(iface.trainGradientBytes, "tcc_train_gradient_bytes")
    << ", // gradients of the trainable params by dtype\n"
    << "  " << iface.shardParameterRanks << ", "
    << (shardedParams ? "tcc_whole_params" : "nullptr")
    << ", // ZeRO-3: ranks, the whole params (params holds this rank's shards)\n"
    << "  " << (iface.labelInput >= 0 ? cString(iface.inputs[iface.labelInput].name) : "nullptr")
    << ", // the input the loss reads as class labels\n"
    << "};\n\n"
    << "extern \"C\" __attribute__((visibility(\"default\"))) const tcc_step_descriptor *\n"
    << "tcc_step_get_descriptor(void) { return &tcc_descriptor; }\n";
}

} // namespace tcc::codegen
