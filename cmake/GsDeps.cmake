# SPDX-License-Identifier: Apache-2.0
# Third-party dependencies, all from Debian packages (scripts/install-deps),
# plus the CUDA driver API's header.

# --- cuda.h (always needed; nothing else of CUDA is) ---
# From the CUDA toolkit ($CUDA_HOME, $CUDA_PATH, CMake's CUDAToolkit, next to
# nvcc, /usr/local/cuda, /usr/local/cuda-X.Y, /opt/cuda) or from Debian's
# nvidia-cuda-dev (non-free; /usr/include/cuda.h; Debian's nvidia-cuda-toolkit
# has /usr/lib/cuda/include), CUDA 13.0 or newer. -DCUDA_INCLUDE_DIR=DIR
# overrides the search; $CUDA_INCLUDE_DIR is its first hint. Programs that call
# the driver link simgpu's libcuda.so.1 at build time (sim/CMakeLists.txt:
# gs_cuda_driver), so no toolkit stub library is needed either.
option(GS_NVCC "Compile the project kernels with nvcc when it is found; OFF: never look for nvcc \
and use the repository's PTX (sim/kernels/gs_kernels.ptx)" ON)
set(_gs_cuda_hints "")
if(DEFINED ENV{CUDA_INCLUDE_DIR})
  list(APPEND _gs_cuda_hints "$ENV{CUDA_INCLUDE_DIR}")
endif()
foreach(e CUDA_HOME CUDA_PATH CUDA_ROOT CUDAToolkit_ROOT)
  if(DEFINED ENV{${e}})
    list(APPEND _gs_cuda_hints "$ENV{${e}}/include")
  endif()
endforeach()
if(GS_NVCC AND NOT CUDA_INCLUDE_DIR)
  # CMake's own search for a toolkit (it runs nvcc --version): only when nvcc may be used
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    list(APPEND _gs_cuda_hints ${CUDAToolkit_INCLUDE_DIRS})
  endif()
endif()
file(GLOB _gs_cuda_versioned LIST_DIRECTORIES true /usr/local/cuda-*/include)
list(SORT _gs_cuda_versioned COMPARE NATURAL ORDER DESCENDING)
# The toolkit's places as HINTS: searched before the system's /usr/include,
# where an older Debian cuda.h may be.
list(APPEND _gs_cuda_hints /usr/local/cuda/include ${_gs_cuda_versioned} /opt/cuda/include)
set(_gs_cuda_paths /usr/include /usr/lib/cuda/include)
find_path(CUDA_INCLUDE_DIR cuda.h HINTS ${_gs_cuda_hints} PATHS ${_gs_cuda_paths}
          DOC "directory holding cuda.h (the CUDA toolkit's include/, or /usr/include with Debian's nvidia-cuda-dev)")
# Indented lines: CMake prints them as they are (no rewrapping), one fix a line.
set(_gs_cuda_fix ": install one of:
  the CUDA toolkit, 13.0 or newer (its include/ in /usr/local/cuda, or set CUDA_HOME), or
  Debian's nvidia-cuda-dev (apt install nvidia-cuda-dev, non-free; CUDA 13.0 or newer is needed:
    Debian 12's is 11.8, Debian 13's 12.4), or
  set -DCUDA_INCLUDE_DIR=<directory holding cuda.h>")
if(NOT CUDA_INCLUDE_DIR)
  string(REPLACE ";" " " _gs_where "${_gs_cuda_hints} ${_gs_cuda_paths}")
  string(STRIP "${_gs_where}" _gs_where)
  unset(CUDA_INCLUDE_DIR CACHE)  # searched again at the next configure
  message(FATAL_ERROR "cuda.h not found${_gs_cuda_fix}\n  (looked in: ${_gs_where})")
elseif(NOT EXISTS "${CUDA_INCLUDE_DIR}/cuda.h")
  message(FATAL_ERROR "cuda.h not found in CUDA_INCLUDE_DIR=${CUDA_INCLUDE_DIR}${_gs_cuda_fix}")
endif()
# The driver API as of CUDA 13.0 (cuCtxCreate_v4's parameters, the _v2 context
# calls simgpu implements, CUDA_VERSION 13000 as simgpu's driver version).
# Debian's nvidia-cuda-dev is older for now (Debian 12: 11.8, Debian 13: 12.4).
set(GS_CUDA_MIN_VERSION 13000 CACHE STRING "oldest cuda.h (CUDA_VERSION) the build accepts")
file(STRINGS "${CUDA_INCLUDE_DIR}/cuda.h" _gs_cuda_v REGEX "^#define CUDA_VERSION [0-9]+" LIMIT_COUNT 1)
string(REGEX REPLACE "^#define CUDA_VERSION ([0-9]+).*" "\\1" _gs_cuda_v "${_gs_cuda_v}")
if(NOT _gs_cuda_v MATCHES "^[0-9]+$")
  message(FATAL_ERROR "${CUDA_INCLUDE_DIR}/cuda.h has no #define CUDA_VERSION: not the driver API's cuda.h?")
endif()
math(EXPR _gs_cuda_major "${_gs_cuda_v} / 1000")
math(EXPR _gs_cuda_minor "${_gs_cuda_v} % 1000 / 10")
if(_gs_cuda_v LESS GS_CUDA_MIN_VERSION)
  message(FATAL_ERROR "${CUDA_INCLUDE_DIR}/cuda.h is CUDA ${_gs_cuda_major}.${_gs_cuda_minor} "
    "(CUDA_VERSION ${_gs_cuda_v}); gpuslice needs the driver API of CUDA 13.0 or newer "
    "(CUDA_VERSION >= ${GS_CUDA_MIN_VERSION}): install the CUDA 13 toolkit (/usr/local/cuda, or set "
    "CUDA_HOME), or set -DCUDA_INCLUDE_DIR=<the include/ directory of a CUDA 13 toolkit>")
endif()

# --- nvcc (optional): compiles the project kernels; without it the build uses the
# repository's PTX of them (sim/CMakeLists.txt) ---
if(GS_NVCC)
  set(_gs_nvcc_hints "")
  if(CUDAToolkit_BIN_DIR)
    list(APPEND _gs_nvcc_hints ${CUDAToolkit_BIN_DIR})
  endif()
  foreach(e CUDA_HOME CUDA_PATH)
    if(DEFINED ENV{${e}})
      list(APPEND _gs_nvcc_hints "$ENV{${e}}/bin")
    endif()
  endforeach()
  find_program(NVCC_EXECUTABLE nvcc HINTS ${_gs_nvcc_hints} PATHS /usr/local/cuda/bin
               DOC "nvcc, to compile the project kernels (optional)")
  if(NVCC_EXECUTABLE)
    # one that does not run (a wrapper left behind by a removed toolkit) is as good as none
    execute_process(COMMAND ${NVCC_EXECUTABLE} --version RESULT_VARIABLE _gs_nvcc_rc
                    OUTPUT_VARIABLE _gs_nvcc_out ERROR_VARIABLE _gs_nvcc_out TIMEOUT 60)
    if(NOT _gs_nvcc_rc EQUAL 0)
      string(STRIP "${_gs_nvcc_out}" _gs_nvcc_out)
      message(WARNING "${NVCC_EXECUTABLE} does not run (${_gs_nvcc_rc}: ${_gs_nvcc_out}): building "
                      "with the repository's PTX of the kernels, as without nvcc")
      set(NVCC_EXECUTABLE "")
    endif()
  endif()
  if(NVCC_EXECUTABLE)
    get_filename_component(_gs_nvcc_dir ${NVCC_EXECUTABLE} REALPATH)
    get_filename_component(_gs_nvcc_dir ${_gs_nvcc_dir} DIRECTORY)
    find_program(PTXAS_EXECUTABLE ptxas HINTS ${_gs_nvcc_dir} NO_DEFAULT_PATH)
  endif()
else()
  unset(NVCC_EXECUTABLE CACHE)
  unset(PTXAS_EXECUTABLE CACHE)
  set(NVCC_EXECUTABLE "")
endif()
if(NVCC_EXECUTABLE)
  message(STATUS "cuda.h: ${CUDA_INCLUDE_DIR} (CUDA ${_gs_cuda_major}.${_gs_cuda_minor}); nvcc: ${NVCC_EXECUTABLE} (kernels compiled, "
                 "checked against sim/kernels/gs_kernels.ptx by the ctest ptx_drift)")
elseif(GS_NVCC)
  message(STATUS "cuda.h: ${CUDA_INCLUDE_DIR} (CUDA ${_gs_cuda_major}.${_gs_cuda_minor}); nvcc: not found (kernels: the repository's "
                 "sim/kernels/gs_kernels.ptx)")
else()
  message(STATUS "cuda.h: ${CUDA_INCLUDE_DIR} (CUDA ${_gs_cuda_major}.${_gs_cuda_minor}); nvcc: not used (GS_NVCC=OFF; kernels: the "
                 "repository's sim/kernels/gs_kernels.ptx)")
endif()

find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
