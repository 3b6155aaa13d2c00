// Moving operand data between .npy arrays, convjit tensors of the op's dtype and random fills
// (the 16-bit conversions are the public convjit/numeric.hpp's).
#pragma once

#include <cstdint>

#include "convjit/convjit.hpp"
#include "tools/npy.hpp"

namespace convjit::cli {

/// The array converted to an op tensor of `dtype` (same shape; bfloat16 and narrower types are
/// rounded on load).
Tensor tensor_from_npy(const NpyArray& array, DType dtype);
/// The tensor as a .npy array: half stays float16, bfloat16 widens to float32 (NumPy has no
/// bfloat16), float32 and float64 stay as they are.
NpyArray npy_from_tensor(const Tensor& tensor);
/// The .npy element type that naturally holds `dtype`.
NpyDType npy_dtype_for(DType dtype);

/// Fills the tensor with reproducible uniform values in [-1, 1) from `seed`.
void fill_random(Tensor& tensor, std::uint64_t seed);

}  // namespace convjit::cli
