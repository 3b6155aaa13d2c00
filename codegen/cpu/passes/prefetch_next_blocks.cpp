// Software prefetch of a filter gradient tile's next block of pixels. Where an input
// gradient's tile streams its per-row operand (prefetch_streamed_rows), a filter gradient's
// reads both operands the other way round: x's channels (one broadcast per row) and dy's (the
// columns' vectors) each lie in a line or a few, and each reduction point (pixel) is new lines, so
// the tiles of a block of pixels (a row chunk) sweep that block's lines once for every few rows or
// column groups of channels. The first sweep of a block misses on each line, in a stride (1 KiB at
// 256 channels) the prefetchers do not run ahead of: ResNet-50's 56x56 1x1 layers' filter gradients
// ran at 69-75% of the FMA peak. Where an operand taking a line per point outgrows L2, each tile
// prefetches, at every point, the lines it reads at the same point of the next block (the nearest
// enclosing loop whose next iteration moves past every point the tile's reduction reads), so a
// block's lines are in the caches when its sweeps begin. Both operands' prefetches together
// measured best (x's alone left r50_l1_1x1_64_256, whose dy takes 1 KiB a pixel, at 76%; dy's alone
// lost 2-5% against both).
//
// Where no loop moves past the points (a tile reduces over every pixel, as the 7x7 layers' whole
// batch on two threads), the tiles that follow one another sweep the same points' next
// channels instead: a rows loop stepping 6 channels of a 2048-channel x takes a new line of
// every pixel each two or three steps, 8 KiB apart, in pages the prefetchers do not cross. Each
// point then prefetches the same pixel's lines that the loop's next steps read: the next line
// where a step moves within one, the next step's lines where it moves further. Paired against
// no prefetch on Zen 4: r50_l4_1x1_2048_512 f32 on two threads (x 3.2 MB) 1.06-1.07x median,
// 1.10-1.12x best; mv2_project_7_960_320 f32 on one thread 1.17x median, 1.06x best; their f64
// forms 1.04-1.14x on one and two threads, r50_l4_1x1_512_2048's f64 (x 1.6 MB, each thread
// all of it) 0.99-1.02x.
//
// The marks are made on the final nest (after the threads' split and the batch copies): an
// operand a tile reads from a scratch copy is the copy loop's to stream, and a parallel loop's
// next iteration is another thread's block.
#include <algorithm>
#include <cstdlib>
#include <optional>

#include "codegen/cpu/passes/passes.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {

using namespace ir;

namespace {

// Whether a buffer outgrows the core's L2.
bool beyond_l2(const Buffer& buf, const CpuPlan& plan) {
  return buf.elements() * dtype_size(buf.dtype) > plan.cpu.l2_bytes;
}

// An operand of a tile that reads it a line or more further at each point of its innermost
// reduction loop (so each point is new lines): its buffer and flat element offset.
struct LinePerPoint {
  const Buffer* buffer = nullptr;
  Affine offset;
};

std::optional<LinePerPoint> line_per_point(const LoopNest& nest, const Tile& t, const Access& x) {
  LinePerPoint op;
  if (t.paired || t.reduce.empty() || !flatten_access(nest, x, &op.offset)) return std::nullopt;
  op.buffer = &nest.buffers[static_cast<std::size_t>(x.buffer)];
  const ReduceLoop& inner = t.reduce.back();
  const std::int64_t point_bytes =
      std::llabs(op.offset.coef_of(inner.var) * inner.step) * dtype_size(op.buffer->dtype);
  if (point_bytes < CpuInfo::kCacheLineBytes) return std::nullopt;
  return op;
}

// The element distance to the same point of the next block for an operand of tile `t` inside
// `loops` (outer first) that takes a line per point, or, where no enclosing loop moves past
// the points it reads, to the lines of the same points that the innermost loop moving it reads
// next (at least the next line); 0 where it is not a tensor beyond L2 (a scratch copy is the
// copy loop's to stream), where only a block of one iteration moves past the points (a row
// chunk peeled for the borders: its tiles' blocks are the nest's), or no enclosing loop moves
// it.
std::int64_t next_block_distance(const Tile& t, const std::optional<LinePerPoint>& x,
                                 const std::vector<const Loop*>& loops, const CpuPlan& plan) {
  if (!x || x->buffer->kind == BufferKind::kScratch || !beyond_l2(*x->buffer, plan)) return 0;
  const Affine& offset = x->offset;
  // The elements between the first and last points the reduction reads.
  std::int64_t span = 0;
  for (const ReduceLoop& r : t.reduce) {
    const std::int64_t trip = r.end > r.begin ? (r.end - r.begin + r.step - 1) / r.step : 0;
    span += std::llabs(offset.coef_of(r.var) * r.step) * std::max<std::int64_t>(trip - 1, 0);
  }
  const std::int64_t eb = dtype_size(x->buffer->dtype);
  const std::int64_t line = CpuInfo::kCacheLineBytes / eb;
  const auto within_reach = [&](std::int64_t distance) {
    return std::llabs(distance) * eb <= INT32_MAX / 2 ? distance : 0;
  };
  std::int64_t same_points = 0;  // the innermost loop's that moves within the points' lines
  bool blocked = false;          // a loop of one iteration (a peeled block) moves past them
  for (auto l = loops.rbegin(); l != loops.rend(); ++l) {
    const std::int64_t distance = offset.coef_of((*l)->var) * (*l)->step;
    if ((*l)->kind == LoopKind::kParallel) break;  // its next iteration is another thread's
    if (distance == 0) continue;
    const bool repeats = (*l)->trip_count() >= 2;
    if (std::llabs(distance) > span) {
      if (repeats) return within_reach(distance);
      blocked = true;
    } else if (repeats && same_points == 0) {
      same_points = std::llabs(distance) >= line ? distance : (distance > 0 ? line : -line);
    }
  }
  return blocked ? 0 : within_reach(same_points);
}

// `x_beyond_l2`: whether the op's x tensor (not a copy of it) outgrows L2.
void mark_next_blocks(const LoopNest& nest, std::vector<Stmt>& body,
                      std::vector<const Loop*>& loops, bool x_beyond_l2, const CpuPlan& plan) {
  for (Stmt& s : body) {
    if (auto* l = std::get_if<Loop>(&s.node)) {
      loops.push_back(l);
      mark_next_blocks(nest, l->body, loops, x_beyond_l2, plan);
      loops.pop_back();
    } else if (auto* t = std::get_if<Tile>(&s.node)) {
      // Outer-product tiles (a's rows broadcast, b's columns vectors) whose broadcast takes
      // a line a point, from x or from its copy: depthwise tiles (vectors on both sides) and a
      // 3-channel stem's (b alone a line per pixel) measured 5-30% slower prefetching. Where
      // a reads a copy of an x beyond L2, b alone prefetches (AVX2's r3x32 tiles of 256 -> 64
      // channels on 56x56 images, x copied with padded pixels, dy streamed).
      const std::optional<LinePerPoint> a = line_per_point(nest, *t, t->a);
      const bool broadcast = a && a->offset.coef_of(t->col_var) == 0;
      const bool broadcast_copied =
          broadcast && a->buffer->kind == BufferKind::kScratch && x_beyond_l2;
      t->prefetch_next_block_a = broadcast ? next_block_distance(*t, a, loops, plan) : 0;
      t->prefetch_next_block_b =
          t->prefetch_next_block_a != 0 || broadcast_copied
              ? next_block_distance(*t, line_per_point(nest, *t, t->b), loops, plan)
              : 0;
    }
  }
}

}  // namespace

LoopNest prefetch_next_blocks(LoopNest nest, const CpuPlan& plan) {
  if (!plan.prefetch_streamed_rows || nest.problem.direction != ConvDirection::kBackpropFilter) {
    return nest;
  }
  const int x = nest.buffer_of_kind(BufferKind::kX);
  const bool x_beyond_l2 = x >= 0 && beyond_l2(nest.buffers[static_cast<std::size_t>(x)], plan);
  std::vector<const Loop*> loops;
  mark_next_blocks(nest, nest.body, loops, x_beyond_l2, plan);
  return nest;
}

}  // namespace convjit::cpu
