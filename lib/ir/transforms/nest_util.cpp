// Helpers shared by the schedule passes.
#include "ir/transforms/nest_util.hpp"

#include <algorithm>

namespace convjit::ir {

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

std::optional<Interval> interval_of(const Affine& e, const VarRanges& ranges) {
  Interval out{e.constant, e.constant};
  for (const Term& t : e.terms) {
    auto it = ranges.find(t.var);
    if (it == ranges.end()) return std::nullopt;
    const std::int64_t a = t.coef * it->second.lo, b = t.coef * it->second.hi;
    out.lo += std::min(a, b);
    out.hi += std::max(a, b);
  }
  return out;
}

namespace {

// In place, and only where `var` occurs: substitution runs over every index of every tile,
// most of which do not mention the variable.
void subst_affine(Affine& e, VarId var, const Affine& value) {
  if (e.coef_of(var) != 0) e = e.substitute(var, value);
}

void subst_access(Access& a, VarId var, const Affine& value) {
  for (IndexExpr& e : a.index) subst_affine(e.numer, var, value);
}

void simplify(IndexExpr& e) {
  if (e.divisor == 1) return;
  if (e.numer.constant % e.divisor != 0) return;
  for (const Term& t : e.numer.terms) {
    if (t.coef % e.divisor != 0) return;
  }
  e.numer.constant /= e.divisor;
  for (Term& t : e.numer.terms) t.coef /= e.divisor;
  e.divisor = 1;
}

}  // namespace

void substitute(Tile& tile, VarId var, const Affine& value) {
  subst_access(tile.a, var, value);
  subst_access(tile.b, var, value);
  subst_access(tile.c, var, value);
  if (tile.paired) {
    subst_access(tile.a2, var, value);
    subst_access(tile.b2, var, value);
  }
  for (Guard& g : tile.guards) subst_affine(g.expr.numer, var, value);
}

void substitute(std::vector<Stmt>& body, VarId var, const Affine& value) {
  for (Stmt& s : body) {
    if (auto* l = std::get_if<Loop>(&s.node)) {
      substitute(l->body, var, value);
    } else if (auto* t = std::get_if<Tile>(&s.node)) {
      substitute(*t, var, value);
    } else {
      auto& st = std::get<Store>(s.node);
      subst_access(st.dst, var, value);
      if (st.has_src) subst_access(st.src, var, value);
    }
  }
}

void simplify_divisions(Tile& tile) {
  for (Access* a : {&tile.a, &tile.b, &tile.c}) {
    for (IndexExpr& e : a->index) simplify(e);
  }
  for (Guard& g : tile.guards) simplify(g.expr);
}

void for_each_tile(std::vector<Stmt>& body, const VarRanges& outer,
                   const std::function<void(Tile&, const VarRanges&)>& fn) {
  for (Stmt& s : body) {
    if (auto* l = std::get_if<Loop>(&s.node)) {
      if (l->trip_count() == 0) continue;
      VarRanges inner = outer;
      inner[l->var] = {l->begin, l->begin + (l->trip_count() - 1) * l->step};
      for_each_tile(l->body, inner, fn);
    } else if (auto* t = std::get_if<Tile>(&s.node)) {
      fn(*t, outer);
    }
  }
}

bool tile_ranges(const Tile& tile, VarRanges* ranges) {
  (*ranges)[tile.row_var] = {0, tile.rows - 1};
  (*ranges)[tile.col_var] = {0, tile.cols - 1};
  for (const ReduceLoop& r : tile.reduce) {
    if (r.end <= r.begin) return false;
    (*ranges)[r.var] = {r.begin, r.begin + (r.end - r.begin - 1) / r.step * r.step};
  }
  return true;
}

void prune_guards(Tile& tile, const VarRanges& outer) {
  VarRanges ranges = outer;
  if (!tile_ranges(tile, &ranges)) {
    tile.guards.clear();  // an empty reduction adds nothing: no guard can matter
    return;
  }
  std::vector<Guard> kept;
  for (const Guard& g : tile.guards) {
    if (g.expr.divisor != 1) {
      kept.push_back(g);
      continue;
    }
    const Affine& e = g.expr.numer;
    if (auto iv = interval_of(e, ranges); iv && iv->lo >= g.lo && iv->hi < g.hi) continue;
    // A guard on one reduce variable alone becomes that loop's bounds.
    if (e.terms.size() == 1) {
      auto r = std::find_if(tile.reduce.begin(), tile.reduce.end(),
                            [&](const ReduceLoop& rl) { return rl.var == e.terms[0].var; });
      if (r != tile.reduce.end()) {
        const std::int64_t c = e.terms[0].coef;
        std::int64_t kmin, kmax;  // lo <= c*k + const <= hi - 1
        if (c > 0) {
          kmin = ceil_div(g.lo - e.constant, c);
          kmax = floor_div(g.hi - 1 - e.constant, c);
        } else {
          kmin = ceil_div(g.hi - 1 - e.constant, c);
          kmax = floor_div(g.lo - e.constant, c);
        }
        const std::int64_t begin =
            kmin > r->begin ? r->begin + ceil_div(kmin - r->begin, r->step) * r->step : r->begin;
        r->end = std::min(r->end, kmax + 1);
        r->begin = begin;
        if (r->end < r->begin) r->end = r->begin;
        continue;
      }
    }
    kept.push_back(g);
  }
  tile.guards = std::move(kept);
  // A tightened loop may have become empty: the remaining guards are then moot.
  VarRanges check = outer;
  if (!tile_ranges(tile, &check)) tile.guards.clear();
}

bool has_tile(const std::vector<Stmt>& body) {
  for (const Stmt& s : body) {
    if (std::holds_alternative<Tile>(s.node)) return true;
    if (const auto* l = std::get_if<Loop>(&s.node); l != nullptr && has_tile(l->body)) return true;
  }
  return false;
}

Loop loop_header(const Loop& l) {
  Loop h;
  h.var = l.var;
  h.begin = l.begin;
  h.end = l.end;
  h.step = l.step;
  h.kind = l.kind;
  h.label = l.label;
  return h;
}

void drop_empty_tiles(std::vector<Stmt>& body) {
  std::vector<Stmt> kept;
  for (Stmt& s : body) {
    if (auto* l = std::get_if<Loop>(&s.node)) {
      drop_empty_tiles(l->body);
      if (l->body.empty()) continue;
    } else if (auto* t = std::get_if<Tile>(&s.node)) {
      bool empty = false;
      for (const ReduceLoop& r : t->reduce) empty = empty || r.end <= r.begin;
      if (empty && t->accumulate) continue;
    }
    kept.push_back(std::move(s));
  }
  body = std::move(kept);
}

namespace {

// Whether `s` holds no tile and every store in it writes a scratch buffer.
bool is_operand_copy(const LoopNest& nest, const Stmt& s) {
  if (std::holds_alternative<Tile>(s.node)) return false;
  if (const auto* st = std::get_if<Store>(&s.node)) {
    return nest.buffers[static_cast<std::size_t>(st->dst.buffer)].kind == BufferKind::kScratch;
  }
  const auto& body = std::get<Loop>(s.node).body;
  return !body.empty() && std::all_of(body.begin(), body.end(),
                                      [&](const Stmt& inner) { return is_operand_copy(nest, inner); });
}

}  // namespace

std::vector<Stmt> take_prologue(LoopNest& nest) {
  const auto first = std::find_if(nest.body.begin(), nest.body.end(),
                                  [&](const Stmt& s) { return !is_operand_copy(nest, s); });
  std::vector<Stmt> prologue(std::make_move_iterator(nest.body.begin()),
                             std::make_move_iterator(first));
  nest.body.erase(nest.body.begin(), first);
  return prologue;
}

int output_buffer(const LoopNest& nest) {
  switch (nest.problem.output_role()) {
    case TensorRole::kX:
      return nest.buffer_of_kind(BufferKind::kX);
    case TensorRole::kW:
      return nest.buffer_of_kind(BufferKind::kW);
    case TensorRole::kY:
      return nest.buffer_of_kind(BufferKind::kY);
  }
  return -1;
}

void add_summary(LoopNest& nest, const std::string& token) {
  if (!nest.schedule_summary.empty()) nest.schedule_summary += ' ';
  nest.schedule_summary += token;
}

}  // namespace convjit::ir

namespace convjit::ir {

Stmt loop_nest(LoopNest& nest, const std::vector<std::int64_t>& extents,
               const std::vector<std::string>& names,
               const std::function<Stmt(const std::vector<Affine>&)>& body) {
  std::vector<VarId> vars;
  std::vector<Affine> values;
  for (const std::string& name : names) {
    vars.push_back(nest.new_var(name));
    values.push_back(Affine::var(vars.back()));
  }
  Stmt inner = body(values);
  for (std::size_t d = extents.size(); d-- > 0;) {
    Loop l;
    l.var = vars[d];
    l.end = extents[d];
    l.body.push_back(std::move(inner));
    inner = Stmt{std::move(l)};
  }
  return inner;
}

bool dense_images(const Buffer& b) {
  return b.dims.size() == 4 && b.strides[3] == 1 && b.strides[2] == b.dims[3] &&
         b.strides[1] == b.dims[2] * b.strides[2] && b.strides[0] == b.dims[1] * b.strides[1];
}

int add_copy_scratch(LoopNest& nest, int from, CopyScratch copy) {
  Buffer b = nest.buffers[static_cast<std::size_t>(from)];
  b.name = std::move(copy.name);
  b.kind = BufferKind::kScratch;
  b.role = copy.role;
  b.dtype = copy.dtype;
  if (!copy.strides.empty()) b.strides = std::move(copy.strides);
  return nest.add_buffer(std::move(b));
}

void read_tiles_from(std::vector<Stmt>& body, int from, int to) {
  for_each_tile(body, {}, [&](Tile& t, const VarRanges&) {
    for (Access* a : {&t.a, &t.b}) {
      if (a->buffer == from) a->buffer = to;
    }
  });
}

Stmt copy_nest(LoopNest& nest, const std::vector<std::int64_t>& extents,
               const std::vector<std::string>& names, int dst, int src, const CopyIndex& dst_index,
               const CopyIndex& src_index) {
  return loop_nest(nest, extents, names, [&](const std::vector<Affine>& v) {
    Store s;
    s.dst = Access{dst, dst_index(v)};
    s.has_src = true;
    s.src = Access{src, src_index ? src_index(v) : s.dst.index};
    return Stmt{std::move(s)};
  });
}

}  // namespace convjit::ir
