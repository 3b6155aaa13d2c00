// Software prefetch of a tile's next row group. A register tile reads its per-row operand (dy's
// pixels in an input gradient, one broadcast per row and reduction point) as `rows` streams one
// row stride apart, each advancing a few bytes per reduction point. The hardware prefetchers
// follow sequential and strided streams, not this interleave of many: each time the rows cross
// into new lines all of them miss at once. Where the operand stays in this core's L2 between
// its uses that costs an L2 hit per line; where it does not, each crossing waits on L3 or
// memory, and MobileNetV2's 56x56 expand layer (14 rows of 576 bytes, dy 14 MB at batch 8) ran
// at 36% of the FMA peak. Tiles whose per-row operand outgrows the L2 are marked; the backend
// then fetches, while a row group computes, the lines the next row group (the same offsets
// `rows` rows further) will read. Operands that fit keep the prefetch's load slots free: on
// 7x7 layers whose dy fits, the prefetches cost 1-3%. Nor are rows prefetched whose lines
// would crowd L1's sets: rows a multiple of a way's span apart (4 KiB: 1024 float channels)
// share one set, and the next group's lines evicted the current group's (UNet's 2x2 stride-2
// up-convolution, 6 rows of 1024 channels, AVX2 code: 0.76x). The current and next groups'
// lines may take half of each set they map to.
//
// A filter gradient's tile reads both operands the other way round: x's channels (one
// broadcast per row) and dy's (the columns' vectors) each lie in a line or a few, and each
// reduction point (pixel) is new lines, so the tiles of a block of pixels (a row chunk) sweep
// that block's lines once for every few rows or column groups of channels. The first sweep of
// a block misses on each line, in a stride (1 KiB at 256 channels) the prefetchers do not run
// ahead of: ResNet-50's 56x56 1x1 layers' filter gradients ran at 69-75% of the FMA peak.
// Where an operand taking a line per point outgrows L2, each tile prefetches, at every point,
// the lines it reads at the same point of the next block (the nearest enclosing loop whose
// next iteration moves past every point the tile's reduction reads), so a block's lines are
// in the caches when its sweeps begin. Both operands' prefetches together measured best
// (x's alone left r50_l1_1x1_64_256, whose dy takes 1 KiB a pixel, at 76%; dy's alone lost
// 2-5% against both).
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "codegen/cpu/passes/passes.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {

using namespace ir;

namespace {

// The element distance to the same point of the next block for operand `x` of tile `t`
// inside `loops` (outer first), or 0 where x does not take a line per reduction point from
// beyond L2, or no enclosing loop moves past the points it reads.
std::int64_t next_block_distance(const LoopNest& nest, const Tile& t, const Access& x,
                                 const std::vector<const Loop*>& loops, const CpuPlan& plan) {
  Affine offset;
  if (t.paired || t.reduce.empty() || !flatten_access(nest, x, &offset)) return 0;
  const Buffer& buf = nest.buffers[static_cast<std::size_t>(x.buffer)];
  const std::int64_t eb = dtype_size(buf.dtype);
  const ReduceLoop& inner = t.reduce.back();
  const std::int64_t point_bytes = std::llabs(offset.coef_of(inner.var) * inner.step) * eb;
  if (buf.kind == BufferKind::kScratch || point_bytes < CpuInfo::kCacheLineBytes ||
      buf.elements() * eb <= plan.cpu.l2_bytes) {
    return 0;
  }
  // The elements between the first and last points the reduction reads.
  std::int64_t span = 0;
  for (const ReduceLoop& r : t.reduce) {
    const std::int64_t trip = r.end > r.begin ? (r.end - r.begin + r.step - 1) / r.step : 0;
    span += std::llabs(offset.coef_of(r.var) * r.step) * std::max<std::int64_t>(trip - 1, 0);
  }
  for (auto l = loops.rbegin(); l != loops.rend(); ++l) {
    const std::int64_t distance = offset.coef_of((*l)->var) * (*l)->step;
    if ((*l)->trip_count() < 2 || std::llabs(distance) <= span) continue;
    return std::llabs(distance) * eb <= INT32_MAX / 2 ? distance : 0;
  }
  return 0;
}

void mark_next_blocks(const LoopNest& nest, std::vector<Stmt>& body,
                      std::vector<const Loop*>& loops, const CpuPlan& plan) {
  for (Stmt& s : body) {
    if (auto* l = std::get_if<Loop>(&s.node)) {
      loops.push_back(l);
      mark_next_blocks(nest, l->body, loops, plan);
      loops.pop_back();
    } else if (auto* t = std::get_if<Tile>(&s.node)) {
      // Outer-product tiles (a's rows broadcast, b's columns vectors) whose broadcast streams:
      // depthwise tiles (vectors on both sides) and a 3-channel stem's (b alone a line per
      // pixel) measured 5-30% slower prefetching.
      Affine a_offset;
      const bool outer_product =
          flatten_access(nest, t->a, &a_offset) && a_offset.coef_of(t->col_var) == 0;
      t->prefetch_next_block_a =
          outer_product ? next_block_distance(nest, *t, t->a, loops, plan) : 0;
      t->prefetch_next_block_b =
          t->prefetch_next_block_a != 0 ? next_block_distance(nest, *t, t->b, loops, plan) : 0;
    }
  }
}

}  // namespace

LoopNest prefetch_streamed_rows(LoopNest nest, const CpuPlan& plan) {
  if (!plan.prefetch_streamed_rows) return nest;
  auto streamed_rows = [&](const Tile& t, const Access& x) {
    Affine offset;
    if (!flatten_access(nest, x, &offset)) return false;
    const Buffer& buf = nest.buffers[static_cast<std::size_t>(x.buffer)];
    const std::int64_t eb = dtype_size(buf.dtype);
    // One broadcast per row (no column lanes), rows in different lines, a buffer beyond L2.
    const std::int64_t row_bytes = offset.coef_of(t.row_var) * eb;
    if (offset.coef_of(t.col_var) != 0 || row_bytes < CpuInfo::kCacheLineBytes ||
        buf.elements() * eb <= plan.cpu.l2_bytes) {
      return false;
    }
    const std::int64_t way_span = plan.cpu.l1_bytes / CpuInfo::kL1Ways;
    const std::int64_t sets = way_span / std::gcd(row_bytes, way_span);
    return 2 * t.rows <= sets * (CpuInfo::kL1Ways / 2);
  };
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    t.prefetch_next_rows = t.rows > 1 && (streamed_rows(t, t.a) || streamed_rows(t, t.b));
  });
  if (nest.problem.direction == ConvDirection::kBackpropFilter) {
    std::vector<const Loop*> loops;
    mark_next_blocks(nest, nest.body, loops, plan);
  }
  return nest;
}

}  // namespace convjit::cpu
