// Peak measurement: each thread runs independent accumulator chains, at least the FMA
// latency times the FMA ports of any current x86 core and few enough to stay in registers
// (12 of AVX2's 16, 16 of AVX-512's 32), so the ports, not the chains, bound the rate. The
// functions carry their own target attributes and run only where the CPU has the instructions.
#include "tools/bench/machine_peak.hpp"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "codegen/cpu/cpu_info.hpp"

namespace convjit::bench {
namespace {

constexpr int kYmmChains = 12;
constexpr int kZmmChains = 16;
constexpr long kIterations = 1'000'000;

// Each returns the FLOPs it did; `sink` keeps the results alive.
__attribute__((target("avx2,fma"))) double fma_ymm(long iterations, float* sink) {
  __m256 acc[kYmmChains];
  for (auto& a : acc) a = _mm256_setzero_ps();
  const __m256 x = _mm256_set1_ps(1.0f), y = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i) {
    for (auto& a : acc) a = _mm256_fmadd_ps(x, y, a);
  }
  __m256 s = acc[0];
  for (int c = 1; c < kYmmChains; ++c) s = _mm256_add_ps(s, acc[c]);
  _mm256_storeu_ps(sink, s);
  return 2.0 * 8 * kYmmChains * static_cast<double>(iterations);
}

__attribute__((target("avx512f"))) double fma_zmm(long iterations, float* sink) {
  __m512 acc[kZmmChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iterations; ++i) {
    for (auto& a : acc) a = _mm512_fmadd_ps(x, y, a);
  }
  __m512 s = acc[0];
  for (int c = 1; c < kZmmChains; ++c) s = _mm512_add_ps(s, acc[c]);
  _mm512_storeu_ps(sink, s);
  return 2.0 * 16 * kZmmChains * static_cast<double>(iterations);
}

__attribute__((target("avx512f,avx512bf16"))) double dp_bf16(long iterations, float* sink) {
  __m512 acc[kZmmChains];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);  // bfloat16 1.0
  const __m512bh y = (__m512bh)_mm512_set1_epi16(0x3400);  // bfloat16 2^-23
  for (long i = 0; i < iterations; ++i) {
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, x, y);
  }
  __m512 s = acc[0];
  for (int c = 1; c < kZmmChains; ++c) s = _mm512_add_ps(s, acc[c]);
  _mm512_storeu_ps(sink, s);
  return 4.0 * 16 * kZmmChains * static_cast<double>(iterations);
}

// AMX (Sapphire Rapids and later Xeons): tdpbf16ps multiplies a 16x32 bfloat16 tile by a
// 32x16 one (pairs interleaved) into a 16x16 f32 tile, 16384 FLOPs an instruction. Four
// accumulator tiles fed by two A and two B tiles keep the unit busy past the instruction's
// latency; the operand tiles are loaded once, so the figure is the unit's rate, not memory's.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

__attribute__((target("amx-tile,amx-bf16"))) double amx_bf16(long iterations, float* sink) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
  alignas(64) std::uint16_t operand[16 * 32];
  for (auto& v : operand) v = 0x3400;  // bfloat16 2^-23: the sums stay finite
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  // A tenth of the FMA loops' count: one instruction here is 32 zmm vdpbf16ps.
  const long steps = iterations / 10;
  for (long i = 0; i < steps; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  sink[0] = out[0];
  return 4.0 * 16 * 16 * 32 * 2 * static_cast<double>(steps);
}

// GFLOP/s per core of `kernel` on `threads` threads at once, best of seven runs: on a shared
// virtual machine one thread is now and then descheduled for tens of milliseconds, and three
// runs of about 15 ms each once all came out at half the two-thread rate.
double per_core(int threads, double (*kernel)(long, float*)) {
  double best = 0;
  for (int run = 0; run < 7; ++run) {
    std::vector<double> flops(static_cast<std::size_t>(threads));
    std::vector<std::vector<float>> sinks(static_cast<std::size_t>(threads),
                                          std::vector<float>(16));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        flops[static_cast<std::size_t>(t)] =
            kernel(kIterations, sinks[static_cast<std::size_t>(t)].data());
      });
    }
    for (std::thread& t : pool) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / s / 1e9 / threads);
  }
  return best;
}

}  // namespace

MachinePeak measure_machine_peak(int threads) {
  threads = std::max(threads, 1);
  __builtin_cpu_init();
  MachinePeak peak;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return peak;
  peak.f32_per_core = per_core(threads, fma_ymm);
  peak.how = "ymm vfmadd231ps";
  if (__builtin_cpu_supports("avx512f")) {
    const double zmm = per_core(threads, fma_zmm);
    if (zmm > peak.f32_per_core) {
      peak.f32_per_core = zmm;
      peak.how = "zmm vfmadd231ps";
    }
  }
  peak.bf16_per_core = peak.f32_per_core;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16")) {
    peak.bf16_per_core = per_core(threads, dp_bf16);
    peak.how += ", zmm vdpbf16ps";
  } else {
    peak.how += " (bfloat16 converts to f32 FMAs)";
  }
  if (cpu::amx_bf16_usable()) {  // the tile state granted as for convjit's own AMX tiles
    peak.amx_bf16_per_core = per_core(threads, amx_bf16);
    peak.how += ", AMX tdpbf16ps";
  }
  return peak;
}

double peak_for_kernel(const MachinePeak& peak, DType dtype, const std::string& kernel) {
  if (dtype != DType::kBFloat16) return peak.f32_per_core;
  const std::size_t at = kernel.find("_dp2");
  if (at == std::string::npos) return peak.f32_per_core;
  const bool amx_layouts = kernel.compare(at, 5, "_dp2n") != 0;  // "_dp2" and "_dp2t"
  return amx_layouts && peak.amx_bf16_per_core > 0 ? peak.amx_bf16_per_core : peak.bf16_per_core;
}

}  // namespace convjit::bench
