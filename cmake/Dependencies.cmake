# Required dependencies fail the configure; optional ones are announced once and skipped.
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)

find_path(XBYAK_INCLUDE_DIR xbyak/xbyak.h REQUIRED)
find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_library(XXHASH_LIBRARY xxhash REQUIRED)
find_path(NLOHMANN_JSON_INCLUDE_DIR nlohmann/json.hpp REQUIRED)

# Header-only and plain C dependencies, bundled into one private interface target.
add_library(convjit_deps INTERFACE)
target_include_directories(convjit_deps SYSTEM INTERFACE
  ${XBYAK_INCLUDE_DIR} ${XXHASH_INCLUDE_DIR} ${NLOHMANN_JSON_INCLUDE_DIR})
target_link_libraries(convjit_deps INTERFACE ${XXHASH_LIBRARY})

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

# LLVM's version file accepts only an exact major.minor ("22" rejects 22.1), so find any LLVM,
# preferring the Debian/apt.llvm.org prefix of 22, and pin the major version here.
find_package(LLVM CONFIG QUIET HINTS /usr/lib/llvm-22)
if(LLVM_FOUND AND NOT LLVM_VERSION_MAJOR EQUAL 22)
  set(LLVM_FOUND FALSE)
endif()
if(LLVM_FOUND)
  message(STATUS "convjit: LLVM ${LLVM_PACKAGE_VERSION} found")
else()
  message(STATUS "convjit: LLVM 22 not found: LLVM backend and disassembly are skipped")
endif()

find_package(dnnl CONFIG QUIET)
if(dnnl_FOUND)
  message(STATUS "convjit: oneDNN ${dnnl_VERSION} found: the benchmark against it builds")
else()
  message(STATUS "convjit: oneDNN not found: the oneDNN benchmark is skipped")
endif()
