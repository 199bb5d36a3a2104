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
  # Instrument everything for coverage so libFuzzer sees inside the parsers;
  # the fuzz binaries add -fsanitize=fuzzer at link time (fuzz/CMakeLists.txt).
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
