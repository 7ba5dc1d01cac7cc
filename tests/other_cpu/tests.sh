# Sourced by prepare.sh and check.sh: the tests run on another CPU, as
# "name|command" ({bin}: the shims, {work}: the test's work folder).
fortunes=/usr/share/games/fortunes/fortunes
tests=(
  "bn_torch|/usr/bin/python3 $root/tests/torch_import/batch_norm_parity_test.py --bin-dir {bin} --via torch --work-dir {work}"
  "bn_onnx|/usr/bin/python3 $root/tests/torch_import/batch_norm_parity_test.py --bin-dir {bin} --via onnx --work-dir {work}"
  "parity_mlp|/usr/bin/python3 $root/tests/torch_import/parity_test.py --bin-dir {bin} --model mlp --text $fortunes --work-dir {work}"
  "parity_onnx_mlp|/usr/bin/python3 $root/tests/torch_import/parity_test.py --bin-dir {bin} --model onnx_mlp --text $fortunes --work-dir {work}"
  "parity_gpt|/usr/bin/python3 $root/tests/torch_import/parity_test.py --bin-dir {bin} --model gpt --text $fortunes --work-dir {work}"
  "parity_nanogpt|/usr/bin/python3 $root/tests/torch_import/parity_test.py --bin-dir {bin} --model nanogpt --text $fortunes --work-dir {work}"
  "parity_onnx_gpt|/usr/bin/python3 $root/tests/torch_import/parity_test.py --bin-dir {bin} --model onnx_gpt --text $fortunes --work-dir {work}"
  "gpt_parity|/usr/bin/python3 $root/tests/parity/gpt_parity_test.py --bin-dir {bin} --text $fortunes --work-dir {work}"
)
