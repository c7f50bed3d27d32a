# llvm.cmake - LLVM 22 for the code generator: headers, version and the static libraries of
# the NVPTX back end and the pass builder (with zstd and zlib, static too). Included by the
# main build and by the fuzz build (tests/fuzz), which link them differently (LLVM_LINK).
find_program(LLVM_CONFIG NAMES llvm-config-22 PATHS /usr/lib/llvm-22/bin REQUIRED)
execute_process(COMMAND ${LLVM_CONFIG} --includedir OUTPUT_VARIABLE LLVM_INCLUDE OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${LLVM_CONFIG} --version OUTPUT_VARIABLE LLVM_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${LLVM_CONFIG} --libfiles --link-static nvptx passes
                OUTPUT_VARIABLE LLVM_LIBFILES OUTPUT_STRIP_TRAILING_WHITESPACE)
separate_arguments(LLVM_LIBFILES UNIX_COMMAND "${LLVM_LIBFILES}")
find_library(ZSTD_STATIC NAMES libzstd.a REQUIRED)
find_library(Z_STATIC NAMES libz.a REQUIRED)
