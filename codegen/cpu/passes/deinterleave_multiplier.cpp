// Depth multiplier de-interleave (depthwise backprop data, NHWC). With a multiplier M > 1,
// dX[.., c] = sum over m and taps of dY[.., c*M + m] * W[kh, kw, 0, c*M + m]: along the
// channel c that the tile vectorizes, both operands are strided by M, so no vector load reads
// them. Copying W and dY once per call into scratches laid out [..][m][c] makes each
// multiplier's channels contiguous; the tile then reduces over m with elementwise vectors like
// a multiplier of 1. The copies are plain Store nests, contiguous on the store side.
#include <fmt/format.h>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// Splits the channel index `e` = M*c + m (m the reduce variable `mv` at coefficient 1) into
// {m, c}; false when it has another shape.
bool split_channel(const IndexExpr& e, VarId mv, std::int64_t mult, Affine* m, Affine* c) {
  if (e.divisor != 1 || e.numer.coef_of(mv) != 1 || e.numer.constant % mult != 0) return false;
  Affine rest;
  rest.constant = e.numer.constant / mult;
  for (const Term& t : e.numer.terms) {
    if (t.var == mv) continue;
    if (t.coef % mult != 0) return false;
    rest.terms.push_back({t.var, t.coef / mult});
  }
  *m = Affine::var(mv);
  *c = rest;
  return true;
}

}  // namespace

LoopNest deinterleave_multiplier(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  const std::int64_t mult = p.oc_per_group();
  if (!plan.deinterleave_multiplier) return nest;
  const int w = nest.buffer_of_kind(BufferKind::kW);
  const int y = nest.buffer_of_kind(BufferKind::kY);
  if (w < 0 || y < 0) return nest;
  const std::int64_t c = p.groups;

  // Every tile must have the expected shape before anything is rewritten.
  bool all = true;
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    if (t.reduce.empty()) {
      all = false;
      return;
    }
    const VarId mv = t.reduce.back().var;
    Affine m, ch;
    for (const Access* a : {&t.a, &t.b}) {
      if ((a->buffer == w || a->buffer == y) && !split_channel(a->index[3], mv, mult, &m, &ch)) {
        all = false;
      }
    }
  });
  if (!all) return nest;

  // Both copies in the accumulator type: they widen 16-bit operands once, where the
  // elementwise tiles would widen both vectors at every tap.
  Buffer wd;
  wd.name = "wd";
  wd.kind = BufferKind::kScratch;
  wd.role = BufferRole::kFilterCopy;
  wd.dtype = accumulator_dtype(p.dtype);
  wd.dims = {p.kh, p.kw, mult, c};
  wd.strides = {p.kw * mult * c, mult * c, c, 1};
  const int wdi = nest.add_buffer(std::move(wd));
  Buffer yd;
  yd.name = "dyd";
  yd.kind = BufferKind::kScratch;
  yd.role = BufferRole::kOutBackpropCopy;
  yd.dtype = accumulator_dtype(p.dtype);
  yd.dims = {p.n, p.oh, p.ow, mult, c};
  yd.strides = {p.oh * p.ow * mult * c, p.ow * mult * c, mult * c, c, 1};
  const int ydi = nest.add_buffer(std::move(yd));

  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    const VarId mv = t.reduce.back().var;
    for (Access* a : {&t.a, &t.b}) {
      Affine m, ch;
      if (a->buffer == w) {
        split_channel(a->index[3], mv, mult, &m, &ch);
        *a = Access{wdi, {a->index[0], a->index[1], m, ch}};
      } else if (a->buffer == y) {
        split_channel(a->index[3], mv, mult, &m, &ch);
        *a = Access{ydi, {a->index[0], a->index[1], a->index[2], m, ch}};
      }
    }
  });

  // The copies run first, channels innermost (contiguous stores).
  Stmt wcopy = copy_nest(
      nest, {p.kh, p.kw, mult, c}, {"dkh", "dkw", "dm", "dc"}, wdi, w,
      [](const std::vector<Affine>& v) { return std::vector<IndexExpr>{v[0], v[1], v[2], v[3]}; },
      [&](const std::vector<Affine>& v) {
        return std::vector<IndexExpr>{v[0], v[1], Affine::constant_of(0), v[3] * mult + v[2]};
      });
  Stmt ycopy = copy_nest(
      nest, {p.n, p.oh, p.ow, mult, c}, {"dn", "doh", "dow", "dm", "dc"}, ydi, y,
      [](const std::vector<Affine>& v) {
        return std::vector<IndexExpr>{v[0], v[1], v[2], v[3], v[4]};
      },
      [&](const std::vector<Affine>& v) {
        return std::vector<IndexExpr>{v[0], v[1], v[2], v[4] * mult + v[3]};
      });
  nest.body.insert(nest.body.begin(), std::move(ycopy));
  nest.body.insert(nest.body.begin(), std::move(wcopy));
  return nest;
}

}  // namespace convjit::cpu
