// Stride residue split (backprop data). In the gather form a tap kh reaches input row ih only
// when stride divides ih + pad - kh*dil. Writing ih = stride*q + r fixes, for each residue r,
// the taps that reach it: kh = k0 + period*t, a static strided subset. Re-indexing the tile by
// t makes every division exact, so no multiply ever touches an inserted zero.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "ir/transforms/nest_util.hpp"
#include "ir/transforms/transforms.hpp"

namespace convjit::ir {
namespace {

std::int64_t mod(std::int64_t a, std::int64_t m) { return ((a % m) + m) % m; }

// The residues mod d that some v in [begin, end) has, in increasing order. A range shorter
// than d reaches only as many residues as it has values: a stride of 2^31 over one input row
// is one residue, not 2^31 empty ones, so the work is bounded by the loop, not the attribute.
std::vector<std::int64_t> residues_reached(std::int64_t begin, std::int64_t end, std::int64_t d) {
  std::vector<std::int64_t> out;
  if (end <= begin) return out;
  if (end - begin >= d) {
    out.resize(static_cast<std::size_t>(d));
    std::iota(out.begin(), out.end(), std::int64_t{0});
    return out;
  }
  for (std::int64_t v = begin; v < end; ++v) out.push_back(mod(v, d));
  std::sort(out.begin(), out.end());
  return out;
}

// x with a*x = 1 (mod m), for gcd(a, m) = 1 and m >= 1 (extended Euclid).
std::int64_t inverse_mod(std::int64_t a, std::int64_t m) {
  std::int64_t r0 = m, r1 = mod(a, m), s0 = 0, s1 = 1;
  while (r1 != 0) {
    const std::int64_t q = r0 / r1;
    r0 = std::exchange(r1, r0 - q * r1);
    s0 = std::exchange(s1, s0 - q * s1);
  }
  return mod(s0, m);
}

// The smallest k >= lo with ck*k + c0 divisible by d (0 < ck < d, 0 <= c0 < d), or -1 when
// no k is. Solved in closed form rather than by trying a period of k: the period is up to
// the stride, which can be 2^63 - 1.
std::int64_t first_divisible(std::int64_t ck, std::int64_t c0, std::int64_t d, std::int64_t lo) {
  const std::int64_t g = std::gcd(ck, d);
  if (c0 % g != 0) return -1;
  const std::int64_t m = d / g;  // the period of the solutions
  // (ck/g) * k = -c0/g (mod m), and ck/g is invertible mod m.
  const auto k = static_cast<std::int64_t>(static_cast<__int128>(mod(-(c0 / g), m)) *
                                           inverse_mod(ck / g, m) % m);
  return lo + mod(k - mod(lo, m), m);
}

// The divisor of the first IndexExpr in the tiles under `body` that divides an expression
// containing `var` with coefficient 1; 1 when there is none.
std::int64_t divisor_for(std::vector<Stmt>& body, VarId var) {
  std::int64_t found = 1;
  for_each_tile(body, {}, [&](Tile& t, const VarRanges&) {
    auto check = [&](const IndexExpr& e) {
      if (found == 1 && e.divisor > 1 && e.numer.coef_of(var) == 1) found = e.divisor;
    };
    for (const Access* a : {&t.a, &t.b, &t.c}) {
      for (const IndexExpr& e : a->index) check(e);
    }
    for (const Guard& g : t.guards) check(g.expr);
  });
  return found;
}

// "ih" -> "qh": the first letter replaced (a one-letter name gets the prefix in front).
std::string renamed(const std::string& name, char prefix) {
  std::string out = name;
  if (out.size() > 1) {
    out[0] = prefix;
  } else {
    out.insert(out.begin(), prefix);
  }
  return out;
}

class ResidueSplit {
 public:
  explicit ResidueSplit(LoopNest& nest) : nest_(nest) {}

  void stmts(std::vector<Stmt>& body) {
    std::vector<Stmt> out;
    for (Stmt& s : body) {
      auto* l = std::get_if<Loop>(&s.node);
      if (l == nullptr) {
        out.push_back(std::move(s));
        continue;
      }
      const std::int64_t d = l->step == 1 ? divisor_for(l->body, l->var) : 1;
      if (d == 1) {
        stmts(l->body);
        out.push_back(std::move(s));
        continue;
      }
      const VarId q = nest_.new_var(renamed(nest_.var_names[static_cast<std::size_t>(l->var)], 'q'),
                                    nest_.role_of(l->var));
      std::vector<Part> parts;
      for (const std::int64_t r : residues_reached(l->begin, l->end, d)) {
        // v = d*q + r over [begin, end).
        Loop part;
        part.var = q;
        part.begin = ceil_div(l->begin - r, d);
        part.end = ceil_div(l->end - r, d);
        if (part.end <= part.begin) continue;
        part.kind = l->kind;
        part.label = l->label.empty() ? fmt::format("residue {}", r)
                                      : fmt::format("{}, residue {}", l->label, r);
        part.body = l->body;
        substitute(part.body, l->var, Affine::var(q, d) + r);
        for_each_tile(part.body, {}, [&](Tile& t, const VarRanges&) { resolve(t); });
        stmts(part.body);
        const bool zeros = writes_zeros_only(part.body);
        parts.push_back(Part{r, zeros, std::move(part)});
      }
      group_zero_parts(*l, d, q, std::move(parts), &out);
    }
    body = std::move(out);
  }

 private:
  // Re-indexes reduce loops until every division in the tile is exact (or gives up, leaving a
  // guarded division that is still correct). Each round tries every pending division, the
  // last first: one whose odd term is a position still to be split (iw while ih is split)
  // must not hide another that a reduce variable can resolve, or a residue that no tap
  // reaches would only be found empty after the inner loop was split too (stride^2 parts).
  void resolve(Tile& t) {
    for (int iter = 0; iter < 8; ++iter) {
      simplify_divisions(t);
      std::vector<IndexExpr> pending;
      for (const Guard& g : t.guards) {
        if (g.expr.divisor > 1) pending.push_back(g.expr);
      }
      for (const Access* a : {&t.a, &t.b, &t.c}) {
        for (const IndexExpr& e : a->index) {
          if (e.divisor > 1) pending.push_back(e);
        }
      }
      if (pending.empty()) return;
      bool reindexed = false;
      for (auto e = pending.rbegin(); e != pending.rend() && !reindexed; ++e) {
        reindexed = reindex(t, *e);
      }
      if (!reindexed) {
        for (const IndexExpr& e : pending) {
          if (never_divisible(e)) {
            make_empty(t);
            break;
          }
        }
        return;
      }
      if (is_empty(t)) {
        make_empty(t);
        return;
      }
    }
  }

  // One residue's loop; `zeros` when no tap reaches it, so that it only writes zeros.
  struct Part {
    std::int64_t residue = 0;
    bool zeros = false;
    Loop loop;
  };

  // Whether every tile under `body` has an empty reduction (and so stores zeros).
  static bool writes_zeros_only(const std::vector<Stmt>& body) {
    for (const Stmt& s : body) {
      if (const auto* l = std::get_if<Loop>(&s.node)) {
        if (!writes_zeros_only(l->body)) return false;
      } else if (const auto* t = std::get_if<Tile>(&s.node)) {
        if (t->accumulate || t->reduce.empty() || !is_empty(*t)) return false;
      } else {
        return false;
      }
    }
    return true;
  }

  // Appends the parts of split loop `l` to `out`. Consecutive residues that no tap reaches
  // and that share their q range become one part with an inner loop over the residue: with a
  // stride far above the window (128 with a 3x3 filter) nearly every residue only writes
  // zeros, and one part per residue made the code grow with the stride squared (a second and
  // 600 MB to compile a 256x256 input gradient at stride 256).
  void group_zero_parts(const Loop& l, std::int64_t d, VarId q, std::vector<Part> parts,
                        std::vector<Stmt>* out) {
    // A copy: new_var below grows var_names, which would leave a reference dangling.
    const std::string name = nest_.var_names[static_cast<std::size_t>(l.var)];
    for (std::size_t i = 0; i < parts.size();) {
      std::size_t j = i + 1;
      if (parts[i].zeros) {
        while (j < parts.size() && parts[j].zeros && parts[j].residue == parts[j - 1].residue + 1 &&
               parts[j].loop.begin == parts[i].loop.begin &&
               parts[j].loop.end == parts[i].loop.end) {
          ++j;
        }
      }
      if (j - i < 2) {
        out->push_back(Stmt{std::move(parts[i].loop)});
        i = j;
        continue;
      }
      const std::int64_t first = parts[i].residue, last = parts[j - 1].residue;
      Loop residues;
      residues.var = nest_.new_var(renamed(name, 'r'), nest_.role_of(l.var));
      residues.begin = first;
      residues.end = last + 1;
      residues.body = l.body;
      substitute(residues.body, l.var, Affine::var(q, d) + Affine::var(residues.var));
      for_each_tile(residues.body, {}, [](Tile& t, const VarRanges&) { make_empty(t); });
      Loop group = std::move(parts[i].loop);
      group.label = l.label.empty()
                        ? fmt::format("residues {}..{}, no taps", first, last)
                        : fmt::format("{}, residues {}..{}, no taps", l.label, first, last);
      group.body.clear();
      group.body.push_back(Stmt{std::move(residues)});
      out->push_back(Stmt{std::move(group)});
      i = j;
    }
  }

  // Whether some index or guard of `t` has a coefficient of `var` that times `k` overflows.
  static bool scaling_overflows(const Tile& t, VarId var, std::int64_t k) {
    bool overflows = false;
    auto check = [&](const IndexExpr& e) {
      std::int64_t scaled = 0;
      overflows = overflows || __builtin_mul_overflow(e.numer.coef_of(var), k, &scaled);
    };
    for (const Access* a : {&t.a, &t.b, &t.c, &t.a2, &t.b2}) {
      for (const IndexExpr& e : a->index) check(e);
    }
    for (const Guard& g : t.guards) check(g.expr);
    return overflows;
  }

  static bool never_divisible(const IndexExpr& e) {
    for (const Term& term : e.numer.terms) {
      if (term.coef % e.divisor != 0) return false;
    }
    return e.numer.constant % e.divisor != 0;
  }

  static bool is_empty(const Tile& t) {
    for (const ReduceLoop& r : t.reduce) {
      if (r.end <= r.begin) return true;
    }
    return false;
  }

  // A tile no tap reaches: an empty reduction writes zeros. Its indices are never evaluated,
  // so inexact ones become 0 and the whole nest stays affine.
  static void make_empty(Tile& t) {
    if (t.reduce.empty()) return;  // nothing to empty: the guard keeps it correct
    if (!t.reduce.empty() && !is_empty(t)) t.reduce[0].end = t.reduce[0].begin;
    t.guards.clear();
    for (Access* a : {&t.a, &t.b}) {
      for (IndexExpr& e : a->index) {
        if (e.divisor != 1) e = IndexExpr(Affine::constant_of(0));
      }
    }
  }

  // numer = c_k*k + (multiples of d) + c0 with k a step-1 reduce variable: the k that make it
  // divisible are k0 + period*t.
  bool reindex(Tile& t, IndexExpr e) {
    const std::int64_t d = e.divisor;
    const Term* odd = nullptr;
    for (const Term& term : e.numer.terms) {
      if (term.coef % d == 0) continue;
      if (odd != nullptr) return false;
      odd = &term;
    }
    if (odd == nullptr) return false;  // only the constant is off: never divisible
    auto r = std::find_if(t.reduce.begin(), t.reduce.end(),
                          [&](const ReduceLoop& rl) { return rl.var == odd->var; });
    if (r == t.reduce.end() || r->step != 1) return false;
    const std::int64_t ck = mod(odd->coef, d), c0 = mod(e.numer.constant, d);
    const std::int64_t period = d / std::gcd(ck, d);
    const std::int64_t k0 = first_divisible(ck, c0, d, r->begin);
    const VarId old_var = r->var;
    const VarId tv = nest_.new_var(renamed(nest_.var_names[static_cast<std::size_t>(old_var)], 'j'),
                                   nest_.role_of(old_var));
    r->var = tv;
    const std::int64_t old_begin = r->begin;
    r->begin = 0;
    // No tap reaches this residue: an empty reduction (the tile writes zeros). Its indices
    // are never evaluated; k stays a value its loop had, so that they stay in range.
    if (k0 < 0 || k0 >= r->end) {
      r->end = 0;
      // The tap the period would reach next may lie far outside (k0 ~ the stride): then k
      // becomes the loop's first value, whose products are known to fit.
      const bool far = scaling_overflows(t, old_var, period) ||
                       scaling_overflows(t, old_var, std::max<std::int64_t>(k0, 0));
      substitute(t, old_var,
                 far ? Affine::constant_of(old_begin)
                     : Affine::var(tv, period) + std::max<std::int64_t>(k0, 0));
      return true;
    }
    r->end = ceil_div(r->end - k0, period);
    // With a stride far above the window (2^31 - 1 with a dilation of 10^12) period times a
    // coefficient of k overflows int64; then at most one tap is left (t = 0) and k is that tap.
    // Where t takes two values or more, period * t stays inside the window and nothing can.
    const Affine tap = r->end <= 1 && scaling_overflows(t, old_var, period)
                           ? Affine::constant_of(0)
                           : Affine::var(tv, period);
    substitute(t, old_var, tap + k0);
    return true;
  }

 private:
  LoopNest& nest_;
};

}  // namespace

LoopNest stride_residue_split(LoopNest nest) {
  if (nest.problem.direction != ConvDirection::kBackpropData || nest.problem.is_empty()) return nest;
  ResidueSplit(nest).stmts(nest.body);
  return nest;
}

}  // namespace convjit::ir
