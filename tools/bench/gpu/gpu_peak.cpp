#include "tools/bench/gpu/gpu_peak.hpp"

#include <fmt/format.h>

namespace convjit::bench::gpu {
namespace {

struct SmRates {
  int major, minor;
  const char* parts;
  double f16, tf32, f32, f64;  // dense FLOP/clk/SM; f16 stands for bf16 too
};

// From NVIDIA's architecture white papers (A100, GA102, AD102, H100, Blackwell) and the CUDA
// programming guide's arithmetic-throughput table: e.g. A100 312 TFLOP/s f16 = 108 SMs x
// 1.41 GHz x 2048; H100 SXM 989 = 132 x 1.83 x 4096.
constexpr SmRates kRates[] = {
    {7, 0, "V100-class", 1024, 0, 128, 64},     {7, 5, "T4-class", 1024, 0, 128, 4},
    {8, 0, "A100-class", 2048, 1024, 128, 128}, {8, 6, "A10/RTX 30-class", 1024, 512, 256, 4},
    {8, 7, "Orin-class", 1024, 512, 256, 4},    {8, 9, "L4/L40/RTX 40-class", 1024, 512, 256, 4},
    {9, 0, "H100-class", 4096, 2048, 256, 256}, {10, 0, "B200-class", 8192, 4096, 256, 128},
    {12, 0, "RTX 50-class", 1024, 512, 256, 4},
};

const SmRates* find_rates(int major, int minor) {
  for (const SmRates& r : kRates) {
    if (r.major == major && r.minor == minor) return &r;
  }
  return nullptr;
}

}  // namespace

double flops_per_clock_per_sm(int sm_major, int sm_minor, PeakMath math) {
  const SmRates* r = find_rates(sm_major, sm_minor);
  if (r == nullptr) return 0;
  switch (math) {
    case PeakMath::kF16:
    case PeakMath::kBF16:
      // Volta's tensor cores have no bf16.
      return math == PeakMath::kBF16 && sm_major < 8 ? 0 : r->f16;
    case PeakMath::kTf32:
      return r->tf32;
    case PeakMath::kF32:
      return r->f32;
    case PeakMath::kF64:
      return r->f64;
  }
  return 0;
}

double peak_tflops(int sm_major, int sm_minor, int sm_count, double clock_mhz, PeakMath math) {
  return flops_per_clock_per_sm(sm_major, sm_minor, math) * sm_count * clock_mhz * 1e6 * 1e-12;
}

std::string describe_peak_table(int sm_major, int sm_minor) {
  const SmRates* r = find_rates(sm_major, sm_minor);
  if (r == nullptr) {
    return fmt::format("sm_{}{}: not in the peak table (no % peak)", sm_major, sm_minor);
  }
  return fmt::format("sm_{}{} {}: f16/bf16 {:g}, tf32 {:g}, f32 {:g}, f64 {:g} FLOP/clk/SM",
                     sm_major, sm_minor, r->parts, r->f16, r->tf32, r->f32, r->f64);
}

}  // namespace convjit::bench::gpu
