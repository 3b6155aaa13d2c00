// Border peeling. For a loop whose variable appears in tile guards, interval analysis over the
// other variables' ranges gives the iterations where every such guard holds for every tap: the
// interior, which runs with the guards removed. The parts before and after it are borders;
// short ones are unrolled into single iterations where the guards, now on reduce variables
// alone, become tighter reduce-loop bounds (a top border row simply skips the taps above it).
#include <fmt/format.h>

#include <algorithm>

#include "ir/transforms/nest_util.hpp"
#include "ir/transforms/transforms.hpp"

namespace convjit::ir {
namespace {

// Border parts of at most this many iterations are unrolled.
constexpr std::int64_t kMaxUnrolledBorder = 4;

class BorderPeel {
 public:
  explicit BorderPeel(LoopNest& nest) : nest_(nest) {}

  void stmts(std::vector<Stmt>& body, const VarRanges& env) {
    std::vector<Stmt> out;
    for (Stmt& s : body) {
      auto* l = std::get_if<Loop>(&s.node);
      if (l == nullptr || l->trip_count() == 0) {
        out.push_back(std::move(s));
        continue;
      }
      peel(std::move(*l), env, &out);
    }
    body = std::move(out);
  }

 private:
  void peel(Loop l, const VarRanges& env, std::vector<Stmt>* out) {
    std::int64_t lo = l.begin, hi = l.end;  // interior [lo, hi)
    bool guarded = false;
    if (l.step == 1) {
      for_each_tile(l.body, env, [&](Tile& t, const VarRanges& inner) {
        VarRanges ranges = inner;
        if (!tile_ranges(t, &ranges)) return;
        for (const Guard& g : t.guards) {
          const std::int64_t cv = g.expr.numer.coef_of(l.var);
          if (cv == 0) continue;
          guarded = true;
          Affine rest = g.expr.numer.substitute(l.var, Affine::constant_of(0));
          auto iv = interval_of(rest, ranges);
          if (!iv || g.expr.divisor != 1) {  // cannot prove it anywhere
            hi = lo;
            continue;
          }
          // lo_g <= cv*v + rest <= hi_g - 1 for all rest.
          std::int64_t vmin, vmax;
          if (cv > 0) {
            vmin = ceil_div(g.lo - iv->lo, cv);
            vmax = floor_div(g.hi - 1 - iv->hi, cv);
          } else {
            vmin = ceil_div(g.hi - 1 - iv->hi, cv);
            vmax = floor_div(g.lo - iv->lo, cv);
          }
          lo = std::max(lo, vmin);
          hi = std::min(hi, vmax + 1);
        }
      });
    }
    if (!guarded) {
      VarRanges inner = env;
      inner[l.var] = {l.begin, l.begin + (l.trip_count() - 1) * l.step};
      stmts(l.body, inner);
      out->push_back(Stmt{std::move(l)});
      return;
    }
    if (hi <= lo) lo = hi = l.end;  // no interior: all border
    const auto [before, after] = side_names(l.var);
    part(l, l.begin, lo, before, env, out);
    part(l, lo, hi, "interior", env, out);
    part(l, hi, l.end, after, env, out);
  }

  void part(const Loop& l, std::int64_t b, std::int64_t e, const char* side, const VarRanges& env,
            std::vector<Stmt>* out) {
    if (e <= b) return;
    const std::string label = l.label.empty() ? side : fmt::format("{}, {}", l.label, side);
    const bool interior = std::string_view(side) == "interior";
    if (!interior && e - b <= kMaxUnrolledBorder) {
      for (std::int64_t v = b; v < e; ++v) {
        Loop one = make(l, v, v + 1, label);
        substitute(one.body, l.var, Affine::constant_of(v));
        finish(one, env, out);
      }
      return;
    }
    finish(make(l, b, e, label), env, out);
  }

  static Loop make(const Loop& l, std::int64_t b, std::int64_t e, const std::string& label) {
    Loop p;
    p.var = l.var;
    p.begin = b;
    p.end = e;
    p.step = 1;
    p.kind = l.kind;
    p.label = label;
    p.body = l.body;
    return p;
  }

  // Drops the guards the part's range proves and peels the loops inside it.
  void finish(Loop p, const VarRanges& env, std::vector<Stmt>* out) {
    VarRanges inner = env;
    inner[p.var] = {p.begin, p.end - 1};
    for_each_tile(p.body, inner, [](Tile& t, const VarRanges& r) { prune_guards(t, r); });
    stmts(p.body, inner);
    out->push_back(Stmt{std::move(p)});
  }

  std::pair<const char*, const char*> side_names(VarId v) const {
    switch (nest_.role_of(v)) {
      case VarRole::kInRow:
      case VarRole::kOutRow:
      case VarRole::kTapRow: return {"top", "bottom"};
      case VarRole::kInCol:
      case VarRole::kOutCol:
      case VarRole::kTapCol: return {"left", "right"};
      default: return {"low", "high"};
    }
  }

  LoopNest& nest_;
};

}  // namespace

LoopNest border_peel(LoopNest nest) {
  BorderPeel(nest).stmts(nest.body, {});
  return nest;
}

}  // namespace convjit::ir
