// `tcc import MODEL.onnx`: the ONNX importer of the Python front end (see
// ImportCommand.cpp).
#ifndef TCC_COMPILER_TOOLS_TCC_IMPORTCOMMAND_H
#define TCC_COMPILER_TOOLS_TCC_IMPORTCOMMAND_H

namespace tcc {
// Arguments after "import"; returns the process exit code (on success the
// process is replaced by Python and does not return).
int importCommandMain(int argc, char **argv, const char *argv0);
} // namespace tcc

#endif
