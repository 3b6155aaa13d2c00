// Per-plane copies of dy for the NCHW depthwise input gradient. Its tiles take vectors along W
// straight from the caller's dy, so border_peel split every plane into a top and a bottom
// row, a left and a right column (single-lane tiles of up to 13 rows, one lane stored at a
// time) and an interior that starts one column in: never on a cache line, so never streamed,
// and at 14x14 planes the borders were half the work. Read through a copy, dy can be padded
// with zeros like the transposed dy of the W-vector form (pad_transposed_out_backprop, next),
// and the tiles then run guard-free over whole rows.
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
#include <optional>

#include "ir/passes/pass_util.hpp"
#include "ir/passes/passes.hpp"

namespace convjit::ir {
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

}  // namespace

LoopNest copy_channels_first_out_backprop(LoopNest nest, const Target& target) {
  const ConvProblem& p = nest.problem;
  if (p.direction != ConvDirection::kBackpropData || p.format != DataFormat::kNCHW ||
      !p.depthwise || target.vector_registers == 0 || p.is_empty()) {
    return nest;
  }
  const int y = nest.buffer_of_kind(BufferKind::kY);
  const auto loops = batch_and_group(nest);
  if (y < 0 || !loops || !guarded_reads(nest.body, y)) return nest;
  auto [batch, group] = *loops;
  const Affine n = Affine::var(batch->var);
  const std::int64_t m = p.oc_per_group();                // the depth multiplier M
  const Affine first_plane = Affine::var(group->var, m);  // M*g
  // Every read of dy must be image n, planes M*g + [0, M).
  bool ok = true;
  for_each_tile(group->body, {}, [&](Tile& t, const VarRanges&) {
    ok = ok && t.c.buffer != y;
    for (const Access* a : {&t.a, &t.b}) {
      if (a->buffer != y) continue;
      const Affine o = a->index[kC].numer - first_plane;
      ok = ok && a->index[0].divisor == 1 && a->index[0].numer == n && a->index[kC].divisor == 1 &&
           o.coef_of(group->var) == 0 && o.coef_of(batch->var) == 0;
    }
  });
  if (!ok) return nest;

  // Planes of their own per group where the group loop is what the threads will split.
  const bool per_group = p.n < useful_threads(p, target);
  Buffer copy = nest.buffers[static_cast<std::size_t>(y)];
  copy.name = "dyp";
  copy.kind = BufferKind::kScratch;
  const std::vector<std::int64_t> dims = copy.dims;
  if (!per_group) {
    copy.dims[kC] = m;
    copy.strides = {m * dims[kH] * dims[kW], dims[kW], 1, dims[kH] * dims[kW]};
  }
  const int s = nest.add_buffer(std::move(copy));
  for_each_access(group->body, [&](Access& a, bool) {
    if (a.buffer != y) return;
    a.buffer = s;
    if (!per_group) a.index[kC].numer = a.index[kC].numer - first_plane;
  });
  // W innermost: the copy runs along the contiguous dim of both.
  Stmt fill = loop_nest(nest, {m, dims[kH], dims[kW]}, {"po", "poh", "pow"},
                        [&](const std::vector<Affine>& v) {
                          const Affine plane = first_plane + v[0];
                          Store st;
                          st.dst = Access{s, {n, v[1], v[2], per_group ? plane : v[0]}};
                          st.has_src = true;
                          st.src = Access{y, {n, v[1], v[2], plane}};
                          return Stmt{std::move(st)};
                        });
  group->body.insert(group->body.begin(), std::move(fill));
  add_summary(nest, "dyp");
  return nest;
}

}  // namespace convjit::ir
