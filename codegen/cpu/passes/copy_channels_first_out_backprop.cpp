// Per-plane copies of dy for the NCHW depthwise input gradient. Its tiles take vectors along W
// straight from the caller's dy, so border_peel split every plane into a top and a bottom
// row, a left and a right column (single-lane tiles of up to 13 rows, one lane stored at a
// time) and an interior that starts one column in: never on a cache line, so never streamed,
// and at 14x14 planes the borders were half the work. Read through a copy, dy can be padded
// with zeros like the transposed dy of the W-vector form (pad_transposed_out_backprop, after
// the residue split), and the tiles then run guard-free over whole rows. At stride 2 the copy
// also repeats each column (below), so that W needs no residues.
//
// The copy is made inside the group loop, one group's M planes right before the tiles that
// read them, so they are still in L1 or L2 when read:
//
//   for n: for g:                      for n: for g:
//     tiles reading dy[n, h, w, M*g+o]   for o, h, w: dyp[n, h, w, o] = dy[n, h, w, M*g+o]
//                                        tiles reading dyp[n, h, w, o]
//
// dyp holds M planes per image, and one image per thread once privatize_batch_copies walks
// the batch in chunks. With fewer images than threads that does not happen, and the group
// loop must stay parallel: each group then copies into planes of its own, dyp[n, h, w, M*g+o]
// (a whole image, at a batch below the thread count).
#include <algorithm>
#include <optional>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

constexpr std::size_t kH = 1, kW = 2, kC = 3;  // dy's logical dims: n, oh, ow, oc

// Whether some tile guards its read of buffer `y` along H or W (the borders a padded copy
// removes).
bool guarded_reads(std::vector<Stmt>& body, int y) {
  bool guarded = false;
  for_each_tile(body, {}, [&](Tile& t, const VarRanges&) {
    for (const Access* a : {&t.a, &t.b}) {
      if (a->buffer != y) continue;
      for (const Guard& g : t.guards) {
        if (g.expr == a->index[kH] || g.expr == a->index[kW]) guarded = true;
      }
    }
  });
  return guarded;
}

// The lowered depthwise nest's batch and group loops: `for n: for g: ...`.
std::optional<std::pair<Loop*, Loop*>> batch_and_group(LoopNest& nest) {
  if (nest.body.size() != 1) return std::nullopt;
  auto* n = std::get_if<Loop>(&nest.body[0].node);
  if (n == nullptr || n->body.size() != 1) return std::nullopt;
  auto* g = std::get_if<Loop>(&n->body[0].node);
  if (g == nullptr || g->trip_count() != nest.problem.groups) return std::nullopt;
  return std::pair{n, g};
}

// Stride 2 along W, repeated columns. The stride residues would split each row into its even
// and odd columns, each a vector whose lanes are stored one at a time, every other element.
// Instead each dy column is copied twice, D[m] = dy[floor(m / 2)], and the taps are taken in
// pairs: column iw needs taps kw of the parity of iw + pad_left, at dy column
// floor((iw + pad_left) / 2) - j for the pair j, which is D[iw + pad_left - 2j]. So one
// contiguous vector of D against a vector of per-column weights,
// Wl[kh][j][c][iw] = w[kh][2j + (iw + pad_left) % 2][c] (0 past the filter's width), computes
// contiguous columns of dx: both residues at once, stored whole. Only an odd filter width's
// last pair multiplies a zero weight in every other lane.
struct RepeatedTaps {
  VarId kw = 0;   // the W tap's reduce variable
  VarId col = 0;  // dx's column variable
  Access* dy = nullptr;
  Access* w = nullptr;
  std::size_t w_guard = 0;
};

std::optional<RepeatedTaps> repeated_taps(LoopNest& nest, Tile& t, int y) {
  RepeatedTaps r;
  Access* dy = t.a.buffer == y ? &t.a : &t.b;
  Access* w = t.a.buffer == y ? &t.b : &t.a;
  if (dy->buffer != y || nest.buffers[static_cast<std::size_t>(w->buffer)].kind != BufferKind::kW) {
    return std::nullopt;
  }
  // dy's column (iw - kw + pad_left) / 2 over dx's column iw and the tap kw.
  const IndexExpr& e = dy->index[kW];
  if (e.divisor != 2 || e.numer.terms.size() != 2) return std::nullopt;
  for (const Term& term : e.numer.terms) {
    if (term.coef == -1) r.kw = term.var;
    if (term.coef == 1) r.col = term.var;
  }
  if (r.kw == r.col || !(w->index[1] == IndexExpr(Affine::var(r.kw)))) return std::nullopt;
  const auto g =
      std::find_if(t.guards.begin(), t.guards.end(), [&](const Guard& x) { return x.expr == e; });
  const bool tap_loop = std::any_of(t.reduce.begin(), t.reduce.end(), [&](const ReduceLoop& l) {
    return l.var == r.kw && l.begin == 0 && l.end == nest.problem.kw && l.step == 1;
  });
  if (g == t.guards.end() || !tap_loop) return std::nullopt;
  r.dy = dy;
  r.w = w;
  r.w_guard = static_cast<std::size_t>(g - t.guards.begin());
  return r;
}

// Rewrites the tile to read the repeated copy `s` of dy and the per-column weights, which a
// statement in front of the nest packs once per call.
void apply(LoopNest& nest, Tile& t, int s, const RepeatedTaps& r) {
  const ConvProblem& p = nest.problem;
  const std::int64_t pairs = (p.kw + 1) / 2;
  const std::int64_t width = (p.iw + 1) / 2 * 2;  // whole column pairs
  const VarId j = nest.new_var("jw");
  const Affine col = Affine::var(r.col);
  // D's column, as dy's numerator with the tap kw replaced by the pair's first tap 2j.
  const IndexExpr d_col(r.dy->index[kW].numer.substitute(r.kw, Affine::var(j, 2)));
  const int w = r.w->buffer;
  const Access w_old = *r.w;
  Buffer packed;
  packed.name = "wl";
  packed.kind = BufferKind::kScratch;
  packed.role = BufferRole::kFilterCopy;
  packed.dtype = accumulator_dtype(p.dtype);
  packed.dims = {p.kh, pairs, p.oc, width};
  packed.strides = {pairs * p.oc * width, p.oc * width, width, 1};
  const int wl = nest.add_buffer(std::move(packed));

  r.dy->index[kW] = d_col;
  t.guards[r.w_guard] = Guard{d_col, 0, 2 * p.ow};
  *r.w = Access{wl, {w_old.index[0], IndexExpr(Affine::var(j)), w_old.index[3], IndexExpr(col)}};
  for (ReduceLoop& l : t.reduce) {
    if (l.var != r.kw) continue;
    l.var = j;
    l.end = pairs;
  }

  // Wl[kh][j][c][2*m + q] = w[kh][2j + (q + pad_left) % 2][c]: one loop nest (one dispatch to
  // the threads) storing every (j, q).
  Stmt pack = loop_nest(nest, {p.kh, p.oc}, {"lkh", "lc"}, [&](const std::vector<Affine>& v) {
    Loop cols;
    cols.var = nest.new_var("lw");
    cols.end = width / 2;
    const Affine m = Affine::var(cols.var);
    for (std::int64_t jj = 0; jj < pairs; ++jj) {
      for (std::int64_t q = 0; q < 2; ++q) {
        const std::int64_t kw = 2 * jj + (q + p.pad_left) % 2;
        Store st;
        st.dst = Access{wl, {v[0], Affine::constant_of(jj), v[1], m * 2 + q}};
        st.has_src = kw < p.kw;  // past the filter's width: a zero
        if (st.has_src) {
          st.src = Access{w, {v[0], Affine::constant_of(kw), Affine::constant_of(0), v[1]}};
        }
        cols.body.push_back(Stmt{std::move(st)});
      }
    }
    return Stmt{std::move(cols)};
  });
  nest.body.insert(nest.body.begin(), std::move(pack));
}

}  // namespace

LoopNest copy_channels_first_out_backprop(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  if (!plan.channels_first_out_backprop_copy) return nest;
  const int y = nest.buffer_of_kind(BufferKind::kY);
  const auto loops = batch_and_group(nest);
  if (y < 0 || !loops || !guarded_reads(nest.body, y)) return nest;
  // Plain variables, not a structured binding: the lambdas below capture them.
  Loop* batch = loops->first;
  Loop* group = loops->second;
  const Affine n = Affine::var(batch->var);
  const std::int64_t m = p.oc_per_group();                // the depth multiplier M
  const Affine first_plane = Affine::var(group->var, m);  // M*g
  // Every read of dy must be image n, planes M*g + [0, M).
  bool ok = true;
  Tile* tile = nullptr;
  for_each_tile(group->body, {}, [&](Tile& t, const VarRanges&) {
    ok = ok && t.c.buffer != y && tile == nullptr;
    tile = &t;
    for (const Access* a : {&t.a, &t.b}) {
      if (a->buffer != y) continue;
      const Affine o = a->index[kC].numer - first_plane;
      ok = ok && a->index[0].divisor == 1 && a->index[0].numer == n && a->index[kC].divisor == 1 &&
           o.coef_of(group->var) == 0 && o.coef_of(batch->var) == 0;
    }
  });
  if (!ok || tile == nullptr) return nest;
  std::optional<RepeatedTaps> repeat;
  if (plan.repeated_columns) repeat = repeated_taps(nest, *tile, y);
  // Planes of their own per group where the group loop is what the threads will split.
  const bool per_group = plan.planes_per_group;
  Buffer copy = nest.buffers[static_cast<std::size_t>(y)];
  copy.name = "dyp";
  copy.kind = BufferKind::kScratch;
  copy.role = BufferRole::kOutBackpropCopy;
  const std::int64_t oh = copy.dims[kH], ow = copy.dims[kW];
  const std::int64_t width = repeat ? 2 * ow : ow;  // each column twice when repeated
  copy.dims[kW] = width;
  // In the accumulator type: the copy widens 16-bit dy once, where the tiles would widen each
  // dy vector at every tap (the repeating copy's vpermps also needs f32).
  copy.dtype = accumulator_dtype(p.dtype);
  if (!per_group) copy.dims[kC] = m;
  copy.strides = {copy.dims[kC] * oh * width, width, 1, oh * width};
  const int s = nest.add_buffer(std::move(copy));
  for_each_access(group->body, [&](Access& a, bool) {
    if (a.buffer != y) return;
    a.buffer = s;
    if (!per_group) a.index[kC].numer = a.index[kC].numer - first_plane;
  });
  if (repeat) apply(nest, *tile, s, *repeat);

  // W innermost: the copy runs along the contiguous dim of both; repeated, each dy column is
  // stored to two adjacent columns.
  Stmt fill = loop_nest(nest, {m, oh}, {"po", "poh"}, [&](const std::vector<Affine>& v) {
    const Affine plane = first_plane + v[0];
    Loop cols;
    cols.var = nest.new_var("pow");
    cols.end = ow;
    const Affine col = Affine::var(cols.var);
    for (std::int64_t r = 0; r < (repeat ? 2 : 1); ++r) {
      Store st;
      st.dst = Access{s, {n, v[1], repeat ? col * 2 + r : col, per_group ? plane : v[0]}};
      st.has_src = true;
      st.src = Access{y, {n, v[1], col, plane}};
      cols.body.push_back(Stmt{std::move(st)});
    }
    return Stmt{std::move(cols)};
  });
  group->body.insert(group->body.begin(), std::move(fill));
  return nest;
}

}  // namespace convjit::cpu
