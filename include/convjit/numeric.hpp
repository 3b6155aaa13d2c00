// The 16-bit dtypes' scalar conversions (IEEE binary16 "half" and bfloat16, both stored as
// 16-bit words), rounding to nearest even: the ones convjit's kernels, reference and tools use,
// for callers that fill or read half and bfloat16 tensors. C++17.
#pragma once

#include <cstdint>

#include "convjit/types.hpp"

// libconvjit is compiled with hidden visibility; what this header declares is its exported API.
#pragma GCC visibility push(default)

namespace convjit {

/// binary16 bits to float (exact).
float half_to_float(std::uint16_t bits);
/// float to binary16 bits, rounded to nearest even; NaN stays NaN, overflow becomes infinity.
std::uint16_t float_to_half(float value);
/// bfloat16 bits to float (exact).
float bfloat16_to_float(std::uint16_t bits);
/// float to bfloat16 bits, rounded to nearest even; NaN stays NaN.
std::uint16_t float_to_bfloat16(float value);

/// Element `i` of a buffer of `dtype`, as double.
double load_as_double(DType dtype, const void* data, std::int64_t i);
/// Writes `value`, rounded once to `dtype`, into element `i`.
void store_from_double(DType dtype, void* data, std::int64_t i, double value);

}  // namespace convjit

#pragma GCC visibility pop
