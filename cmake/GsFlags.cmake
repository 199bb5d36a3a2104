# SPDX-License-Identifier: Apache-2.0
# Compiler flags shared by every target.
add_compile_options(
  -Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes
  -Wwrite-strings -Wno-unused-parameter
  -fstack-protector-strong -fno-strict-aliasing)
if(NOT CMAKE_BUILD_TYPE STREQUAL "Debug" AND NOT GS_SANITIZE)
  add_compile_definitions(_FORTIFY_SOURCE=2)
endif()
add_compile_definitions(_GNU_SOURCE)
if(GS_WERROR)
  add_compile_options(-Werror)
endif()
if(GS_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(GS_SANITIZE=1)
endif()
# Shared objects resolve every symbol at link time and are fully RELRO.
set(GS_SHARED_LINK_FLAGS -Wl,-z,defs -Wl,-z,relro -Wl,-z,now)
if(GS_FUZZ)
  # Instrument what the fuzz targets link (static and object libraries,
  # executables) for coverage, ASan and UBSan, so libFuzzer sees inside the
  # parsers; the fuzz binaries add -fsanitize=fuzzer at link time
  # (fuzz/CMakeLists.txt, tests/kube, tests/extender). Shared objects (the
  # shim, simgpu's driver libraries, test stubs) and simgpu (sim/, whose
  # static sim_state goes into those libraries) are built as usual: clang
  # links no sanitizer runtime into a shared object, so -z defs would refuse
  # their instrumented references, and a preloaded ASan library needs the
  # runtime loaded first anyway.
  set(_gs_fuzz_type "$<TARGET_PROPERTY:TYPE>")
  set(_gs_fuzz_on "$<AND:$<NOT:$<STREQUAL:${_gs_fuzz_type},SHARED_LIBRARY>>,\
$<NOT:$<STREQUAL:${_gs_fuzz_type},MODULE_LIBRARY>>,\
$<NOT:$<STREQUAL:$<TARGET_PROPERTY:SOURCE_DIR>,${CMAKE_SOURCE_DIR}/sim>>>")
  add_compile_options("$<${_gs_fuzz_on}:-fsanitize=fuzzer-no-link$<COMMA>address$<COMMA>undefined>"
                      "$<${_gs_fuzz_on}:-fno-omit-frame-pointer>")
  add_link_options("$<$<AND:${_gs_fuzz_on},$<STREQUAL:${_gs_fuzz_type},EXECUTABLE>>:\
-fsanitize=address$<COMMA>undefined>")
endif()
