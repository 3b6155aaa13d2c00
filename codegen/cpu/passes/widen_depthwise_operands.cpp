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
namespace {

// A scratch with `from`'s dims and strides in f32.
int f32_twin(LoopNest& nest, int from, const char* name, BufferRole role) {
  Buffer b = nest.buffers[static_cast<std::size_t>(from)];
  b.name = name;
  b.kind = BufferKind::kScratch;
  b.role = role;
  b.dtype = accumulator_dtype(b.dtype);
  return nest.add_buffer(std::move(b));
}

}  // namespace

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

  const int wf = f32_twin(nest, w, "wf", BufferRole::kFilterCopy);
  const int dyf = f32_twin(nest, y, "dyf", BufferRole::kOutBackpropCopy);
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    for (Access* a : {&t.a, &t.b}) a->buffer = a->buffer == y ? dyf : wf;
  });
  const Buffer& wb = nest.buffers[static_cast<std::size_t>(w)];
  Stmt filter_copy = loop_nest(nest, {wb.dims[0], wb.dims[1], wb.dims[2], wb.dims[3]},
                               {"fkh", "fkw", "fi", "fc"}, [&](const std::vector<Affine>& v) {
                                 Store s;
                                 s.dst = Access{wf, {v[0], v[1], v[2], v[3]}};
                                 s.has_src = true;
                                 s.src = Access{w, {v[0], v[1], v[2], v[3]}};
                                 return Stmt{std::move(s)};
                               });
  const std::int64_t image = nest.buffers[static_cast<std::size_t>(y)].strides[0];
  Stmt dy_copy = loop_nest(nest, {p.n, image}, {"tn", "dk"}, [&](const std::vector<Affine>& v) {
    const IndexExpr zero(Affine::constant_of(0));
    Store s;
    s.dst = Access{dyf, {IndexExpr(v[0]), zero, zero, IndexExpr(v[1])}};
    s.has_src = true;
    s.src = Access{y, {IndexExpr(v[0]), zero, zero, IndexExpr(v[1])}};
    return Stmt{std::move(s)};
  });
  nest.body.insert(nest.body.begin(), std::move(dy_copy));
  nest.body.insert(nest.body.begin(), std::move(filter_copy));
  return nest;
}

}  // namespace convjit::cpu
