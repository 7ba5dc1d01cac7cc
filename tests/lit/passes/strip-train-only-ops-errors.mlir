// RUN: tcc-opt %s -tg-strip-train-only-ops -verify-diagnostics
// tg-strip-train-only-ops needs the eval function @forward.

// expected-error @+1 {{tg-strip-train-only-ops: no @forward function}}
module {
  func.func @other() {
    return
  }
}
