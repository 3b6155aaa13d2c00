#include "guarded_tensor.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace convjit::fuzz {
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

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// float -> bfloat16, round to nearest even; NaN stays a (quiet) NaN.
std::uint16_t to_bf16(float f) {
  std::uint32_t u = bits_of(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16(std::uint16_t b) { return float_of(static_cast<std::uint32_t>(b) << 16); }

// float -> IEEE half, round to nearest even, with subnormals, Inf and NaN.
std::uint16_t to_half(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000);
  const float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>(sign | 0x7E00);
  if (a >= 65520.0f) return static_cast<std::uint16_t>(sign | 0x7C00);  // rounds to Inf
  if (a < 0x1p-14f) {
    // Subnormal: a multiple of 2^-24, rounded to nearest even by the FPU's default mode.
    const float scaled = std::nearbyint(a * 0x1p24f);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(scaled));
  }
  const std::uint32_t ua = bits_of(a);
  std::uint32_t mantissa = ua & 0x7FFFFF;
  std::int32_t exponent = static_cast<std::int32_t>(ua >> 23) - 127 + 15;
  // Keep 10 bits, round to nearest even on the 13 dropped.
  std::uint32_t half = (static_cast<std::uint32_t>(exponent) << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1) != 0)) ++half;  // may carry into Inf
  return static_cast<std::uint16_t>(sign | half);
}

float from_half(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1F;
  const std::uint32_t mantissa = h & 0x3FF;
  if (exponent == 0) {
    const float value = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -value : value;
  }
  if (exponent == 31) return float_of(sign | 0x7F800000 | (mantissa << 13));
  return float_of(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

}  // namespace

double load_element(DType dtype, const void* data, std::int64_t i) {
  switch (dtype) {
    case DType::kHalf:
      return from_half(static_cast<const std::uint16_t*>(data)[i]);
    case DType::kBFloat16:
      return from_bf16(static_cast<const std::uint16_t*>(data)[i]);
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, static_cast<const char*>(data) + 4 * i, 4);
      return f;
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, static_cast<const char*>(data) + 8 * i, 8);
      return d;
    }
  }
  return 0;
}

void store_element(DType dtype, void* data, std::int64_t i, double value) {
  switch (dtype) {
    case DType::kHalf: {
      const std::uint16_t h = to_half(static_cast<float>(value));
      std::memcpy(static_cast<char*>(data) + 2 * i, &h, 2);
      return;
    }
    case DType::kBFloat16: {
      const std::uint16_t b = to_bf16(static_cast<float>(value));
      std::memcpy(static_cast<char*>(data) + 2 * i, &b, 2);
      return;
    }
    case DType::kFloat32: {
      const float f = static_cast<float>(value);
      std::memcpy(static_cast<char*>(data) + 4 * i, &f, 4);
      return;
    }
    case DType::kFloat64:
      std::memcpy(static_cast<char*>(data) + 8 * i, &value, 8);
      return;
  }
}

GuardedTensor::GuardedTensor(DType dtype, std::vector<std::int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  elements_ = 1;
  for (std::int64_t d : shape_) elements_ *= d;
  const std::size_t bytes = static_cast<std::size_t>(elements_) * size_of(dtype_);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t data_pages = (bytes + page - 1) / page * page;
  mapped_ = data_pages + page;
  base_ = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base_ == MAP_FAILED) {
    std::perror("fuzz_kernels: mmap");
    std::abort();
  }
  char* guard = static_cast<char*>(base_) + data_pages;
  if (::mprotect(guard, page, PROT_NONE) != 0) {
    std::perror("fuzz_kernels: mprotect");
    std::abort();
  }
  data_ = guard - bytes;
}

GuardedTensor::~GuardedTensor() { ::munmap(base_, mapped_); }

double GuardedTensor::get(std::int64_t i) const { return load_element(dtype_, data_, i); }

void GuardedTensor::set(std::int64_t i, double value) { store_element(dtype_, data_, i, value); }

}  // namespace convjit::fuzz
