// Merging of equal parts. Peeling and blocking copy a nest once per part, and later passes can
// make the copies alike again: once block_reduction has cut the filter gradient's reduction
// into row chunks, the kh parts border_peel made for the top and bottom filter rows reduce over
// the same rows inside a chunk, and differ only in the constant kh their single-iteration
// copies carry. Every copy is generated separately, so such duplicates are most of the code
// (and most of the compile time) of a 3x3 filter gradient.
//
// Two adjacent serial loops over one variable, the second starting where the first ends,
// become one loop when a single body (one of theirs) gives each of them its own code on every
// one of its iterations: a one-iteration part is compared with that iteration substituted into
// both, a longer part must be the same code as it stands. Labels are names for people, not
// code, and are not compared.
#include <fmt/format.h>

#include "ir/transforms/nest_util.hpp"
#include "ir/transforms/transforms.hpp"

namespace convjit::ir {
namespace {

// Code compared as if `var` were `value` in both operands; var < 0 compares as it stands.
// Nothing is copied: merging runs over every part of the nest, and copies made the pass cost
// as much as the code generation it saves.
struct Binding {
  VarId var = -1;
  std::int64_t value = 0;
};

bool same(const Affine& a, const Affine& b, Binding at) {
  auto ta = a.terms.begin(), tb = b.terms.begin();
  std::int64_t ca = a.constant, cb = b.constant;
  while (true) {
    if (ta != a.terms.end() && ta->var == at.var) ca += (ta++)->coef * at.value;
    if (tb != b.terms.end() && tb->var == at.var) cb += (tb++)->coef * at.value;
    if (ta == a.terms.end() || tb == b.terms.end()) break;
    if (ta->var == at.var || tb->var == at.var) continue;
    if (!(*ta == *tb)) return false;
    ++ta, ++tb;
  }
  return ta == a.terms.end() && tb == b.terms.end() && ca == cb;
}

bool same(const IndexExpr& a, const IndexExpr& b, Binding at) {
  return a.divisor == b.divisor && same(a.numer, b.numer, at);
}

bool same(const Access& a, const Access& b, Binding at) {
  if (a.buffer != b.buffer || a.index.size() != b.index.size()) return false;
  for (std::size_t i = 0; i < a.index.size(); ++i) {
    if (!same(a.index[i], b.index[i], at)) return false;
  }
  return true;
}

bool same(const Tile& a, const Tile& b, Binding at) {
  if (a.row_var != b.row_var || a.rows != b.rows || a.col_var != b.col_var || a.cols != b.cols ||
      a.reduce != b.reduce || a.accumulate != b.accumulate || a.paired != b.paired ||
      a.stream != b.stream || a.prefetch_next_rows != b.prefetch_next_rows ||
      a.prefetch_next_block_a != b.prefetch_next_block_a ||
      a.prefetch_next_block_b != b.prefetch_next_block_b || a.guards.size() != b.guards.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.guards.size(); ++i) {
    const Guard &ga = a.guards[i], &gb = b.guards[i];
    if (ga.lo != gb.lo || ga.hi != gb.hi || !same(ga.expr, gb.expr, at)) return false;
  }
  return same(a.a, b.a, at) && same(a.b, b.b, at) && same(a.c, b.c, at) &&
         (!a.paired || (same(a.a2, b.a2, at) && same(a.b2, b.b2, at)));
}

bool same(const Store& a, const Store& b, Binding at) {
  return a.has_src == b.has_src && a.accumulate == b.accumulate && same(a.dst, b.dst, at) &&
         (!a.has_src || same(a.src, b.src, at));
}

bool same(const std::vector<Stmt>& a, const std::vector<Stmt>& b, Binding at);

bool same(const Stmt& a, const Stmt& b, Binding at) {
  if (a.node.index() != b.node.index()) return false;
  if (const auto* la = std::get_if<Loop>(&a.node)) {
    const Loop& lb = std::get<Loop>(b.node);
    return la->var == lb.var && la->begin == lb.begin && la->end == lb.end && la->step == lb.step &&
           la->kind == lb.kind && same(la->body, lb.body, at);
  }
  if (const auto* ta = std::get_if<Tile>(&a.node)) return same(*ta, std::get<Tile>(b.node), at);
  return same(std::get<Store>(a.node), std::get<Store>(b.node), at);
}

bool same(const std::vector<Stmt>& a, const std::vector<Stmt>& b, Binding at) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same(a[i], b[i], at)) return false;
  }
  return true;
}

// Whether `body` run as the loop `part` is `part`'s own code on each of its iterations.
bool gives_part(const std::vector<Stmt>& body, const Loop& part) {
  const Binding at = part.trip_count() == 1 ? Binding{part.var, part.begin} : Binding{};
  return same(part.body, body, at);
}

bool mergeable(const Loop& first, const Loop& second) {
  return first.var == second.var && first.kind == LoopKind::kSerial &&
         second.kind == LoopKind::kSerial && first.step == 1 && second.step == 1 &&
         first.end == second.begin && first.trip_count() > 0 && second.trip_count() > 0;
}

// "top..bottom" for the parts from "top" to "bottom".
std::string merged_label(const std::string& first, const std::string& last) {
  if (first == last) return first;
  const std::size_t dots = first.find("..");
  return fmt::format("{}..{}", first.substr(0, dots), last);
}

// Joins `second` into `first` when one of their bodies gives both their code.
bool try_merge(Loop& first, Loop& second) {
  if (!mergeable(first, second)) return false;
  if (gives_part(second.body, first) && gives_part(second.body, second)) {
    first.body = std::move(second.body);
  } else if (!(gives_part(first.body, first) && gives_part(first.body, second))) {
    return false;
  }
  first.end = second.end;
  first.label = merged_label(first.label, second.label);
  return true;
}

void merge(std::vector<Stmt>& body) {
  std::vector<Stmt> out;
  for (Stmt& s : body) {
    if (auto* loop = std::get_if<Loop>(&s.node)) merge(loop->body);
    out.push_back(std::move(s));
    // Constant parts before the first one that keeps its variable (top rows 0 and 1, then
    // the interior) can only join once that one has: merge backwards as far as it goes.
    while (out.size() >= 2) {
      auto* first = std::get_if<Loop>(&out[out.size() - 2].node);
      auto* second = std::get_if<Loop>(&out.back().node);
      if (first == nullptr || second == nullptr || !try_merge(*first, *second)) break;
      out.pop_back();
    }
  }
  body = std::move(out);
}

}  // namespace

LoopNest merge_equal_parts(LoopNest nest) {
  merge(nest.body);
  return nest;
}

}  // namespace convjit::ir
