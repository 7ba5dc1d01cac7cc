# lit configuration for tcc's FileCheck tests.
import os
import lit.formats
from lit.llvm import llvm_config

config.name = "tcc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".pbtxt", ".test"]
config.excludes = ["inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tcc_obj_root, "lit")
config.substitutions.append(("%src_root", config.tcc_src_root))

llvm_config.with_system_environment(["HOME", "TMPDIR", "CXX", "PATH"])
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.tcc_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tools = ["tcc", "tcc-opt", "tcc-models", "FileCheck", "not", "count"]
llvm_config.add_tool_substitutions(tools, [config.tcc_tools_dir, config.llvm_tools_dir])

# CUDA: tests that run nvcc need the toolkit (CI has it, no GPU needed).
import shutil
nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
if os.path.exists(nvcc):
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", nvcc))
