// tcc-opt: mlir-opt with tcc's dialects and passes, for lit tests and for
// replaying one pass on a dumped file.
#include "compiler/pipeline/Pipeline.h"
#include "dialects/kern/KernDialect.h"
#include "dialects/tg/TgDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<tcc::tg::TgDialect, tcc::kern::KernDialect,
                  mlir::func::FuncDialect>();
  tcc::registerAllTccPasses();
  mlir::registerCSEPass();
  mlir::registerCanonicalizerPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tcc optimizer driver\n", registry));
}
