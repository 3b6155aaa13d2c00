// Depthwise filter gradient: the filter's columns as tile rows sharing dy. Lowered, every tap
// (kh, kw) is a tile of its own over all the points (n, oh, ow) where the tap lies inside x,
// and border_peel gives each filter column its own range of ow: the tiles read a vector of x
// and one of dy per accumulator, so they run at half the FMA rate, bound by the loads (and by
// the FMA latency, with one accumulator per channel vector). Over the columns ow where every
// filter column's tap lies inside x, the kw loop can stay whole instead: register_tile then
// gives it rows, each row's x vector against one dy vector they all share (3 rows of a 3x3
// filter: 4 loads per 3 FMAs where there were 6).
//
// Each kw loop around its tile becomes up to three, one per range of ow: the left border
// columns, the interior (its guard on x's W dropped: it holds for every kw there) and the
// right border columns. The first part writes dW, the later ones accumulate into it, so the
// nest stays equivalent; block_reduction then zeroes dW and makes every part accumulate.
#include <algorithm>

#include "codegen/cpu/passes/passes.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// Interiors narrower than this are left to border_peel: a tile of one or two points per row
// spends more on loading and storing its accumulators than its rows save.
constexpr std::int64_t kMinInteriorColumns = 3;
// Nor where the interior is less than this share of the columns: the border parts are tiles
// of a column or two each (more tiles than border_peel's one per filter column), and only the
// interior saves loads. Measured on Zen 3 (two threads, f32): 5x5 filters on 7-wide images
// (an interior of 3 of 7 columns) ran 0.75-0.85x; 112-, 56- and 28-wide MobileNetV2 and
// ConvNeXt layers 1.06-1.5x.
constexpr double kMinInteriorShare = 2.0 / 3.0;

class TapsShareOutBackprop {
 public:
  explicit TapsShareOutBackprop(const LoopNest& nest) : nest_(nest) {}

  int split() const { return split_; }

  void stmts(std::vector<Stmt>& body) {
    std::vector<Stmt> out;
    for (Stmt& s : body) {
      auto* l = std::get_if<Loop>(&s.node);
      if (l != nullptr && nest_.role_of(l->var) == VarRole::kTapCol && split_columns(*l, &out)) {
        continue;
      }
      if (l != nullptr) stmts(l->body);
      out.push_back(std::move(s));
    }
    body = std::move(out);
  }

 private:
  // `kw`: [kw loop { channel loop { tile } }]. Appends its parts to `out` and returns true, or
  // returns false where the columns have no interior worth a part of its own.
  bool split_columns(const Loop& kw, std::vector<Stmt>* out) {
    if (kw.trip_count() < 2 || kw.step != 1 || kw.body.size() != 1) return false;
    const auto* channels = std::get_if<Loop>(&kw.body[0].node);
    if (channels == nullptr || channels->body.size() != 1) return false;
    const auto* tile = std::get_if<Tile>(&channels->body[0].node);
    if (tile == nullptr || tile->accumulate || tile->rows != 1 || tile->cols != 1 ||
        tile->reduce.size() != 3) {
      return false;
    }
    const ReduceLoop& ow = tile->reduce[2];
    if (ow.step != 1 || nest_.role_of(ow.var) != VarRole::kOutCol) return false;
    // The guard on x's W: 0 <= ow*sw + kw*dw + c < iw (the only one that mentions kw).
    int w_guard = -1;
    for (std::size_t i = 0; i < tile->guards.size(); ++i) {
      const Guard& g = tile->guards[i];
      if (g.expr.numer.coef_of(kw.var) == 0) continue;
      if (w_guard >= 0 || g.expr.divisor != 1) return false;
      w_guard = static_cast<int>(i);
    }
    if (w_guard < 0) return false;
    const Guard& g = tile->guards[static_cast<std::size_t>(w_guard)];
    const std::int64_t sw = g.expr.numer.coef_of(ow.var);
    const std::int64_t dw = g.expr.numer.coef_of(kw.var);
    if (sw <= 0 || dw <= 0 || g.expr.numer.terms.size() != 2) return false;
    const std::int64_t c = g.expr.numer.constant;
    // Every kw in [kw.begin, kw.end) inside x: ow*sw + kw.begin*dw + c >= lo and
    // ow*sw + (kw.end - 1)*dw + c < hi.
    const std::int64_t first = std::max(ow.begin, ceil_div(g.lo - kw.begin * dw - c, sw));
    const std::int64_t last =
        std::min(ow.end, floor_div(g.hi - 1 - (kw.end - 1) * dw - c, sw) + 1);
    if (last - first < kMinInteriorColumns ||
        static_cast<double>(last - first) < kMinInteriorShare * static_cast<double>(ow.end - ow.begin)) {
      return false;
    }
    if (first == ow.begin && last == ow.end) return false;  // no border: border_peel drops it

    bool written = false;
    auto part = [&](std::int64_t begin, std::int64_t end, bool interior) {
      if (end <= begin) return;
      Loop columns = loop_header(kw);
      Loop inner = loop_header(*channels);
      Tile t = *tile;
      t.reduce[2].begin = begin;
      t.reduce[2].end = end;
      if (interior) t.guards.erase(t.guards.begin() + w_guard);
      t.accumulate = written;
      written = true;
      inner.body.push_back(Stmt{std::move(t)});
      columns.body.push_back(Stmt{std::move(inner)});
      out->push_back(Stmt{std::move(columns)});
    };
    part(ow.begin, first, false);
    part(first, last, true);
    part(last, ow.end, false);
    ++split_;
    return true;
  }

  const LoopNest& nest_;
  int split_ = 0;
};

}  // namespace

LoopNest taps_share_out_backprop(LoopNest nest, const CpuPlan& plan) {
  if (!plan.taps_share_out_backprop) return nest;
  TapsShareOutBackprop pass(nest);
  pass.stmts(nest.body);
  nest.derived["taps_share_out_backprop"] = pass.split();
  return nest;
}

}  // namespace convjit::cpu
