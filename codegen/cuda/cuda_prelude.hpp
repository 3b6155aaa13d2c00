// The NVRTC prelude: the definitions of the small portable layer every generated kernel is
// written against (memory accessors, 16-bit float types, mma.sync, ldmatrix, cp.async,
// shuffles). The interpret mode defines the same names for the host
// (runtime/cuda/interpret/cuda_host_prelude.hpp); nothing of it reaches the NVRTC source.
#pragma once

#include <string_view>

namespace convjit::codegen {

/// CUDA C++ placed before every generated kernel body for NVRTC. No #include: NVRTC ships no
/// cuda_fp16.h, so the conversions are written here in PTX.
std::string_view nvrtc_prelude();

/// A version stamp of the portable layer's interface (bumped when a name is added or its
/// meaning changes); the host prelude states the same number and the interpreter checks it.
inline constexpr int kPortableLayerVersion = 1;

}  // namespace convjit::codegen
