# SPDX-License-Identifier: Apache-2.0
# Third-party dependencies, all from Debian packages (scripts/install-deps).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)

# The CUDA toolkit provides cuda.h (always needed) and nvcc (to build the
# project's kernels to PTX). The toolkit sits in its standard location.
find_path(CUDA_INCLUDE_DIR cuda.h
  HINTS ENV CUDA_HOME PATHS /usr/local/cuda/include /usr/local/cuda-13.0/include /usr/include
  REQUIRED)
find_program(NVCC_EXECUTABLE nvcc HINTS ENV CUDA_HOME PATHS /usr/local/cuda/bin)
message(STATUS "cuda.h: ${CUDA_INCLUDE_DIR}; nvcc: ${NVCC_EXECUTABLE}")
