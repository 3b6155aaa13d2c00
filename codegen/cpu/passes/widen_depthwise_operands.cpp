// 16-bit depthwise input gradients (NHWC, no depth multiplier): the tiles multiply a dy vector
// by a filter vector, lane by lane, and neither is a broadcast, so each reduction point
// widened every vector it loaded (two instructions per vector on AVX2, more than the FMA
// itself): bf16 ran at half the f32 speed on AVX2. Both operands now come from f32 copies:
//
//   tiles: dx[n, ...] = dy[n, ...] * w[kh, kw, 0, c]
//     ->  wf[kh][kw][0][c] = w[...]            (once per call: the filter is small)
//         for tn: dyf[tn] = dy[tn]             (each image as one run)
//         tiles: dx[n, ...] = dyf[n, ...] * wf[kh, kw, 0, c]
//
// The copies are exact. privatize_batch_copies (later) turns dyf into one image per thread,
// copied right before that image's tiles. Running before register_tile lets its row limit
// see the f32 rows the tiles stream. Each dy element is read by up to kh*kw taps, so it
// is now widened once instead of at every one. The depth multiplier's copies
// (deinterleave_multiplier) already write f32, and NCHW's dy planes likewise; both leave the tiles
// reading scratch, which this pass then leaves alone.
#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;

LoopNest widen_depthwise_operands(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  if (!plan.widen_depthwise_operands) return nest;
  const int y = nest.buffer_of_kind(BufferKind::kY), w = nest.buffer_of_kind(BufferKind::kW);
  if (y < 0 || w < 0 || !dense_images(nest.buffers[static_cast<std::size_t>(y)]) ||
      !dense_images(nest.buffers[static_cast<std::size_t>(w)])) {
    return nest;
  }
  // Every tile multiplies dy by the filter (one each way round), and nothing else reads them.
  bool ok = true;
  int tiles = 0, reads = 0;
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    ++tiles;
    ok = ok && !t.paired &&
         ((t.a.buffer == y && t.b.buffer == w) || (t.a.buffer == w && t.b.buffer == y));
  });
  for_each_access(nest.body, [&](const Access& a, bool) {
    if (a.buffer == y || a.buffer == w) ++reads;
  });
  if (!ok || tiles == 0 || reads != 2 * tiles) return nest;
  // The batch loop comes first: the dy copy goes right before it, where
  // privatize_batch_copies looks for it.
  const auto* batch = std::get_if<Loop>(&nest.body.front().node);
  if (nest.body.size() != 1 || batch == nullptr || batch->begin != 0 || batch->end != p.n ||
      batch->step != 1) {
    return nest;
  }

  // Twins of w and dy (same dims and strides) in f32.
  const DType f32 = accumulator_dtype(p.dtype);
  const int wf = add_copy_scratch(nest, w, {"wf", BufferRole::kFilterCopy, f32, {}});
  const int dyf = add_copy_scratch(nest, y, {"dyf", BufferRole::kOutBackpropCopy, f32, {}});
  read_tiles_from(nest.body, w, wf);
  read_tiles_from(nest.body, y, dyf);
  const Buffer& wb = nest.buffers[static_cast<std::size_t>(w)];
  Stmt filter_copy =
      copy_nest(nest, {wb.dims[0], wb.dims[1], wb.dims[2], wb.dims[3]}, {"fkh", "fkw", "fi", "fc"},
                wf, w, [](const std::vector<Affine>& v) {
                  return std::vector<IndexExpr>{v[0], v[1], v[2], v[3]};
                });
  // Each image as one run (dense images: its offset along the last dim covers it all).
  const std::int64_t image = nest.buffers[static_cast<std::size_t>(y)].strides[0];
  Stmt dy_copy = copy_nest(nest, {p.n, image}, {"tn", "dk"}, dyf, y,
                           [](const std::vector<Affine>& v) {
                             const IndexExpr zero(Affine::constant_of(0));
                             return std::vector<IndexExpr>{v[0], zero, zero, v[1]};
                           });
  nest.body.insert(nest.body.begin(), std::move(dy_copy));
  nest.body.insert(nest.body.begin(), std::move(filter_copy));
  return nest;
}

}  // namespace convjit::cpu
