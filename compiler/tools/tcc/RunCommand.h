// `tcc run MODEL`: the reference interpreter on a model (see RunCommand.cpp).
#ifndef TCC_COMPILER_TOOLS_TCC_RUNCOMMAND_H
#define TCC_COMPILER_TOOLS_TCC_RUNCOMMAND_H

namespace tcc {
// Arguments after "run"; returns the process exit code.
int runCommandMain(int argc, char **argv);
} // namespace tcc

#endif
