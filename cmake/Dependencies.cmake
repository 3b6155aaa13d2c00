# Required dependencies fail the configure; optional ones are announced once and skipped.
# Everything the library needs at build time is header-only or compiled in (fmt header-only,
# xxHash inlined), so libconvjit needs nothing but libc, libstdc++, libm and libdl at run time.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)

find_path(XBYAK_INCLUDE_DIR xbyak/xbyak.h REQUIRED)
find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_path(NLOHMANN_JSON_INCLUDE_DIR nlohmann/json.hpp REQUIRED)

# fmt as headers only: no libfmt.so beside libconvjit, and no fmt symbols for a process that
# loads another fmt (TensorFlow and PyTorch bring their own) to clash with. Every in-tree
# target uses this instead of fmt::fmt.
add_library(convjit_fmt INTERFACE)
target_link_libraries(convjit_fmt INTERFACE fmt::fmt-header-only)

# Header-only and inlined dependencies: as plain directories and definitions (the library applies
# them privately, so an installed static libconvjit.a names no build-time target), and bundled
# into one interface target for the tests and tools.
get_target_property(CONVJIT_FMT_INCLUDE_DIRS fmt::fmt-header-only INTERFACE_INCLUDE_DIRECTORIES)
set(CONVJIT_DEPS_INCLUDE_DIRS
  ${XBYAK_INCLUDE_DIR} ${XXHASH_INCLUDE_DIR} ${NLOHMANN_JSON_INCLUDE_DIR} ${CONVJIT_FMT_INCLUDE_DIRS})
set(CONVJIT_DEPS_DEFINITIONS XXH_INLINE_ALL FMT_HEADER_ONLY=1)
add_library(convjit_deps INTERFACE)
target_include_directories(convjit_deps SYSTEM INTERFACE ${CONVJIT_DEPS_INCLUDE_DIRS})
target_compile_definitions(convjit_deps INTERFACE ${CONVJIT_DEPS_DEFINITIONS})
target_link_libraries(convjit_deps INTERFACE convjit_fmt)

# The CUDA backend needs the toolkit's headers (cuda.h, nvrtc.h) at build time only: NVRTC and
# the driver are opened at run time, so the library builds, loads and runs without a GPU.
find_package(CUDAToolkit QUIET)
option(CONVJIT_CUDA "Build the CUDA backend and its interpret mode (needs the CUDA toolkit's headers)"
       ${CUDAToolkit_FOUND})
if(CONVJIT_CUDA AND NOT CUDAToolkit_FOUND)
  message(FATAL_ERROR "CONVJIT_CUDA=ON needs the CUDA toolkit's headers (set CUDAToolkit_ROOT)")
endif()
if(CONVJIT_CUDA)
  message(STATUS "convjit: CUDA toolkit ${CUDAToolkit_VERSION} found: the CUDA backend builds")
else()
  message(STATUS "convjit: the CUDA backend is off (no toolkit, or -DCONVJIT_CUDA=OFF)")
endif()

# LLVM is not a build dependency: `convjit cache show` opens LLVM's shared library with dlopen
# when it disassembles, and says so when there is none.

find_package(dnnl CONFIG QUIET)
if(dnnl_FOUND)
  message(STATUS "convjit: oneDNN ${dnnl_VERSION} found: convjit-bench (against oneDNN) builds")
else()
  message(STATUS "convjit: oneDNN not found: convjit-bench is skipped")
endif()
