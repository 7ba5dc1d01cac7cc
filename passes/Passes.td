//===- Passes.td - tcc passes ---------------------------------------------===//
//
// Every arrow of the pipeline (compiler/pipeline/Pipeline.cpp) is one of these
// passes; each lives in its own file and has a lit test in tests/lit/passes.
//
//===----------------------------------------------------------------------===//
#ifndef TCC_PASSES
#define TCC_PASSES

include "mlir/Pass/PassBase.td"

def TgAutodiff : Pass<"tg-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode autodiff: @forward -> @train_step returning loss and gradients";
  let description = [{
    Clones @forward into @train_step and appends the backward graph, built
    op by op through GradientOpInterface, walking the forward ops in reverse.
    Gradients of a value used several times are summed. Integer inputs and
    frozen parameters (trainable = false) get no gradient. @train_step
    returns the loss followed by one gradient per trainable parameter
    (result attribute tg.grad_of = parameter index). Dead forward values
    (eval-only outputs, gradients nobody needs) are removed.
  }];
  let dependentDialects = ["tcc::tg::TgDialect", "mlir::func::FuncDialect"];
}

def TgSgdUpdate : Pass<"tg-sgd-update", "mlir::ModuleOp"> {
  let summary = "Applies plain SGD in @train_step: param - lr * grad";
  let description = [{
    Requires the module's tg.optimizer to be sgd. Adds a learning-rate
    argument (tg.hyper = "learning_rate", supplied by the runtime every step
    so schedules stay outside the compiled code) and replaces each gradient
    result by the updated parameter (tg.updates_param = index).
  }];
  let dependentDialects = ["tcc::tg::TgDialect"];
}

def TgLowerToKern : Pass<"tg-lower-to-kern", "mlir::ModuleOp"> {
  let summary = "Lowers tg functions on tensors to kern ops on buffers";
  let description = [{
    Tensor arguments become buffers; results become output-buffer arguments
    (the loss, eval outputs) or, for updated parameters, in-place updates of
    the parameter buffer. Every temporary is a kern.alloc for
    kern-plan-memory to place.
  }];
  let dependentDialects = ["tcc::kern::KernDialect", "mlir::func::FuncDialect"];
}

def KernPlanMemory : Pass<"kern-plan-memory", "mlir::ModuleOp"> {
  let summary = "Places every kern.alloc in one workspace arena by liveness";
  let description = [{
    Computes each temporary's live range in program order (following
    kern.reshape aliases), then assigns 64-byte aligned offsets first-fit,
    reusing space of buffers that are dead. Replaces allocs by
    kern.workspace_view and records kern.workspace_bytes on each function
    and (the maximum) on the module.
  }];
  let dependentDialects = ["tcc::kern::KernDialect"];
}

#endif // TCC_PASSES
