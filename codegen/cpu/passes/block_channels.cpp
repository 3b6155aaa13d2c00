// Channel blocking (backprop data, NHWC, packed filter). Each dx tile reduces over every
// (kh, kw, oc) for its column block of input channels, so a tile streams a KH*KW*OC*cols slice
// of the packed filter, and the next tile (the next column block of the same pixels) another:
// with a few hundred channels the whole filter went through the caches for every few pixels.
// Here the column blocks move outside the pixel loops, so one block's slice serves a whole row
// of pixels (or a whole image) before the next block starts:
//   - around each row, when the whole packed filter stays in L2 between rows: dy's rows are
//     then read once for all blocks;
//   - around the whole image otherwise: each block's slice stays in L2 while the image is
//     swept, and dy is swept once per block.
// The packed filter becomes [block][kh][kw][oc][cols], so a block's slice is one contiguous
// run (the [kh][kw][oc][ic] layout strides it by IC and maps it onto a few cache sets).
//
// Cutting the oc reduction into blocks as well (to keep a slice in L1, accumulating into dx)
// measured slower on every shape of the benchmark suite: the shorter reductions expose the
// dx reloads and the first dy misses of every tile.
//
//   for n:                       for n:                          for n:
//     for ih:                      for ih:                         for cb in [0, IC/B):
//       for iw:             ->       for cb in [0, IC/B):    or      for ih:
//         for i in [0, IC):            for iw:                         for iw:
//           tile                         for i in [0, B): tile           for i in [0, B): tile
#include <fmt/format.h>

#include <algorithm>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"
#include "codegen/cpu/tile_model.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

/// Calls fn for every (column loop, tile) pair: a loop whose body is exactly one tile. Returns
/// false when some tile sits elsewhere.
bool for_each_column(std::vector<Stmt>& body, const std::function<void(Loop&, Tile&)>& fn) {
  for (Stmt& s : body) {
    if (std::holds_alternative<Tile>(s.node)) return false;
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr) continue;
    if (l->body.size() == 1 && std::holds_alternative<Tile>(l->body[0].node)) {
      fn(*l, std::get<Tile>(l->body[0].node));
    } else if (!for_each_column(l->body, fn)) {
      return false;
    }
  }
  return true;
}

bool is_var(const IndexExpr& e, VarId v) { return e.divisor == 1 && e.numer == Affine::var(v); }

bool independent_of(const Access& a, VarId v) {
  for (const IndexExpr& e : a.index) {
    if (e.numer.coef_of(v) != 0) return false;
  }
  return true;
}

/// Calls fn for every row loop: a loop whose children are all pixel loops (a loop whose body
/// is exactly one column loop). Returns false when some column loop is reached otherwise.
bool for_each_row(std::vector<Stmt>& body, const std::function<void(Loop&)>& fn) {
  auto is_pixel = [](const Stmt& s) {
    const auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr || l->body.size() != 1) return false;
    const auto* c = std::get_if<Loop>(&l->body[0].node);
    return c != nullptr && c->body.size() == 1 && std::holds_alternative<Tile>(c->body[0].node);
  };
  for (Stmt& s : body) {
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr) return false;
    if (is_pixel(s)) return false;
    if (!l->body.empty() && std::all_of(l->body.begin(), l->body.end(), is_pixel)) {
      fn(*l);
    } else if (!for_each_row(l->body, fn)) {
      return false;
    }
  }
  return true;
}

class BlockChannels {
 public:
  BlockChannels(LoopNest& nest, int wp) : nest_(nest), wp_(wp) {}

  /// Whether every tile under `body` has the shape this pass rewrites: a 1x1 tile in a column
  /// loop over all input channels, b = wp[kh, kw, o, i] and the last reduce loop o over all OC,
  /// each column loop in a pixel loop in a row loop.
  bool matches(std::vector<Stmt>& body) {
    const ConvProblem& p = nest_.problem;
    bool ok = true, any = false;
    const bool placed = for_each_column(body, [&](Loop& col, Tile& t) {
      any = true;
      ok = ok && t.rows == 1 && t.cols == 1 && col.begin == 0 && col.end == p.ic &&
           col.step == 1 && !t.reduce.empty() && t.c.index.size() == 4 &&
           is_var(t.c.index[3], col.var) && t.b.buffer == wp_ && t.b.index.size() == 4 &&
           is_var(t.b.index[3], col.var) && independent_of(t.a, col.var);
      if (!ok) return;
      const ReduceLoop& o = t.reduce.back();
      ok = o.begin == 0 && o.end == p.oc && o.step == 1 && is_var(t.b.index[2], o.var);
    });
    return placed && ok && any && for_each_row(body, [](Loop&) {});
  }

  /// `body` as column blocks of `cols` input channels: a loop over the whole blocks and one
  /// over the partial block, each tile writing its block's channels from its packed slice.
  std::vector<Stmt> channel_blocks(const std::vector<Stmt>& body, std::int64_t cols) {
    const ConvProblem& p = nest_.problem;
    std::vector<Stmt> out;
    const std::int64_t whole = p.ic / cols;
    auto blocks = [&](std::int64_t begin, std::int64_t width, const char* label) {
      Loop cb;
      cb.var = nest_.new_var("cb", VarRole::kInChannelBlock);
      cb.begin = begin;
      cb.end = begin == whole ? whole + 1 : whole;
      cb.label = label;
      cb.body = body;
      for_each_column(cb.body, [&](Loop& col, Tile& t) {
        col.end = width;
        t.b.index.insert(t.b.index.begin(), IndexExpr(Affine::var(cb.var)));
        t.c.index[3] = IndexExpr(Affine::var(col.var) + Affine::var(cb.var, cols));
      });
      out.push_back(Stmt{std::move(cb)});
    };
    if (whole > 0) blocks(0, cols, "channel blocks");
    if (p.ic % cols != 0) blocks(whole, p.ic % cols, "channel tail");
    return out;
  }

  /// The packing copy for the blocked layout: wp[cb, kh, kw, o, i] = w[kh, kw, cb*B + i, o].
  std::vector<Stmt> pack(std::int64_t cols) {
    const ConvProblem& p = nest_.problem;
    const int w = nest_.buffer_of_kind(BufferKind::kW);
    std::vector<Stmt> out;
    auto copy = [&](std::int64_t first_block, std::int64_t blocks, std::int64_t width) {
      out.push_back(loop_nest(nest_, {blocks, p.kh, p.kw, p.oc, width},
                              {"pb", "pkh", "pkw", "po", "pi"}, [&](const std::vector<Affine>& v) {
                                const Affine block = v[0] + first_block;
                                Store s;
                                s.dst = Access{wp_, {block, v[1], v[2], v[3], v[4]}};
                                s.has_src = true;
                                s.src = Access{w, {v[1], v[2], block * cols + v[4], v[3]}};
                                return Stmt{std::move(s)};
                              }));
    };
    if (p.ic / cols > 0) copy(0, p.ic / cols, cols);
    if (p.ic % cols != 0) copy(p.ic / cols, 1, p.ic % cols);
    return out;
  }

 private:
  LoopNest& nest_;
  int wp_;
};

}  // namespace

LoopNest block_channels(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  if (plan.channel_block == 0) return nest;
  int wp = -1;
  for (std::size_t b = 0; b < nest.buffers.size(); ++b) {
    if (nest.buffers[b].role == BufferRole::kPackedFilter && nest.buffers[b].dims.size() == 4) {
      wp = static_cast<int>(b);
    }
  }
  // The tiles live under one top-level loop (the batch); the packing copy is another top-level
  // statement (operand copies and an output copy may stand around them).
  std::size_t batch_at = nest.body.size(), pack_at = nest.body.size();
  for (std::size_t s = 0; s < nest.body.size(); ++s) {
    bool tiles = false, packs = false;
    std::vector<Stmt> one{nest.body[s]};
    for_each_tile(one, {}, [&](Tile&, const VarRanges&) { tiles = true; });
    const Stmt* inner = &nest.body[s];
    while (const auto* l = std::get_if<Loop>(&inner->node)) {
      if (l->body.size() != 1) break;
      inner = &l->body[0];
    }
    if (const auto* st = std::get_if<Store>(&inner->node)) packs = st->dst.buffer == wp;
    if (tiles) {
      if (batch_at != nest.body.size()) return nest;
      batch_at = s;
    }
    if (packs) pack_at = s;
  }
  if (wp < 0 || batch_at == nest.body.size() || pack_at == nest.body.size() ||
      !std::holds_alternative<Loop>(nest.body[batch_at].node)) {
    return nest;
  }
  Loop& batch = std::get<Loop>(nest.body[batch_at].node);
  BlockChannels blocker(nest, wp);
  if (!blocker.matches(batch.body)) return nest;

  const std::int64_t cols = plan.channel_block;
  if (!plan.channel_blocks_around_rows) {
    batch.body = blocker.channel_blocks(batch.body, cols);
  } else {
    for_each_row(batch.body, [&](Loop& row) { row.body = blocker.channel_blocks(row.body, cols); });
  }
  Buffer& packed = nest.buffers[static_cast<std::size_t>(wp)];
  packed.dims = {ceil_div(p.ic, cols), p.kh, p.kw, p.oc, cols};
  packed.strides = {p.kh * p.kw * p.oc * cols, p.kw * p.oc * cols, p.oc * cols, cols, 1};
  std::vector<Stmt> body;
  for (std::size_t s = 0; s < nest.body.size(); ++s) {
    if (s != pack_at) {
      body.push_back(std::move(nest.body[s]));
      continue;
    }
    for (Stmt& copy : blocker.pack(cols)) body.push_back(std::move(copy));
  }
  nest.body = std::move(body);
  return nest;
}

}  // namespace convjit::cpu
