#include "tools/bench/bench_tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace convjit::bench {
namespace {

std::size_t size_of(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
    case DType::kBFloat16:
      return 2;
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
  }
  return 4;
}

// Exact conversions for the values fill_random writes (k / 128, |k| <= 128) and back.
std::uint16_t grid_to_half(int k) {
  if (k == 0) return 0;
  const std::uint16_t sign = k < 0 ? 0x8000 : 0;
  int a = k < 0 ? -k : k;
  int exponent = 0;  // a / 128 = m * 2^(exponent), 1 <= m < 2
  while (a >= 256) a >>= 1, ++exponent;
  int e = 0;
  while ((a << e) < 128) ++e;
  const int scaled = a << e;  // in [128, 256)
  const int biased = 15 - e + exponent;
  const int mantissa = (scaled - 128) << 3;  // 7 fraction bits into 10
  return static_cast<std::uint16_t>(sign | (biased << 10) | mantissa);
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1F;
  const std::uint32_t mantissa = h & 0x3FF;
  std::uint32_t bits;
  if (exponent == 0) {
    const float value = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -value : value;
  }
  if (exponent == 31) {
    bits = sign | 0x7F800000 | (mantissa << 13);
  } else {
    bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

BenchTensor::BenchTensor(DType dtype, std::vector<std::int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  elements_ = 1;
  for (std::int64_t d : shape_) elements_ *= d;
  bytes_.resize(static_cast<std::size_t>(elements_) * size_of(dtype_));
}

double BenchTensor::get(std::int64_t i) const {
  const std::byte* p = bytes_.data() + static_cast<std::size_t>(i) * size_of(dtype_);
  switch (dtype_) {
    case DType::kHalf: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return half_to_float(h);
    }
    case DType::kBFloat16: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
  }
  return 0;
}

void BenchTensor::fill_random(std::mt19937& rng) {
  std::uniform_int_distribution<int> grid(-128, 128);
  for (std::int64_t i = 0; i < elements_; ++i) {
    const int k = grid(rng);
    std::byte* p = bytes_.data() + static_cast<std::size_t>(i) * size_of(dtype_);
    const float f = static_cast<float>(k) / 128.0f;
    switch (dtype_) {
      case DType::kHalf: {
        const std::uint16_t h = grid_to_half(k);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        std::uint32_t bits;
        std::memcpy(&bits, &f, 4);
        const auto b = static_cast<std::uint16_t>(bits >> 16);  // exact: 8 significant bits
        std::memcpy(p, &b, 2);
        break;
      }
      case DType::kFloat32:
        std::memcpy(p, &f, 4);
        break;
      case DType::kFloat64: {
        const double d = f;
        std::memcpy(p, &d, 8);
        break;
      }
    }
  }
}

double relative_error(const BenchTensor& got, const BenchTensor& want) {
  double max_diff = 0, max_ref = 0;
  for (std::int64_t i = 0; i < want.elements(); ++i) {
    max_diff = std::max(max_diff, std::fabs(got.get(i) - want.get(i)));
    max_ref = std::max(max_ref, std::fabs(want.get(i)));
  }
  return max_diff / std::max(max_ref, 1e-30);
}

}  // namespace convjit::bench
