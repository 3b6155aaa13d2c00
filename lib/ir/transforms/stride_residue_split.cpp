// Stride residue split (backprop data). In the gather form a tap kh reaches input row ih only
// when stride divides ih + pad - kh*dil. Writing ih = stride*q + r fixes, for each residue r,
// the taps that reach it: kh = k0 + period*t, a static strided subset. Re-indexing the tile by
// t makes every division exact, so no multiply ever touches an inserted zero.
#include <fmt/format.h>

#include <numeric>
#include <string>

#include "ir/transforms/nest_util.hpp"
#include "ir/transforms/transforms.hpp"

namespace convjit::ir {
namespace {

std::int64_t mod(std::int64_t a, std::int64_t m) { return ((a % m) + m) % m; }

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

std::string renamed(const std::string& name, char prefix) {
  return name.size() > 1 ? std::string(1, prefix) + name.substr(1) : std::string(1, prefix) + name;
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
      for (std::int64_t r = 0; r < d; ++r) {
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
        out.push_back(Stmt{std::move(part)});
      }
    }
    body = std::move(out);
  }

 private:
  // Re-indexes reduce loops until every division in the tile is exact (or gives up, leaving a
  // guarded division that is still correct).
  void resolve(Tile& t) {
    for (int iter = 0; iter < 8; ++iter) {
      simplify_divisions(t);
      const IndexExpr* pending = nullptr;
      for (const Guard& g : t.guards) {
        if (g.expr.divisor > 1) pending = &g.expr;
      }
      for (const Access* a : {&t.a, &t.b, &t.c}) {
        for (const IndexExpr& e : a->index) {
          if (e.divisor > 1) pending = &e;
        }
      }
      if (pending == nullptr) return;
      if (!reindex(t, *pending)) {
        if (never_divisible(*pending)) {
          make_empty(t);
        }
        return;
      }
      if (is_empty(t)) {
        make_empty(t);
        return;
      }
    }
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
    std::int64_t k0 = -1;
    for (std::int64_t k = r->begin; k < r->begin + period; ++k) {
      if (mod(ck * k + c0, d) == 0) {
        k0 = k;
        break;
      }
    }
    const VarId old_var = r->var;
    const VarId tv = nest_.new_var(renamed(nest_.var_names[static_cast<std::size_t>(old_var)], 'j'),
                                   nest_.role_of(old_var));
    r->var = tv;
    r->begin = 0;
    // No tap reaches this residue: an empty reduction (the tile writes zeros).
    r->end = k0 < 0 || k0 >= r->end ? 0 : ceil_div(r->end - k0, period);
    substitute(t, old_var, Affine::var(tv, period) + (k0 < 0 ? 0 : k0));
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
