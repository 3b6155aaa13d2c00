// The device's arithmetic peak for the benchmark's "% peak" column: dense FLOPs per clock per
// SM of the unit each math mode runs on, by SM version, times SMs and the driver's maximum
// clock. A data-sheet figure, not a measurement: the targets divide by the measured
// rate of a large GEMM, which `docs/GPU.md` records beside it.
#pragma once

#include <string>

namespace convjit::bench::gpu {

/// The math a benchmark case runs in.
enum class PeakMath { kF16, kBF16, kTf32, kF32, kF64 };

/// Dense FLOPs per clock per SM (an FMA is 2) of the unit `math` runs on at `sm_major.minor`
/// (tensor cores for f16/bf16/tf32 and f64 where the SM has DMMA, FFMA for exact f32, the
/// FP64 units otherwise); 0 for an SM version the table does not know. 16-bit rates are with
/// f32 accumulation and are the data-center parts' (A10, L4): GeForce parts of sm_86/89/120
/// run f32 accumulation at half that, so their % peak reads low by 2x.
double flops_per_clock_per_sm(int sm_major, int sm_minor, PeakMath math);

/// TFLOP/s: SMs x clock x the rate above (0 when the table does not know the SM).
double peak_tflops(int sm_major, int sm_minor, int sm_count, double clock_mhz, PeakMath math);

/// "sm_90 H100-class: f16/bf16 4096, tf32 2048, f32 256, f64 256 FLOP/clk/SM".
std::string describe_peak_table(int sm_major, int sm_minor);

}  // namespace convjit::bench::gpu
