#include "frontend/importer/NodeImporter.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace tcc {

LogicalResult NodeContext::arity(size_t inputs, size_t outputs) const {
  if (operands.size() != inputs)
    return error() << "op " << op() << " takes " << inputs << " input"
                   << (inputs == 1 ? "" : "s") << ", got " << operands.size();
  if (static_cast<size_t>(node.outputs_size()) != outputs)
    return error() << "op " << op() << " has " << outputs << " output"
                   << (outputs == 1 ? "" : "s") << ", got "
                   << node.outputs_size();
  return success();
}

LogicalResult NodeContext::attrs(ArrayRef<StringRef> allowed) const {
  for (const auto &kv : node.attrs())
    if (!llvm::is_contained(allowed, StringRef(kv.first))) {
      std::string list;
      for (StringRef a : allowed)
        list += (list.empty() ? "" : ", ") + a.str();
      return error() << "unknown attribute '" << kv.first << "' (op " << op()
                     << " takes: " << (list.empty() ? "none" : list) << ")";
    }
  return success();
}

LogicalResult NodeContext::requireFloat(int i) const {
  if (!isa<FloatType>(type(i).getElementType()))
    return error() << "input '" << node.inputs(i)
                   << "' must be a float tensor, got " << type(i);
  return success();
}

LogicalResult NodeContext::requireInteger(int i) const {
  if (!isa<IntegerType>(type(i).getElementType()))
    return error() << "input '" << node.inputs(i)
                   << "' must be an integer tensor, got " << type(i);
  return success();
}

namespace {
// The attribute `key` if present with the right kind; failure (reported)
// if present with another kind; nullptr if absent.
FailureOr<const model::Attribute *>
lookup(const NodeContext &n, StringRef key, model::Attribute::ValueCase want,
       StringRef spelling) {
  auto it = n.node.attrs().find(key.str());
  if (it == n.node.attrs().end())
    return static_cast<const model::Attribute *>(nullptr);
  if (it->second.value_case() != want) {
    n.error() << "attribute '" << key << "' must be " << spelling;
    return failure();
  }
  return &it->second;
}
} // namespace

FailureOr<bool> NodeContext::boolAttr(StringRef key, bool dflt) const {
  auto a = lookup(*this, key, model::Attribute::kB, "a bool (b: true)");
  if (failed(a))
    return failure();
  return *a ? (*a)->b() : dflt;
}

FailureOr<int64_t> NodeContext::intAttr(StringRef key, int64_t dflt) const {
  auto a = lookup(*this, key, model::Attribute::kI, "an integer (i: 3)");
  if (failed(a))
    return failure();
  return *a ? (*a)->i() : dflt;
}

FailureOr<double> NodeContext::floatAttr(StringRef key, double dflt) const {
  auto a = lookup(*this, key, model::Attribute::kF, "a number (f: 0.5)");
  if (failed(a))
    return failure();
  return *a ? (*a)->f() : dflt;
}

FailureOr<std::string> NodeContext::stringAttr(StringRef key,
                                               StringRef dflt) const {
  auto a = lookup(*this, key, model::Attribute::kS, "a string (s: \"...\")");
  if (failed(a))
    return failure();
  return *a ? (*a)->s() : dflt.str();
}

FailureOr<SmallVector<int64_t>> NodeContext::intsAttr(StringRef key) const {
  auto a = lookup(*this, key, model::Attribute::kInts,
                  "a list of integers (ints { values: ... })");
  if (failed(a))
    return failure();
  if (!*a)
    return SmallVector<int64_t>();
  const auto &v = (*a)->ints().values();
  return SmallVector<int64_t>(v.begin(), v.end());
}

} // namespace tcc

namespace tcc {
std::string knownOpNames() {
  return std::string(elementwiseOpNames()) + ", " + structuralOpNames() + ", " +
         visionOpNames();
}
} // namespace tcc
