// The 16-bit conversions: exact values, round to nearest even, NaN/Inf, subnormals, and (where
// the CPU has F16C) agreement with the hardware's own float -> half conversion.
#include "convjit/numeric.hpp"

#include <gtest/gtest.h>
#include <cpuid.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace convjit {
namespace {

float bits_to_float(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint32_t float_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

bool half_is_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(std::uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

TEST(Numeric, HalfToFloatKnownValues) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x3555), 0x1.554p-2f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0400), 0x1p-14f);  // smallest normal
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(half_to_float(0x03ff), 1023.0f * 0x1p-24f);
  EXPECT_EQ(half_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7c01)));  // signalling NaN with the lowest payload
  EXPECT_EQ(float_bits(half_to_float(0x8000)), 0x80000000u);  // -0 keeps its sign
}

TEST(Numeric, HalfRoundTripsEveryValue) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const std::uint16_t back = float_to_half(half_to_float(half));
    if (half_is_nan(half)) {
      EXPECT_TRUE(half_is_nan(back)) << std::hex << h;
      EXPECT_EQ(back & 0x8000u, half & 0x8000u) << std::hex << h;
    } else {
      ASSERT_EQ(back, half) << std::hex << h;
    }
  }
}

TEST(Numeric, FloatToHalfRoundsToNearestEven) {
  // Ties between 1 and 1 + 2^-10 go to the even neighbour; anything above the tie rounds up.
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie between 0x3c01 and 0x3c02
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // tie with 2^16 rounds to infinity
  EXPECT_EQ(float_to_half(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  // Subnormals: 2^-25 is the tie between 0 and the smallest subnormal.
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);
  EXPECT_EQ(float_to_half(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(float_to_half(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(float_to_half(-0x1p-26f), 0x8000);
  EXPECT_EQ(float_to_half(1023.5f * 0x1p-24f), 0x0400);  // largest subnormal rounds up to normal
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);
  EXPECT_EQ(float_to_half(bits_to_float(0x00000001)), 0x0000);  // float subnormal
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
}

TEST(Numeric, FloatToHalfKeepsNaN) {
  // A NaN whose payload sits only in the low bits must not turn into infinity.
  for (std::uint32_t bits : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0xffffe000u}) {
    const std::uint16_t h = float_to_half(bits_to_float(bits));
    EXPECT_TRUE(half_is_nan(h)) << std::hex << bits;
    EXPECT_EQ(h & 0x8000u, (bits >> 16) & 0x8000u) << std::hex << bits;
  }
}

// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && ((ecx >> 29) & 1U) != 0;
}

__attribute__((target("f16c"))) std::uint16_t hardware_float_to_half(float f) {
  return static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(Numeric, FloatToHalfMatchesF16C) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "no F16C on this CPU";
  // Every tie and its neighbours: midpoints between consecutive halves are floats exactly.
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = half_to_float(static_cast<std::uint16_t>(h));
    const float hi = h + 1 == 0x7c00 ? 65536.0f : half_to_float(static_cast<std::uint16_t>(h + 1));
    const float mid = (lo + hi) / 2;
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), lo}) {
      for (float s : {f, -f}) {
        ASSERT_EQ(float_to_half(s), hardware_float_to_half(s)) << std::hexfloat << s;
      }
    }
  }
  // A spread of arbitrary bit patterns (NaNs included; the hardware quiets them the same way).
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
    const float f = bits_to_float(static_cast<std::uint32_t>(b));
    ASSERT_EQ(float_to_half(f), hardware_float_to_half(f)) << std::hex << b;
  }
}

TEST(Numeric, BFloat16KnownValues) {
  EXPECT_EQ(bfloat16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0xc040), -3.0f);
  EXPECT_EQ(bfloat16_to_float(0x0001), bits_to_float(0x00010000));  // subnormal kept
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(bits_to_float(0x3f808000)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(float_to_bfloat16(bits_to_float(0x3f818000)), 0x3f82);  // tie to even (up)
  EXPECT_EQ(float_to_bfloat16(bits_to_float(0x3f808001)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(float_to_bfloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bfloat16(bits_to_float(0x00008000)), 0x0000);  // subnormal tie to even
  EXPECT_EQ(float_to_bfloat16(bits_to_float(0x00018000)), 0x0002);
  EXPECT_EQ(float_to_bfloat16(bits_to_float(0x807fffff)), 0x8080);  // up into the normals
  for (std::uint32_t bits : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7f80ffffu}) {
    const std::uint16_t b = float_to_bfloat16(bits_to_float(bits));
    EXPECT_TRUE(bf16_is_nan(b)) << std::hex << bits;
    EXPECT_EQ(b & 0x8000u, (bits >> 16) & 0x8000u) << std::hex << bits;
  }
}

TEST(Numeric, BFloat16RoundTripsAndMatchesBitFormula) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto v = static_cast<std::uint16_t>(b);
    const std::uint16_t back = float_to_bfloat16(bfloat16_to_float(v));
    if (bf16_is_nan(v)) {
      EXPECT_TRUE(bf16_is_nan(back)) << std::hex << b;
    } else {
      ASSERT_EQ(back, v) << std::hex << b;
    }
  }
  // For non-NaN floats, round to nearest even is "add 0x7fff plus the kept lsb, truncate".
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 2053) {
    const auto bits = static_cast<std::uint32_t>(b);
    if (std::isnan(bits_to_float(bits))) continue;
    const auto expected = static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    ASSERT_EQ(float_to_bfloat16(bits_to_float(bits)), expected) << std::hex << bits;
  }
}

TEST(Numeric, StoreFromDoubleRoundsOnce) {
  // 1 + 2^-11 + 2^-40 is just above the half tie between 1 and 1 + 2^-10. Through float the
  // 2^-40 is lost, the value becomes the exact tie and rounds down to 1: a double rounding.
  const double above_tie = 1.0 + 0x1p-11 + 0x1p-40;
  std::uint16_t h = 0;
  store_from_double(DType::kHalf, &h, 0, above_tie);
  EXPECT_EQ(h, 0x3c01);
  EXPECT_EQ(float_to_half(static_cast<float>(above_tie)), 0x3c00);

  const double above_bf16_tie = 1.0 + 0x1p-8 + 0x1p-40;
  std::uint16_t b = 0;
  store_from_double(DType::kBFloat16, &b, 0, above_bf16_tie);
  EXPECT_EQ(b, 0x3f81);

  // Double values below float's range still reach the right 16-bit subnormal or zero.
  store_from_double(DType::kHalf, &h, 0, 0x1p-24 * (1.0 + 0x1p-45));
  EXPECT_EQ(h, 0x0001);
  store_from_double(DType::kBFloat16, &b, 0, 1e-300);
  EXPECT_EQ(b, 0x0000);
  store_from_double(DType::kBFloat16, &b, 0, 1e300);
  EXPECT_EQ(b, 0x7f80);
}

TEST(Numeric, LoadAndStoreEveryDtype) {
  std::uint16_t halves[3] = {};
  float floats[3] = {};
  double doubles[3] = {};
  const double values[3] = {0.5, -1.75, 3.0};
  for (int i = 0; i < 3; ++i) {
    store_from_double(DType::kHalf, halves, i, values[i]);
    store_from_double(DType::kFloat32, floats, i, values[i]);
    store_from_double(DType::kFloat64, doubles, i, values[i]);
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(load_as_double(DType::kHalf, halves, i), values[i]);
    EXPECT_EQ(load_as_double(DType::kFloat32, floats, i), values[i]);
    EXPECT_EQ(load_as_double(DType::kFloat64, doubles, i), values[i]);
  }
  std::uint16_t bf[2] = {};
  store_from_double(DType::kBFloat16, bf, 1, -0.15625);
  EXPECT_EQ(bf[0], 0);
  EXPECT_EQ(load_as_double(DType::kBFloat16, bf, 1), -0.15625);
  store_from_double(DType::kFloat32, floats, 0, 0.1);
  EXPECT_EQ(floats[0], 0.1f);
}

}  // namespace
}  // namespace convjit
