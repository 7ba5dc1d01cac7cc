// kern-plan-memory's plan checked as a property: on random programs (buffers
// of random sizes with random live ranges), no two buffers live at the same
// time share a byte, the arena holds the largest live set, and the checker
// itself (planOverlaps) finds an overlap planted by hand. Random seeds;
// TCC_MEMORY_PLAN_SEED replays one.
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dialects/kern/KernDialect.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"

namespace {

using namespace mlir;

std::unique_ptr<MLIRContext> makeContext() {
  auto ctx = std::make_unique<MLIRContext>();
  ctx->loadDialect<tcc::kern::KernDialect, func::FuncDialect, arith::ArithDialect>();
  return ctx;
}

uint64_t seed() {
  if (const char *fixed = std::getenv("TCC_MEMORY_PLAN_SEED"))
    return std::strtoull(fixed, nullptr, 10);
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | device();
}

struct Buffer {
  int64_t elements, start, end; // live from slot start to slot end
};

// A function whose buffer i is allocated (and written) at slot start and
// written a last time at slot end: kern-plan-memory sees exactly these ranges.
std::string program(const std::vector<Buffer> &buffers, int slots) {
  std::ostringstream s;
  s << "func.func @f() {\n";
  for (int t = 0; t < slots; ++t) {
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].start == t)
        s << "  %b" << i << " = kern.alloc : memref<" << buffers[i].elements << "xf32>\n"
          << "  kern.fill %b" << i << " {value = 0.0 : f64} : memref<" << buffers[i].elements
          << "xf32>\n";
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].end == t && buffers[i].end != buffers[i].start)
        s << "  kern.fill %b" << i << " {value = 1.0 : f64} : memref<" << buffers[i].elements
          << "xf32>\n";
  }
  s << "  return\n}\n";
  return s.str();
}

TEST(MemoryPlan, RandomProgramsNeverOverlap) {
  const uint64_t s = seed();
  SCOPED_TRACE("seed " + std::to_string(s) + " (rerun with TCC_MEMORY_PLAN_SEED=" +
               std::to_string(s) + ")");
  std::mt19937_64 rng(s);
  auto ctx = makeContext();
  for (int trial = 0; trial < 200; ++trial) {
    const int slots = 2 + static_cast<int>(rng() % 30);
    const int count = 1 + static_cast<int>(rng() % 40);
    std::vector<Buffer> buffers;
    for (int i = 0; i < count; ++i) {
      int64_t a = static_cast<int64_t>(rng() % slots), b = static_cast<int64_t>(rng() % slots);
      buffers.push_back({1 + static_cast<int64_t>(rng() % 5000), std::min(a, b), std::max(a, b)});
    }
    const std::string text = program(buffers, slots);
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, ctx.get());
    ASSERT_TRUE(module) << text;
    PassManager pm(ctx.get());
    pm.addPass(tcc::createKernPlanMemory());
    ASSERT_TRUE(succeeded(pm.run(*module))) << text;
    auto f = *module->getOps<func::FuncOp>().begin();
    llvm::SmallVector<tcc::PlannedBuffer> planned = tcc::plannedBuffers(f);
    ASSERT_EQ(planned.size(), buffers.size());
    EXPECT_TRUE(tcc::planOverlaps(planned).empty()) << "trial " << trial << ":\n" << text;
    // The arena is at least the largest set of buffers live together.
    int64_t arena = f->getAttrOfType<IntegerAttr>("kern.workspace_bytes").getInt(), peak = 0;
    for (const tcc::PlannedBuffer &b : planned) {
      int64_t live = 0;
      for (const tcc::PlannedBuffer &o : planned)
        if (o.start <= b.start && b.start <= o.lastUse)
          live += o.bytes;
      peak = std::max(peak, live);
      EXPECT_LE(b.offset + b.bytes, arena);
    }
    EXPECT_GE(arena, peak);
  }
}

// The checker finds two live buffers given the same bytes, and accepts the
// same bytes for buffers whose ranges do not meet.
TEST(MemoryPlan, CheckerFindsAPlantedOverlap) {
  auto ctx = makeContext();
  const char *together = R"(
func.func @f() {
  %a = kern.workspace_view 0 : memref<100xf32>
  %b = kern.workspace_view 256 : memref<100xf32>
  kern.fill %a {value = 0.0 : f64} : memref<100xf32>
  kern.fill %b {value = 0.0 : f64} : memref<100xf32>
  return
})";
  const char *apart = R"(
func.func @f() {
  %a = kern.workspace_view 0 : memref<100xf32>
  kern.fill %a {value = 0.0 : f64} : memref<100xf32>
  %b = kern.workspace_view 0 : memref<100xf32>
  kern.fill %b {value = 0.0 : f64} : memref<100xf32>
  return
})";
  for (auto [text, overlaps] : {std::pair<const char *, size_t>{together, 1}, {apart, 0}}) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, ctx.get());
    ASSERT_TRUE(module);
    auto f = *module->getOps<func::FuncOp>().begin();
    EXPECT_EQ(tcc::planOverlaps(tcc::plannedBuffers(f)).size(), overlaps) << text;
  }
}

} // namespace
