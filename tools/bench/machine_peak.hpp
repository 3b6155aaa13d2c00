// The host's arithmetic peak, measured when the benchmark starts: the "% peak" column divides
// by what this CPU reaches, not by a figure from another machine (the suite's reference host
// has AVX-512 at 117 GFLOP/s f32 per core; a 2 GHz AVX2 host reaches about a third of that).
#pragma once

#include <string>

namespace convjit::bench {

struct MachinePeak {
  double f32_per_core = 0;   // GFLOP/s of independent f32 FMA chains, ymm or zmm
  double bf16_per_core = 0;  // vdpbf16ps where the CPU has it, else the f32 figure
  // AMX's tdpbf16ps where the CPU has it and Linux grants the tile state, else 0: the rate
  // the host's bfloat16 matrix unit reaches, which convjit's kernels (vdpbf16ps) do not use.
  double amx_bf16_per_core = 0;
  std::string how;           // the instructions measured, e.g. "zmm vfmadd231ps, vdpbf16ps"
};

/// Runs independent FMA chains on `threads` threads at once (a few tens of milliseconds) and
/// returns GFLOP/s per core, counting an FMA lane as 2 FLOPs, a vdpbf16ps lane as 4 and a
/// tdpbf16ps as 16x16x32x2.
MachinePeak measure_machine_peak(int threads);

}  // namespace convjit::bench
