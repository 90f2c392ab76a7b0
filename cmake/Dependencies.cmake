# Every dependency, found once. A missing required one stops configure and
# names the Debian package to install (scripts/setup.sh installs them all);
# a missing optional one switches its part off with one message.

find_package(PkgConfig REQUIRED)

# hangtrace_require(<what> <debian-package> <found-variable>)
macro(hangtrace_require what package found)
  if(NOT ${found})
    message(FATAL_ERROR "hangtrace needs ${what}: install the Debian package '${package}' "
                        "(apt-get install ${package}), or run scripts/setup.sh")
  endif()
endmacro()

pkg_check_modules(LIBUNWIND IMPORTED_TARGET libunwind)
hangtrace_require("libunwind (in-process stack capture)" libunwind-dev LIBUNWIND_FOUND)

pkg_check_modules(LIBDW IMPORTED_TARGET libdw)
hangtrace_require("elfutils libdw (symbols for out-of-process stacks)" libdw-dev LIBDW_FOUND)

find_package(Threads REQUIRED)

find_package(MPI COMPONENTS C CXX QUIET)
hangtrace_require("an MPI implementation with headers (OpenMPI)" "openmpi-bin libopenmpi-dev" MPI_FOUND)

find_package(nlohmann_json 3 QUIET)
hangtrace_require("nlohmann-json (JSON reports)" nlohmann-json3-dev nlohmann_json_FOUND)

find_package(CLI11 QUIET)
hangtrace_require("CLI11 (command line)" libcli11-dev CLI11_FOUND)

find_package(GTest QUIET)
hangtrace_require("GoogleTest (tests)" libgtest-dev GTest_FOUND)

find_package(benchmark QUIET)
hangtrace_require("Google Benchmark (bench/)" libbenchmark-dev benchmark_FOUND)

# --- optional parts ---------------------------------------------------------
# CUDA toolkit and NCCL: the NVIDIA wrappers and the trainer's NCCL backend.
set(HANGTRACE_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA toolkit root")
find_path(CUDA_RUNTIME_INCLUDE cuda_runtime_api.h HINTS ${HANGTRACE_CUDA_ROOT}/include)
find_path(NCCL_INCLUDE nccl.h HINTS ${HANGTRACE_CUDA_ROOT}/include)
if(CUDA_RUNTIME_INCLUDE)
  set(HANGTRACE_HAVE_CUDA ON)
  message(STATUS "hangtrace: CUDA headers found in ${CUDA_RUNTIME_INCLUDE}: CUDA launch tracing on")
else()
  set(HANGTRACE_HAVE_CUDA OFF)
  message(STATUS "hangtrace: no CUDA toolkit (looked in ${HANGTRACE_CUDA_ROOT}): CUDA launch tracing off")
endif()
if(NCCL_INCLUDE)
  set(HANGTRACE_HAVE_NCCL ON)
  message(STATUS "hangtrace: nccl.h found in ${NCCL_INCLUDE}: NCCL tracing on")
else()
  set(HANGTRACE_HAVE_NCCL OFF)
  message(STATUS "hangtrace: no nccl.h: NCCL tracing off")
endif()

# HIP headers (Debian: libamdhip64-dev).
find_path(HIP_INCLUDE hip/hip_runtime_api.h HINTS /opt/rocm/include)
if(HIP_INCLUDE)
  set(HANGTRACE_HAVE_HIP ON)
  message(STATUS "hangtrace: HIP headers found in ${HIP_INCLUDE}: HIP launch tracing on")
else()
  set(HANGTRACE_HAVE_HIP OFF)
  message(STATUS "hangtrace: no HIP headers (Debian package libamdhip64-dev): HIP launch tracing off")
endif()
