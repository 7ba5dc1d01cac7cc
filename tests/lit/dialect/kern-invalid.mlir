// RUN: tcc-opt %s -split-input-file -verify-diagnostics
// Each kern verifier rejects malformed ops with a message naming the problem.

func.func @kern_gemm(%a: memref<4x3xf32>, %b: memref<4x5xf32>, %c: memref<4x5xf32>) {
  // expected-error @+1 {{inconsistent gemm shapes}}
  kern.gemm %a, %b, %c {alpha = 1.0 : f64, beta = 0.0 : f64, transpose_a = false, transpose_b = false} : memref<4x3xf32>, memref<4x5xf32>, memref<4x5xf32>
  return
}

// -----

func.func @kern_gemm_batch(%a: memref<2x4x3xf32>, %b: memref<3x3x5xf32>, %c: memref<2x4x5xf32>) {
  // expected-error @+1 {{batch dimensions [2] and [3] do not broadcast to the output's [2]}}
  kern.gemm %a, %b, %c {alpha = 1.0 : f64, beta = 0.0 : f64, transpose_a = false, transpose_b = false} : memref<2x4x3xf32>, memref<3x3x5xf32>, memref<2x4x5xf32>
  return
}

// -----

func.func @elementwise_broadcast(%a: memref<3xf32>, %c: memref<4xf32>) {
  // expected-error @+1 {{does not broadcast to the output shape [4]}}
  kern.elementwise ins(%a : memref<3xf32>) outs(%c : memref<4xf32>) {
  ^bb0(%x: f32, %i: i64):
    kern.yield %x : f32
  }
  return
}

// -----

func.func @elementwise_args(%a: memref<4xf32>, %c: memref<4xf32>) {
  // expected-error @+1 {{body takes one scalar per input and the flat index}}
  kern.elementwise ins(%a : memref<4xf32>) outs(%c : memref<4xf32>) {
  ^bb0(%x: f32):
    kern.yield %x : f32
  }
  return
}

// -----

func.func @elementwise_yield(%a: memref<4xf32>, %c: memref<4xf64>) {
  // expected-error @+1 {{yielded type 'f32' differs from the output element type 'f64'}}
  kern.elementwise ins(%a : memref<4xf32>) outs(%c : memref<4xf64>) {
  ^bb0(%x: f32, %i: i64):
    kern.yield %x : f32
  }
  return
}

// -----

func.func @elementwise_outputs(%a: memref<4xf32>, %c: memref<4xf32>, %d: memref<2xf32>) {
  // expected-error @+1 {{outputs must have one shape}}
  kern.elementwise ins(%a : memref<4xf32>) outs(%c, %d : memref<4xf32>, memref<2xf32>) {
  ^bb0(%x: f32, %i: i64):
    kern.yield %x, %x : f32, f32
  }
  return
}

// -----

func.func @elementwise_body(%a: memref<4xf32>, %c: memref<4xf32>) {
  kern.elementwise ins(%a : memref<4xf32>) outs(%c : memref<4xf32>) {
  ^bb0(%x: f32, %i: i64):
    // expected-error @+1 {{is not allowed in a kern.elementwise body}}
    %w = kern.workspace_view 0 : memref<4xf32>
    kern.yield %x : f32
  }
  return
}

// -----

func.func @reduce_axes(%a: memref<4x5xf32>, %c: memref<f32>) {
  // expected-error @+1 {{axes must be sorted and unique}}
  kern.reduce sum %a, %c {axes = array<i64: 1, 0>} : memref<4x5xf32>, memref<f32>
  return
}

// -----

func.func @transpose_perm(%a: memref<4x5xf32>, %c: memref<5x4xf32>) {
  // expected-error @+1 {{perm is not a permutation}}
  kern.transpose %a, %c {perm = array<i64: 1, 1>} : memref<4x5xf32>, memref<5x4xf32>
  return
}

// -----

func.func @slice_bounds(%a: memref<4x5xf32>, %c: memref<2x5xf32>) {
  // expected-error @+1 {{slice of dimension 0 is out of bounds}}
  kern.slice %a, %c {starts = array<i64: 3, 0>} : memref<4x5xf32>, memref<2x5xf32>
  return
}

// -----

func.func @concat_sizes(%a: memref<2x5xf32>, %c: memref<5x5xf32>) {
  // expected-error @+1 {{input sizes along the axis do not add up to the output's}}
  kern.concat(%a, %a) into %c {axis = 0 : i64} : (memref<2x5xf32>, memref<2x5xf32>) -> memref<5x5xf32>
  return
}

// -----

func.func @gather_shape(%t: memref<7x5xf32>, %ids: memref<3xi32>, %c: memref<3x4xf32>) {
  // expected-error @+1 {{expects shape [3, 5] for the looked-up rows}}
  kern.gather %t, %ids, %c : memref<7x5xf32>, memref<3xi32>, memref<3x4xf32>
  return
}

// -----

func.func @constant_type() {
  // expected-error @+1 {{does not match}}
  %k = kern.constant dense<[1.0, 2.0]> : tensor<2xf32> : memref<3xf32>
  return
}

// -----

func.func @attention_heads(%q: memref<1x3x4x8xf32>, %k: memref<1x2x5x8xf32>, %o: memref<1x3x4x8xf32>, %l: memref<1x3x4xf32>) {
  // expected-error @+1 {{have a head count dividing q's}}
  kern.attention %q, %k, %k into %o, %l {scale = 1.0 : f64} : memref<1x3x4x8xf32>, memref<1x2x5x8xf32>, memref<1x2x5x8xf32> -> memref<1x3x4x8xf32>, memref<1x3x4xf32>
  return
}

// -----

func.func @attention_lse_type(%q: memref<1x2x4x8xbf16>, %o: memref<1x2x4x8xbf16>, %l: memref<1x2x4xf64>) {
  // expected-error @+1 {{lse must be (B, H, T) = [1, 2, 4] of 'f32'}}
  kern.attention %q, %q, %q into %o, %l {scale = 1.0 : f64} : memref<1x2x4x8xbf16>, memref<1x2x4x8xbf16>, memref<1x2x4x8xbf16> -> memref<1x2x4x8xbf16>, memref<1x2x4xf64>
  return
}

// -----

func.func @attention_dropout_operands(%q: memref<1x2x4x8xf32>, %o: memref<1x2x4x8xf32>, %l: memref<1x2x4xf32>) {
  // expected-error @+1 {{dropout_rate > 0 needs exactly the dropout(rng_seed, step) operands and op_id}}
  kern.attention %q, %q, %q into %o, %l {scale = 1.0 : f64, dropout_rate = 0.1 : f64} : memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x2x4x8xf32> -> memref<1x2x4x8xf32>, memref<1x2x4xf32>
  return
}

// -----

// (B*H*T = 8 floats)
func.func @attention_grad_workspace(%q: memref<1x2x4x8xf32>, %l: memref<1x2x4xf32>, %w: memref<10xf32>) {
  // expected-error @+1 {{workspace must hold 8 floats, has 10}}
  kern.attention_grad %q, %q, %q, %q, %l, %q into %q, %q, %q workspace %w {scale = 1.0 : f64} : memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x2x4xf32>, memref<1x2x4x8xf32> -> memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<10xf32>
  return
}

// -----

// kern.attention with a layout (kern-fold-attention-layout's strides): every
// tensor must lie inside its buffer.
func.func @attention_layout_out_of_bounds(%qkv: memref<2x4x48xf32>, %o: memref<2x4x2x8xf32>, %l: memref<2x2x4xf32>) {
  // expected-error @+1 {{layout of v reaches element 400 of a buffer of 384}}
  kern.attention %qkv, %qkv, %qkv into %o, %l {scale = 1.0 : f64, sizes = array<i64: 2, 2, 2, 4, 4, 8>, layout = array<i64: 0, 192, 8, 48, 16, 192, 8, 48, 48, 192, 8, 48, 0, 64, 8, 16>} : memref<2x4x48xf32>, memref<2x4x48xf32>, memref<2x4x48xf32> -> memref<2x4x2x8xf32>, memref<2x2x4xf32>
  return
}

// -----

func.func @attention_sizes_without_layout(%q: memref<1x2x4x8xf32>, %o: memref<1x2x4x8xf32>, %l: memref<1x2x4xf32>) {
  // expected-error @+1 {{sizes and layout come together}}
  kern.attention %q, %q, %q into %o, %l {scale = 1.0 : f64, sizes = array<i64: 1, 2, 2, 4, 4, 8>} : memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x2x4x8xf32> -> memref<1x2x4x8xf32>, memref<1x2x4xf32>
  return
}

// -----

func.func @attention_layout_count(%qkv: memref<2x4x48xf32>, %o: memref<2x4x2x8xf32>, %l: memref<2x2x4xf32>) {
  // expected-error @+1 {{layout must hold 4 numbers (offset, batch, head, row strides) for each of the 4 tensors, has 12}}
  kern.attention %qkv, %qkv, %qkv into %o, %l {scale = 1.0 : f64, sizes = array<i64: 2, 2, 2, 4, 4, 8>, layout = array<i64: 0, 192, 8, 48, 16, 192, 8, 48, 32, 192, 8, 48>} : memref<2x4x48xf32>, memref<2x4x48xf32>, memref<2x4x48xf32> -> memref<2x4x2x8xf32>, memref<2x2x4xf32>
  return
}

// -----

func.func @xent_with_grad_rank(%x: memref<20xf32>, %l: memref<4xi32>, %g: memref<4xf32>) {
  // expected-error @+1 {{logits must be (rows, classes)}}
  kern.softmax_cross_entropy_with_grad %x, %l, %g, %g, %x : memref<20xf32>, memref<4xi32>, memref<4xf32>, memref<4xf32>, memref<20xf32>
  return
}

// -----

func.func @xent_with_grad_out(%x: memref<4x5xbf16>, %l: memref<4xi32>, %g: memref<4xf32>, %o: memref<4x5xf32>) {
  // expected-error @+1 {{out must have the logits' type}}
  kern.softmax_cross_entropy_with_grad %x, %l, %g, %g, %o : memref<4x5xbf16>, memref<4xi32>, memref<4xf32>, memref<4xf32>, memref<4x5xf32>
  return
}

// -----

func.func @xent_with_grad_rows(%x: memref<4x5xf32>, %l: memref<3xi32>, %g: memref<4xf32>) {
  // expected-error @+1 {{labels must hold one element per row (4)}}
  kern.softmax_cross_entropy_with_grad %x, %l, %g, %g, %x : memref<4x5xf32>, memref<3xi32>, memref<4xf32>, memref<4xf32>, memref<4x5xf32>
  return
}

// -----

func.func @xent_with_grad_loss_type(%x: memref<4x5xbf16>, %l: memref<4xi32>, %g: memref<4xf32>, %loss: memref<4xf16>) {
  // expected-error @+1 {{loss must be of the logits' type or f32}}
  kern.softmax_cross_entropy_with_grad %x, %l, %g, %loss, %x : memref<4x5xbf16>, memref<4xi32>, memref<4xf32>, memref<4xf16>, memref<4x5xbf16>
  return
}
