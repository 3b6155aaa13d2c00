// Depth multiplier de-interleave (depthwise gradients, NHWC). With a multiplier M > 1, the
// channel index of dY and W is c*M + m, so along the channel c that a tile vectorizes both are
// strided by M and no vector load reads them.
//
// Backprop data: dX[.., c] = sum over m and taps of dY[.., c*M + m] * W[kh, kw, 0, c*M + m].
// Copying W and dY once per call into scratches laid out [..][m][c] makes each multiplier's
// channels contiguous; the tile then reduces over m with elementwise vectors like a multiplier
// of 1.
//
// Backprop filter: dW[kh, kw, 0, c*M + m] = sum over the points of X[.., c] * dY[.., c*M + m].
// Left alone the tiles would take their vectors along m (M lanes wide). Instead dY is copied
// as [n][oh][ow][m][c] (parallelize moves the copy into the batch chunks, one image per
// thread), and each tap's loops over c and m are swapped, so the tiles take vectors along c
// and the multiplier as their rows: one X vector serves M rows of dY's copy. Only dW's lanes
// stay M apart, which the tiles load and store once per chunk.
//
// The copies are plain Store nests, contiguous on the store side, in the accumulator type
// (they widen 16-bit operands once, where the elementwise tiles would widen both vectors at
// every tap).
#include <fmt/format.h>

#include <functional>

#include "codegen/cpu/passes/passes.hpp"
#include "ir/transforms/nest_util.hpp"

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

// dY's copy laid out [n][oh][ow][m][c] in the accumulator type.
int add_out_backprop_copy(LoopNest& nest) {
  const ConvProblem& p = nest.problem;
  const std::int64_t mult = p.oc_per_group();
  const std::int64_t c = p.groups;
  Buffer yd;
  yd.name = "dyd";
  yd.kind = BufferKind::kScratch;
  yd.role = BufferRole::kOutBackpropCopy;
  yd.dtype = accumulator_dtype(p.dtype);
  yd.dims = {p.n, p.oh, p.ow, mult, c};
  yd.strides = {p.oh * p.ow * mult * c, p.ow * mult * c, mult * c, c, 1};
  return nest.add_buffer(std::move(yd));
}

Stmt out_backprop_copy(LoopNest& nest, int ydi, int y) {
  const ConvProblem& p = nest.problem;
  const std::int64_t mult = p.oc_per_group();
  return copy_nest(
      nest, {p.n, p.oh, p.ow, mult, p.groups}, {"dn", "doh", "dow", "dm", "dc"}, ydi, y,
      [](const std::vector<Affine>& v) {
        return std::vector<IndexExpr>{v[0], v[1], v[2], v[3], v[4]};
      },
      [&](const std::vector<Affine>& v) {
        return std::vector<IndexExpr>{v[0], v[1], v[2], v[4] * mult + v[3]};
      });
}

// The loop over c whose body is the loop over m (extent M) around one unit tile, as lowering
// and border_peel leave each tap's part of a filter gradient.
Tile* channel_and_multiplier_loops(Loop& c_loop, std::int64_t mult) {
  if (c_loop.body.size() != 1) return nullptr;
  auto* m_loop = std::get_if<Loop>(&c_loop.body[0].node);
  if (m_loop == nullptr || m_loop->begin != 0 || m_loop->end != mult || m_loop->step != 1 ||
      m_loop->body.size() != 1) {
    return nullptr;
  }
  auto* t = std::get_if<Tile>(&m_loop->body[0].node);
  return t != nullptr && t->rows == 1 && t->cols == 1 ? t : nullptr;
}

// Visits every (c loop, m loop, tile) of the nest; false where a tile sits elsewhere.
bool for_each_multiplier_tile(std::vector<Stmt>& body, std::int64_t mult,
                              const std::function<void(Loop&, Loop&, Tile&)>& fn) {
  for (Stmt& s : body) {
    if (std::holds_alternative<Tile>(s.node)) return false;
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr) continue;
    if (Tile* t = channel_and_multiplier_loops(*l, mult)) {
      fn(*l, std::get<Loop>(l->body[0].node), *t);
    } else if (!for_each_multiplier_tile(l->body, mult, fn)) {
      return false;
    }
  }
  return true;
}

LoopNest deinterleave_filter_gradient(LoopNest nest) {
  const ConvProblem& p = nest.problem;
  const std::int64_t mult = p.oc_per_group();
  const int x = nest.buffer_of_kind(BufferKind::kX);
  const int y = nest.buffer_of_kind(BufferKind::kY);
  if (x < 0 || y < 0) return nest;

  // Every tile must have the expected shape before anything is rewritten: x along c, dy
  // along c*M + m.
  bool all = true;
  const bool found =
      for_each_multiplier_tile(nest.body, mult, [&](Loop& c_loop, Loop& m_loop, Tile& t) {
        Affine m, ch;
        all = all && t.a.buffer == x && t.b.buffer == y &&
              split_channel(t.b.index[3], m_loop.var, mult, &m, &ch) &&
              ch == Affine::var(c_loop.var) && nest.role_of(c_loop.var) == VarRole::kGroup;
      });
  if (!found || !all) return nest;

  const int ydi = add_out_backprop_copy(nest);
  for_each_multiplier_tile(nest.body, mult, [&](Loop& c_loop, Loop& m_loop, Tile& t) {
    // Rows along m read the copy (the operand that moves with the row is a), x is shared.
    const Access dy = t.b;
    t.b = t.a;
    t.a = Access{
        ydi,
        {dy.index[0], dy.index[1], dy.index[2], Affine::var(m_loop.var), Affine::var(c_loop.var)}};
    // for c: for m: tile  ->  for m: for c: tile (the loops keep their variables).
    Loop inner = std::move(m_loop);
    Loop outer = std::move(c_loop);
    outer.body.clear();
    Tile tile = std::move(std::get<Tile>(inner.body[0].node));
    outer.body.push_back(Stmt{std::move(tile)});
    inner.body.clear();
    inner.body.push_back(Stmt{std::move(outer)});
    c_loop = std::move(inner);
  });
  nest.body.insert(nest.body.begin(), out_backprop_copy(nest, ydi, y));
  return nest;
}

}  // namespace

LoopNest deinterleave_multiplier(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  const std::int64_t mult = p.oc_per_group();
  if (!plan.deinterleave_multiplier) return nest;
  if (p.direction == ConvDirection::kBackpropFilter) return deinterleave_filter_gradient(nest);
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
  const int ydi = add_out_backprop_copy(nest);

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
  nest.body.insert(nest.body.begin(), out_backprop_copy(nest, ydi, y));
  nest.body.insert(nest.body.begin(), std::move(wcopy));
  return nest;
}

}  // namespace convjit::cpu
