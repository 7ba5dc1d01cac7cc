# cmake -DOUT=file.cpp -DABI=step_abi.h -DPRELUDE=cpu_prelude.h -P EmbedSources.cmake
file(READ "${ABI}" abi_text)
file(READ "${PRELUDE}" prelude_text)
file(WRITE "${OUT}.tmp"
"// Generated from ${ABI} and ${PRELUDE}. Do not edit.\n"
"#include \"compiler/codegen/EmbeddedSources.h\"\n"
"namespace tcc::embedded {\n"
"const char *const kStepAbiHeader = R\"tcc_embed(${abi_text})tcc_embed\";\n"
"const char *const kCpuPrelude = R\"tcc_embed(${prelude_text})tcc_embed\";\n"
"}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
