// What a group of op importers sees of one model node, and the group entry
// points. Importer.cpp owns the walk over the model; each op group
// (ImportElementwiseOps.cpp, ImportStructuralOps.cpp) turns the nodes of its
// ops into tg ops, with errors located at the node.
#ifndef TCC_FRONTEND_IMPORTER_NODEIMPORTER_H
#define TCC_FRONTEND_IMPORTER_NODEIMPORTER_H

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "tcc_model.pb.h" // generated from frontend/proto/tcc_model.proto

namespace tcc {

class NodeContext {
public:
  NodeContext(const model::Node &node, mlir::Location loc,
              llvm::ArrayRef<mlir::Value> operands, mlir::OpBuilder &builder)
      : node(node), loc(loc), operands(operands), b(builder) {}

  const model::Node &node;
  mlir::Location loc; // NameLoc of the node name
  llvm::ArrayRef<mlir::Value> operands;
  mlir::OpBuilder &b;
  // Model buffers the node updates in the training step (batch norm's
  // running statistics): (the buffer, its new value), returned by @forward
  // marked tg.updates_buffer. Set by the importer.
  llvm::SmallVectorImpl<std::pair<mlir::BlockArgument, mlir::Value>> *bufferUpdates = nullptr;
  // The value a name refers to (null if none): names in attributes.
  std::function<mlir::Value(llvm::StringRef)> lookupValue;

  llvm::StringRef op() const { return node.op(); }
  mlir::RankedTensorType type(int i) const {
    return llvm::cast<mlir::RankedTensorType>(operands[i].getType());
  }
  mlir::InFlightDiagnostic error() const { return mlir::emitError(loc); }

  // `inputs` inputs and `outputs` outputs, else an error naming both counts.
  mlir::LogicalResult arity(size_t inputs, size_t outputs = 1) const;
  // Every attribute key is one of `allowed`.
  mlir::LogicalResult attrs(llvm::ArrayRef<llvm::StringRef> allowed) const;
  mlir::LogicalResult requireFloat(int i) const;
  mlir::LogicalResult requireInteger(int i) const;

  // Attribute readers: the default when absent, an error when mistyped.
  mlir::FailureOr<bool> boolAttr(llvm::StringRef key, bool dflt) const;
  mlir::FailureOr<int64_t> intAttr(llvm::StringRef key, int64_t dflt) const;
  mlir::FailureOr<double> floatAttr(llvm::StringRef key, double dflt) const;
  mlir::FailureOr<std::string> stringAttr(llvm::StringRef key,
                                          llvm::StringRef dflt) const;
  // Absent -> empty list.
  mlir::FailureOr<llvm::SmallVector<int64_t>> intsAttr(llvm::StringRef key) const;
  bool hasAttr(llvm::StringRef key) const {
    return node.attrs().count(key.str()) != 0;
  }
};

// The values a node defines, in the order of node.outputs.
using NodeResults = mlir::FailureOr<llvm::SmallVector<mlir::Value, 1>>;

// Each returns std::nullopt when the node's op is not one of the group's.
std::optional<NodeResults> importElementwiseNode(NodeContext &node);
std::optional<NodeResults> importStructuralNode(NodeContext &node);
std::optional<NodeResults> importVisionNode(NodeContext &node);
// batch_norm (ImportBatchNorm.cpp).
NodeResults importBatchNorm(NodeContext &node);

// Op names each group knows, and all of them, for "unknown op" messages.
const char *elementwiseOpNames();
const char *structuralOpNames();
const char *visionOpNames();
std::string knownOpNames();

} // namespace tcc

#endif
