// Builders the CPU schedule passes share beyond the IR's own: a filter gradient's per-chunk
// partial sums and their final reduction.
#pragma once

#include <cstdint>

#include "ir/ir.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {

/// Filter gradients split into chunks (threads): scratch [chunk][kh][kw][i][o] of the
/// accumulator dtype for each chunk's partial sums.
int add_partial_buffer(ir::LoopNest& nest, std::int64_t chunks);

/// dW = the sum over chunks of partial[chunk] (buffer `pb`), rounded into dW once:
/// for kh, kw, i, o: { for c in [1, chunks): partial[0] += partial[c]; dw = partial[0] }.
ir::Stmt sum_partials(ir::LoopNest& nest, int pb, std::int64_t chunks);

}  // namespace convjit::cpu
