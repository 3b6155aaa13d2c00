// Helpers the CPU schedule passes share that depend on the CPU or on how the CPU schedule splits
// work: thread counts worth using, partial sums, the widening decision.
#pragma once

#include <cstdint>

#include "codegen/cpu/cpu_info.hpp"
#include "ir/ir.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {

/// Whether the op's output is larger than the target's last-level cache: its stores then go to
/// memory, and whole-line non-temporal stores pay (stream_output_stores).
bool output_outgrows_llc(const ir::LoopNest& nest, const CpuInfo& cpu);

/// Threads worth using for `problem`: max_threads, or 1 when the estimated serial time
/// saved by splitting is below the cost of waking the pool's threads a few times.
int useful_threads(const ConvProblem& problem, int max_threads);

/// Filter gradients split into chunks (threads): scratch [chunk][kh][kw][i][o] of the
/// accumulator dtype for each chunk's partial sums.
int add_partial_buffer(ir::LoopNest& nest, std::int64_t chunks);

/// dW = the sum over chunks of partial[chunk] (buffer `pb`), rounded into dW once:
/// for kh, kw, i, o: { for c in [1, chunks): partial[0] += partial[c]; dw = partial[0] }.
ir::Stmt sum_partials(ir::LoopNest& nest, int pb, std::int64_t chunks);

/// Whether the target multiplies `dtype` by widening it to f32 (f16 always, bf16 without
/// avx512_bf16's `vdpbf16ps`): an operand copy the tiles read vectors from then writes f32.
bool widens_to_f32(DType dtype, const CpuInfo& cpu);

}  // namespace convjit::cpu
