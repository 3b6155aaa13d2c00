// What the CPU planner's files share: the rules for each part of a CpuPlan (one file per op
// family) and the facts about the core they read.
#pragma once

#include <cstdint>

#include "codegen/cpu/cpu_plan.hpp"
#include "ir/ir.hpp"

namespace convjit::cpu {

/// Threads worth using for `problem`: max_threads, or 1 when the estimated serial time saved
/// by splitting is below the cost of waking the pool's threads a few times.
int useful_threads(const ConvProblem& problem, int max_threads);

/// Whether `cpu` multiplies `dtype` by widening it to f32 (f16 always, bf16 where the core has
/// no `vdpbf16ps` or runs it slower than f32 FMAs, CpuInfo::uses_bf16_dot): an operand copy
/// the tiles read vectors from then writes f32.
bool widens_to_f32(DType dtype, const CpuInfo& cpu);

/// Whether a bfloat16 data gradient's packed filter can take its output channels in pairs
/// for `cpu` (vdpbf16ps, or AMX: CpuInfo::pairs_bf16_data_gradient): a whole number of pairs
/// per group. The plan pairs them where the tiles also read the packed filter as vectors.
bool pairs_output_channels(const ConvProblem& problem, const CpuInfo& cpu);

/// The tile model of bfloat16 tiles that take their reduction in pairs: AMX's where the core
/// has it, vdpbf16ps' (two points an instruction) otherwise.
TileModel paired_bf16_tiles(const CpuInfo& cpu);

/// Whether the op's output is larger than the core's last-level cache: its stores then go to
/// memory, and whole-line non-temporal stores pay.
bool output_outgrows_llc(const ConvProblem& problem, const CpuInfo& cpu);

/// Whether an NCHW forward, input-gradient or depthwise filter-gradient problem runs the NHWC
/// schedule on channels-last copies of its activations (the copies cost less than NCHW's tiles
/// lose).
bool wants_channels_last_copies(const ConvProblem& problem, const CpuInfo& cpu);

/// The input gradient's decisions (layout, copies, packing, blocks, pairs); returns the
/// problem as the schedule sees it after those decisions (NHWC behind channels-last copies).
ConvProblem plan_data_gradient(const ConvProblem& problem, CpuPlan& plan);

/// The filter gradient's decisions (its reduction's blocking and split, operand copies).
void plan_filter_gradient(const ConvProblem& problem, CpuPlan& plan);

}  // namespace convjit::cpu
