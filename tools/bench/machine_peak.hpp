// The host's arithmetic peak, measured when the benchmark starts: the "% peak" column divides
// by what this CPU reaches, not by a figure from another machine (the suite's reference host
// has AVX-512 at 117 GFLOP/s f32 per core; a 2 GHz AVX2 host reaches about a third of that).
#pragma once

#include <string>

#include "convjit/types.hpp"

namespace convjit::bench {

struct MachinePeak {
  double f32_per_core = 0;   // GFLOP/s of independent f32 FMA chains, ymm or zmm
  double bf16_per_core = 0;  // vdpbf16ps where the CPU has it, else the f32 figure
  // AMX's tdpbf16ps where the CPU has it and Linux grants the tile state, else 0: the rate
  // of the unit convjit's bfloat16 data gradients run on there.
  double amx_bf16_per_core = 0;
  std::string how;           // the instructions measured, e.g. "zmm vfmadd231ps, vdpbf16ps"
};

/// Runs independent FMA chains on `threads` threads at once (a few tens of milliseconds) and
/// returns GFLOP/s per core, counting an FMA lane as 2 FLOPs, a vdpbf16ps lane as 4 and a
/// tdpbf16ps as 16x16x32x2.
MachinePeak measure_machine_peak(int threads);

/// The peak per core of the unit a kernel named `kernel` multiplies `dtype` on: a bfloat16
/// kernel with paired output channels ("_dp2") or image pairs with x by channel ("_dp2t")
/// runs on AMX where the host has it, one with pairs on vdpbf16ps otherwise (and image pairs
/// interleaved only, "_dp2n", always), and one without widens to f32 FMAs.
double peak_for_kernel(const MachinePeak& peak, DType dtype, const std::string& kernel);

}  // namespace convjit::bench
