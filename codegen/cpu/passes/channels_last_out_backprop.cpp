// Channels-last out_backprop (backprop filter, NCHW). The filter gradient's output dW is
// contiguous along the output channel, and so is every register tile's column vector: in NHWC
// dy supplies that vector directly, but NCHW dy is contiguous along W, so the tiles fell back
// to scalar columns (one FMA per multiply, about a tenth of the NHWC speed). dy is copied once
// per call into a scratch laid out [n][oh][ow][oc]; the tiles then read their oc vectors from
// it and x's per-row broadcasts stay in NCHW (a broadcast has no layout to care about).
//
// The copy is as large as dy: an activation-sized scratch, which is what the NCHW layout costs
// here (TensorFlow's own CPU kernels convert NCHW to NHWC the same way).
#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;

LoopNest channels_last_out_backprop(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  if (!plan.channels_last_out_backprop) return nest;
  const int y = nest.buffer_of_kind(BufferKind::kY);
  // In the accumulator type: the copy widens 16-bit dy once, where the tiles would widen each
  // dy vector at every point of the reduction.
  const int yc = add_copy_scratch(nest, y,
                                  {"dyc", BufferRole::kOutBackpropCopy, accumulator_dtype(p.dtype),
                                   {p.oh * p.ow * p.oc, p.ow * p.oc, p.oc, 1}});
  read_tiles_from(nest.body, y, yc);
  // for n, oh, ow, o: dyc[n, oh, ow, o] = dy[n, oh, ow, o] (o innermost: contiguous stores).
  Stmt copy = copy_nest(nest, {p.n, p.oh, p.ow, p.oc}, {"cn", "coh", "cow", "co"}, yc, y,
                        [](const std::vector<Affine>& v) {
                          return std::vector<IndexExpr>{v[0], v[1], v[2], v[3]};
                        });
  nest.body.insert(nest.body.begin(), std::move(copy));
  return nest;
}

}  // namespace convjit::cpu
