// Zero borders around the transposed dy (backprop data in the W-vector form). There the tiles'
// vectors run along W, and border_peel would give every W position whose taps leave dy a tile
// of its own: a single-lane vector per column. With 3 to 5 border columns per side that was a
// fifth of small_odd's outputs (23 wide) computed at an eighth of the lanes, and one more tile
// variant per border column and residue in every kernel's code. The transposed copy is made by
// the kernel anyway, so it gets zero rows and columns around each image, wide enough for every
// tap any tile reaches; the guards that kept the taps inside dy then always hold on real data
// or read a zero, and are dropped. The residue rows become one guard-free loop each. The NCHW
// depthwise input gradient's copy of dy (copy_channels_first_out_backprop) is padded the same
// way; there W is contiguous in dy itself, and the copy holds one group's planes.
#include <algorithm>
#include <array>
#include <functional>
#include <numeric>
#include <optional>
#include <span>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// The logical dims of dy (and of its copies): n, oh, ow, oc.
constexpr std::size_t kH = 1, kW = 2, kC = 3;

// The top-level loops over the batch that write buffer `s`, image by image: every access to
// `s` under them indexes its first dim by the loop's own variable, and every write is a Store
// (a copy made by the loop, either alone or before the tiles that read it). Empty when some
// write to `s` is anything else.
std::vector<Loop*> per_image_copies(LoopNest& nest, int s) {
  std::vector<Loop*> copies;
  for (Stmt& st : nest.body) {
    bool writes = false;
    for_each_access(std::span(&st, 1), [&](const Access& a, bool write) {
      if (a.buffer == s && write) writes = true;
    });
    if (!writes) continue;
    auto* l = std::get_if<Loop>(&st.node);
    if (l == nullptr) return {};
    const Affine own = Affine::var(l->var);
    bool ok = true;
    for_each_access(l->body, [&](const Access& a, bool) {
      if (a.buffer != s) return;
      ok = ok && a.index[0].divisor == 1 && a.index[0].numer == own;
    });
    for_each_tile(l->body, {}, [&](Tile& t, const VarRanges&) { ok = ok && t.c.buffer != s; });
    if (!ok) return {};
    copies.push_back(l);
  }
  return copies;
}

// Strides of a dense buffer of `dims` whose dims nest in the order `old` strides them (the
// largest stride outermost): [n][oh][oc][ow] for the transposed dy, [n][oc][oh][ow] for NCHW.
std::vector<std::int64_t> dense_strides(const std::vector<std::int64_t>& dims,
                                        const std::vector<std::int64_t>& old) {
  std::vector<std::size_t> order(dims.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Dims of one element tie: the earlier dim nests outside, as in the logical order.
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return old[a] != old[b] ? old[a] < old[b] : a > b;
  });
  std::vector<std::int64_t> strides(dims.size());
  std::int64_t stride = 1;
  for (std::size_t d : order) {
    strides[d] = stride;
    stride *= dims[d];
  }
  return strides;
}

// Padding of up to this many rows or columns a side is always allowed, however small the image.
constexpr std::int64_t kMinPadAllowance = 16;

// A loop over [begin, end) of a fresh variable around `body(var)`.
Stmt loop_over(LoopNest& nest, const char* name, std::int64_t begin, std::int64_t end,
               const std::function<Stmt(const Affine&)>& body) {
  Loop l;
  l.var = nest.new_var(name);
  l.begin = begin;
  l.end = end;
  l.body.push_back(body(Affine::var(l.var)));
  return Stmt{std::move(l)};
}

// Zero stores into image `image` of `s` over rows [h0, h1) and columns [w0, w1), every
// channel, W innermost (the contiguous dimension).
Stmt zero_box(LoopNest& nest, int s, const Affine& image, std::int64_t h0, std::int64_t h1,
              std::int64_t w0, std::int64_t w1) {
  const std::int64_t channels = nest.buffers[static_cast<std::size_t>(s)].dims[kC];
  return loop_over(nest, "zh", h0, h1, [&](const Affine& h) {
    return loop_over(nest, "zo", 0, channels, [&](const Affine& o) {
      return loop_over(nest, "zw", w0, w1, [&](const Affine& w) {
        Store st;
        st.dst = Access{s, {IndexExpr(image), IndexExpr(h), IndexExpr(w), IndexExpr(o)}};
        return Stmt{std::move(st)};
      });
    });
  });
}

// Pads buffer `s`, filled by the loops `copies`, where tiles guard its H or W index and drops
// those guards; returns whether it added zeros (guards that always held are dropped all the
// same).
bool pad(LoopNest& nest, int s, const std::vector<Loop*>& copies) {
  Buffer& buf = nest.buffers[static_cast<std::size_t>(s)];
  // Per padded dim (H, W): the lowest and highest index any tile reads behind a guard.
  std::array<Interval, 2> reach{Interval{0, buf.dims[kH] - 1}, Interval{0, buf.dims[kW] - 1}};
  bool guarded = false, ok = true;
  auto guard_of = [&](const Tile& t, const IndexExpr& e, std::size_t d) {
    return std::find_if(t.guards.begin(), t.guards.end(), [&](const Guard& g) {
      return g.expr == e && g.lo == 0 && g.hi == buf.dims[d];
    });
  };
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges& outer) {
    if (t.c.buffer == s) ok = false;
    VarRanges ranges = outer;
    if (!tile_ranges(t, &ranges)) return;
    for (const Access* a : {&t.a, &t.b}) {
      if (a->buffer != s) continue;
      for (std::size_t d : {kH, kW}) {
        const IndexExpr& e = a->index[d];
        if (guard_of(t, e, d) == t.guards.end()) continue;
        const std::optional<Interval> r = interval_of(e.numer, ranges);
        if (e.divisor != 1 || !r) {
          ok = false;
          continue;
        }
        Interval& x = reach[d - kH];
        x.lo = std::min(x.lo, r->lo);
        x.hi = std::max(x.hi, r->hi);
        guarded = true;
      }
    }
  });
  if (!ok || !guarded) return false;
  // Zeros pay for dropped guards only while they are about as many as the data: a window whose
  // taps reach far past the image (a huge dilation reads one tap in the image) keeps its
  // guards, and the padded sizes below stay far from overflowing.
  for (std::size_t d : {kH, kW}) {
    const std::int64_t extent = buf.dims[d];
    const std::int64_t most = std::max<std::int64_t>(extent, kMinPadAllowance);
    const Interval& x = reach[d - kH];
    if (x.lo < -most || x.hi > extent - 1 + most) return false;
  }

  const std::int64_t top = -reach[0].lo, left = -reach[1].lo;
  const std::int64_t oh = buf.dims[kH], ow = buf.dims[kW];
  const std::int64_t hp = reach[0].hi + 1 + top, wp = reach[1].hi + 1 + left;
  // Guards go first, while the indices still match them.
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    for (const Access* a : {&t.a, &t.b}) {
      if (a->buffer != s) continue;
      for (std::size_t d : {kH, kW}) {
        auto g = guard_of(t, a->index[d], d);
        if (g != t.guards.end()) t.guards.erase(g);
      }
    }
  });
  for_each_access(nest.body, [&](Access& a, bool) {
    if (a.buffer != s) return;
    a.index[kH].numer.constant += top;
    a.index[kW].numer.constant += left;
  });
  buf.dims[kH] = hp;
  buf.dims[kW] = wp;
  buf.strides = dense_strides(buf.dims, buf.strides);

  for (Loop* l : copies) {
    const Affine image = Affine::var(l->var);
    std::vector<Stmt> zeros;
    if (left > 0) zeros.push_back(zero_box(nest, s, image, 0, hp, 0, left));
    if (wp > left + ow) zeros.push_back(zero_box(nest, s, image, 0, hp, left + ow, wp));
    if (top > 0) zeros.push_back(zero_box(nest, s, image, 0, top, left, left + ow));
    if (hp > top + oh) zeros.push_back(zero_box(nest, s, image, top + oh, hp, left, left + ow));
    l->body.insert(l->body.begin(), std::make_move_iterator(zeros.begin()),
                   std::make_move_iterator(zeros.end()));
  }
  return top > 0 || left > 0 || hp > top + oh || wp > left + ow;
}

}  // namespace

LoopNest pad_transposed_out_backprop(LoopNest nest, const CpuPlan& plan) {
  const int y = nest.buffer_of_kind(BufferKind::kY);
  if (!plan.pad_out_backprop_copies || y < 0) return nest;
  for (std::size_t i = 0; i < nest.buffers.size(); ++i) {
    const Buffer& b = nest.buffers[i];
    // A scratch copy of dy's planes with W contiguous (each column repeated, for the NCHW
    // depthwise repeated taps): the W-vector form's operand.
    const Buffer& dy = nest.buffers[static_cast<std::size_t>(y)];
    if (b.kind != BufferKind::kScratch || b.dims.size() != dy.dims.size() ||
        b.dims[0] != dy.dims[0] || b.dims[kH] != dy.dims[kH] || b.strides[kW] != 1) {
      continue;
    }
    const int s = static_cast<int>(i);
    const std::vector<Loop*> copies = per_image_copies(nest, s);
    if (!copies.empty()) pad(nest, s, copies);
  }
  return nest;
}

}  // namespace convjit::cpu
