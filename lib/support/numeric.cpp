// The 16-bit dtypes' conversions (convjit/numeric.hpp). Every narrowing goes through one routine that rounds a
// double straight to the target format, so storing a double into half or bfloat16 rounds once
// (double -> float -> half would round twice and can miss round-to-nearest-even).
#include "convjit/numeric.hpp"

#include <bit>
#include <cstring>

namespace convjit {
namespace {

/// An IEEE-style binary format narrower than double: `mantissa_bits` stored fraction bits and
/// `exponent_bits` exponent bits, sign in the top bit of a 16-bit word.
struct NarrowFormat {
  int mantissa_bits;
  int exponent_bits;
};

constexpr NarrowFormat kHalfFormat{10, 5};
constexpr NarrowFormat kBFloat16Format{7, 8};

/// Rounds `value` to nearest, ties to even, in `format`. NaN stays NaN (quieted, sign and top
/// payload bits kept), overflow goes to infinity, tiny values become subnormals or signed zero.
std::uint16_t round_to_narrow(double value, NarrowFormat format) {
  const auto bits = std::bit_cast<std::uint64_t>(value);
  const int m = format.mantissa_bits;
  const auto sign = static_cast<std::uint32_t>(bits >> 63) << (m + format.exponent_bits);
  const auto exp_field = static_cast<int>((bits >> 52) & 0x7ff);
  const std::uint64_t fraction = bits & ((std::uint64_t{1} << 52) - 1);
  const std::uint32_t exp_all_ones = ((1u << format.exponent_bits) - 1) << m;

  if (exp_field == 0x7ff) {
    if (fraction == 0) return static_cast<std::uint16_t>(sign | exp_all_ones);  // infinity
    const auto payload = static_cast<std::uint32_t>(fraction >> (52 - m));
    const std::uint32_t quiet = 1u << (m - 1);
    return static_cast<std::uint16_t>(sign | exp_all_ones | quiet | payload);
  }
  // Zero and double subnormals (below 2^-1022) are far below either format's smallest subnormal.
  if (exp_field == 0) return static_cast<std::uint16_t>(sign);

  const int bias = (1 << (format.exponent_bits - 1)) - 1;
  const int e = exp_field - 1023;
  const std::uint64_t significand = fraction | (std::uint64_t{1} << 52);  // value = sig * 2^(e-52)
  if (e > bias) return static_cast<std::uint16_t>(sign | exp_all_ones);

  // Both branches compute `kept` = the significand scaled to the target's last place, then round
  // on the dropped bits. A carry out of the fraction moves into the exponent, which is exactly
  // right (it also turns the largest finite value into infinity and the largest subnormal into
  // the smallest normal).
  int shift = 0;
  std::uint32_t base = 0;
  const int emin = 1 - bias;
  if (e >= emin) {
    shift = 52 - m;
    base = static_cast<std::uint32_t>(e + bias) << m;
  } else {
    shift = 52 - m + (emin - e);
    // Below half the smallest subnormal: rounds to zero (the exact half is handled below).
    if (shift > 53) return static_cast<std::uint16_t>(sign);
  }
  std::uint64_t kept = significand >> shift;
  const std::uint64_t dropped = significand & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t halfway = std::uint64_t{1} << (shift - 1);
  if (e >= emin) kept &= (std::uint64_t{1} << m) - 1;  // the implicit bit lives in `base`
  std::uint32_t result = base + static_cast<std::uint32_t>(kept);
  if (dropped > halfway || (dropped == halfway && (result & 1u) != 0)) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

}  // namespace

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return (sign != 0) ? -magnitude : magnitude;
  }
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

std::uint16_t float_to_half(float f) {
  return round_to_narrow(static_cast<double>(f), kHalfFormat);
}

float bfloat16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

std::uint16_t float_to_bfloat16(float f) {
  return round_to_narrow(static_cast<double>(f), kBFloat16Format);
}

double load_as_double(DType dtype, const void* data, std::int64_t i) {
  switch (dtype) {
    case DType::kHalf:
      return half_to_float(static_cast<const std::uint16_t*>(data)[i]);
    case DType::kBFloat16:
      return bfloat16_to_float(static_cast<const std::uint16_t*>(data)[i]);
    case DType::kFloat32:
      return static_cast<const float*>(data)[i];
    case DType::kFloat64:
      return static_cast<const double*>(data)[i];
  }
  return 0.0;
}

void store_from_double(DType dtype, void* data, std::int64_t i, double value) {
  switch (dtype) {
    case DType::kHalf:
      static_cast<std::uint16_t*>(data)[i] = round_to_narrow(value, kHalfFormat);
      return;
    case DType::kBFloat16:
      static_cast<std::uint16_t*>(data)[i] = round_to_narrow(value, kBFloat16Format);
      return;
    case DType::kFloat32:
      static_cast<float*>(data)[i] = static_cast<float>(value);
      return;
    case DType::kFloat64:
      static_cast<double*>(data)[i] = value;
      return;
  }
}

}  // namespace convjit
