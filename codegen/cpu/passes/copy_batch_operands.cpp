// Per-thread copies of the batch's operands for 16-bit filter gradients (NHWC), made once the
// schedule is final: image pairs for `vdpbf16ps`, or else dy (and x) widened to f32.
//
// Image pairs, for bfloat16 on CPUs with avx512_bf16. `vdpbf16ps` adds
// two products per f32 lane, at twice the FMA rate, when both members of each pair sit in one
// 32-bit word: acc[v] += a[2k]*b[2k][v] + a[2k+1]*b[2k+1][v]. The filter gradient reduces over
// (n, oh, ow), and neither x nor dy keeps two reduction points side by side (NHWC puts a pixel's
// channels together). Pairing along the batch makes one pair layout serve every tap, stride
// and dilation: points (n, oh, ow) and (n+1, oh, ow) read the same x and dy positions of two
// images. Once the schedule is final, the images go two at a time through copies that
// interleave them, per thread (the innermost parallel loop around gives the slot):
//
//   blocked (block_reduction's per-chunk batch loops):
//     for nb "batch":                      for np "image pairs":
//       tiles: dW += x[e]*dy[e]      ->      xq[slot][0][k][m]  = x[e(2np + m)][k]   (k: h, w, i)
//                                            dyq[slot][0][k][m] = dy[e(2np + m)][k]  (k: oh, ow, o)
//                                            paired tiles on xq[slot][0], dyq[slot][0]
//                                          (an odd last image: the tiles as they were)
//   unblocked (everything fits in L2, so the tiles reduce over the images themselves):
//     tiles: reduce n in [0, len)    ->    xq[slot][j][k][m] = x[base + 2j + m][k] for every pair j
//                                          paired tiles: reduce n in [0, len/2) on xq[slot][n]
//                                          (len even, and one pair or copies within half the L2)
//
//   one image (a batch loop of one image per call or thread, cut into row chunks):
//     for ob "row chunks":                for obp "row pairs":
//       tiles: dW += x[e]*dy[e]      ->      xq[slot][0][k][m]  = x[e][w(ob = 2obp + m)][k]
//                                            dyq[slot][0][k][m] = dy[e][w(ob = 2obp + m)][k]
//                                            paired tiles on xq[slot][0], dyq[slot][0]
//                                          (an odd last chunk, and a loop of one chunk: the
//                                           second members zero in both copies)
//     where w(ob) is the window of rows chunk ob's tiles read. The tiles' taps were cut to the
//     rows that exist before the chunks were made (border_peel), so both members of a pair are
//     rows of the image: a pair never multiplies padding, and a zero partner adds 0 x 0 (an
//     Inf in dy never meets a padding zero). Without one pair of real chunks (three chunks,
//     each a loop of its own) the tiles run on widened copies instead: a zero partner runs at
//     the f32 FMA rate and copies more. shapes.txt's batch1_3x3 (56x56, 64 -> 64, one-row
//     chunks) on Zen 4: 205 -> 380-394 GFLOP/s on two threads (0.53x -> 0.98-1.04x oneDNN's
//     bfloat16 on TF layouts), 214 on one thread (97% of the vdpbf16ps peak).
//
// x's pair is then one dword per input channel (the row broadcast) and dyq's pairs are dword
// lanes along the output channels (the column vector), the form emit_paired_tile takes.
//
// On AMX (the plan's input_pairs_by_channel) the tiles multiply 16 reduction steps at once:
// a row tile holds, per input channel, the pairs of 16 consecutive pixels, and dyq's pairs at
// 16 consecutive pixels (rows 4*C bytes apart) already form a column tile. So x's pairs are
// copied once more, transposed into xqc[slot][pair][row][channel][column][2] (per window
// where rows are narrow: [channel][pixel]), where a channel's columns lie side by side; at a
// column stride s each residue mod s of a row's columns lies together, [channel][residue][q],
// so the columns a tile reads (q*s + its tap's constant) are again consecutive. The tiles
// read x there, and xq holds only the pair on its way. dy's pairs, whose column tiles read 16
// pixels 4*C bytes apart, take the plan's pixel padding where those would crowd a few L1 sets
// (dyq[slot][pair][pixel * (C + padding) + channel][m], copied pixel by pixel). Each
// copy walks an image as one run (each image of x and dy lies in one) and stores both members
// of a pair per element, which the emitter turns into vector interleaves. The copies read each
// image once, as the tiles did. A batch loop that is itself parallel, tiles that read other images,
// or an odd unblocked image count keep the widening f32 tiles, and take the widened copies below.
//
// Without the dot product (bf16 on a CPU without avx512_bf16, f16 everywhere, and bf16 tiles
// left unpaired on a CPU with it: one unblocked image, or one per thread) the same places
// take one image at a time: its dy is widened into the slot (`dyw`, [slot][image][k], f32)
// before its tiles, which then load plain f32 column vectors. Each dy vector is otherwise
// widened at every point that reads it, once per tap and input-channel block (1.3-2.3x on
// AVX2: resnet_3x3_s1 bf16 84 -> 54 ms on one thread). x likewise (`xw`) where each of its
// elements is broadcast at least four times, so the tiles convert nothing (f16 resnet_3x3_s1
// 71 -> 51 ms, bf16 54 -> 51; resnet_1x1's x, broadcast twice per element, stays).
//
// f32 and f64 filter gradients take the same copies (`x`, `dy`, in their own dtype) where the
// plan pads their pixels: an operand whose pixels are a multiple of 512 bytes apart puts the
// lines of consecutive reduce points into a few L1 sets (plan_filter_gradient.cpp,
// pixel_padding), so the copy lays each pixel out a line or more further apart,
// [slot][image][pixel][channels + padding], and the tiles read it there. 16-bit widened copies
// take the same padding.
//
// Either copy holds only the window of each image that its slot's tiles read: a thread that
// takes some rows of every image (block_reduction's row split) copies those rows, not the
// whole image (bf16 batch1_3x3 on 2 AVX2 threads: 800 KB of f32 dy per thread, past L2).
// And where one image's copy would not stay in half the L2, a blocked batch loop makes it per
// row chunk, inside the chunk loop, so the tiles read it from L1/L2 and the scratch holds a
// chunk (AVX-512 bf16 resnet_1x1: 71 KB per thread instead of a 4 MB pair). dy's rows are
// disjoint between chunks; x's overlap by the filter's height less one, so x is copied per
// chunk only where that repeats little.
#include <algorithm>
#include <array>
#include <iterator>
#include <optional>
#include <set>

#include "codegen/cpu/passes/passes.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

class BatchOperandCopies {
 public:
  /// `pairs`: interleave image pairs for vdpbf16ps; otherwise copy each image's operands in
  /// the accumulator's dtype: for 16-bit types dy and, where that pays, x (widened); for f32
  /// and f64 those the plan pads. `budget`: the plan's most bytes a copy may take and still be
  /// read from L2.
  BatchOperandCopies(LoopNest& nest, const CpuPlan& plan, bool pairs)
      : nest_(nest),
        budget_(plan.copy_budget_bytes),
        filter_bytes_(plan.problem.elements(TensorRole::kW) *
                      dtype_size(accumulator_dtype(plan.problem.dtype))),
        pairs_(pairs) {
    x_ = nest_.buffer_of_kind(BufferKind::kX);
    y_ = nest_.buffer_of_kind(BufferKind::kY);
    by_channel_ = pairs_ && plan.input_pairs_by_channel && addressable_by_pixel(x_);
    const std::int64_t width = buffer(x_).strides[1] / buffer(x_).strides[2];
    by_row_ = by_channel_ && width >= kPairsByChannelBlock;
    stride_ = std::max<std::int64_t>(nest_.problem.stride_w, 1);
    // Residues of a column stride need rows of their own.
    by_channel_ = by_channel_ && (stride_ == 1 || by_row_);
    if (pairs_) {
      // dy's pairs padded per pixel where the plan pads them (AMX: a column tile's 16 rows are
      // 16 pixels of dyq, 4*C bytes apart).
      y_padding_ = addressable_by_pixel(y_) ? plan.y_pixel_padding : 0;
    } else {
      // Unpaired tiles where pairs were planned (no pair to form) keep their unpadded copies.
      const bool planned_pairs = plan.batch_copies == BatchCopies::kPairs;
      x_padding_ = planned_pairs ? 0 : plan.x_pixel_padding;
      y_padding_ = planned_pairs ? 0 : plan.y_pixel_padding;
      // 16-bit types widen (also bfloat16 tiles left unpaired where pairs were planned).
      restride_ = plan.batch_copies == BatchCopies::kRestride;
      const bool widening = !restride_;
      copy_x_ = (widening && x_pays_for_its_copy()) || x_padding_ > 0;
      copy_y_ = widening || y_padding_ > 0;
    }
  }

  /// Whether the pairs formed are all of row chunks of one image (pair_rows), none of images.
  bool only_row_pairs() const { return image_pairs_ == 0 && row_pairs_ > 0; }
  /// How many places formed pairs of real data: of images, or of row chunks (not only
  /// chunks paired with zeros).
  int real_pairs() const { return image_pairs_ + row_pairs_; }

  /// Channels of padding after each pixel of dy's pairs (0: none).
  std::int64_t y_padding() const { return pairs_ ? y_padding_ : 0; }

  /// Whether every padded copy can address its operand by pixel and channel.
  bool addressable() const {
    for (const int operand : widened_operands()) {
      if (padding_of(operand) > 0 && !addressable_by_pixel(operand)) return false;
    }
    return true;
  }

  /// Whether the copies walk some operand's images as one run (unpadded).
  bool copies_runs() const {
    return pairs_ || (copy_x_ && x_padding_ == 0) || (copy_y_ && y_padding_ == 0);
  }


  /// Pairs the images of every batch loop under `body`, or of the tiles in `body` that reduce
  /// over them; `slot` is the innermost parallel loop around (nullptr: none). Returns how many
  /// places were paired.
  int run(std::vector<Stmt>& body, const Loop* slot) {
    int paired = 0;
    for (std::size_t s = 0; s < body.size(); ++s) {
      auto* l = std::get_if<Loop>(&body[s].node);
      if (l == nullptr) continue;
      std::optional<Affine> image;
      // block_reduction's batch loops: per chunk of rows, and over a row split's leftover rows.
      const bool batch_loop = nest_.role_of(l->var) == VarRole::kBatch;
      if (batch_loop && l->kind == LoopKind::kSerial && batch_pairable(*l, &image)) {
        if (!pairs_) {
          widen_batch(*l, *image, slot);
          ++paired;
          continue;
        }
        const std::size_t made = splice(body, s, pair_batch(*l, *image, slot));
        ++image_pairs_;
        s += made - 1;
        // An odd last image: its row chunks in pairs.
        if (made > 1) run(std::get<Loop>(body[s].node).body, slot);
        ++paired;
        continue;
      }
      if (l->kind == LoopKind::kParallel && reduce_pairable(l->body)) {
        if (pairs_) {
          pair_reduce(l->body, l);
          ++image_pairs_;
        } else {
          widen_reduce(l->body, l);
        }
        ++paired;
        continue;
      }
      // A batch loop of chunks of several images (padded copies): each chunk's images.
      if (!pairs_ && batch_loop && l->kind == LoopKind::kSerial && reduce_pairable(l->body)) {
        widen_reduce(l->body, slot);
        ++paired;
        continue;
      }
      // A row chunk loop of one image (no image to pair it with): its chunks in pairs.
      std::optional<std::vector<Stmt>> row_pairs;
      if (pairs_ && rows_pairable(*l)) row_pairs = pair_rows(*l, slot);
      if (row_pairs.has_value()) {
        s += splice(body, s, std::move(*row_pairs)) - 1;
        ++paired;
        continue;
      }
      paired += run(l->body, l->kind == LoopKind::kParallel ? l : slot);
    }
    if (paired == 0 && slot == nullptr && &body == &nest_.body && reduce_pairable(body)) {
      if (pairs_) {
        pair_reduce(body, nullptr);
        ++image_pairs_;
      } else {
        widen_reduce(body, nullptr);
      }
      ++paired;
    }
    return paired;
  }

 private:
  const Buffer& buffer(int b) const { return nest_.buffers[static_cast<std::size_t>(b)]; }

  /// Replaces statement `at` of `body` with `made`; returns how many statements took its place.
  static std::size_t splice(std::vector<Stmt>& body, std::size_t at, std::vector<Stmt> made) {
    body.erase(body.begin() + static_cast<std::ptrdiff_t>(at));
    body.insert(body.begin() + static_cast<std::ptrdiff_t>(at),
                std::make_move_iterator(made.begin()), std::make_move_iterator(made.end()));
    return made.size();
  }

  /// Whether `t` is a plain outer product of x (rows) and dy (columns) whose image index is
  /// `var` (coefficient 1) plus terms fixed while `var` moves, the same expression as `image`
  /// (set by the first tile), with no other index or guard moving with `var`.
  bool tile_pairable(const Tile& t, VarId var, std::optional<Affine>* image) const {
    if (t.paired || t.a.buffer != x_ || t.b.buffer != y_ || t.c.buffer == x_ || t.c.buffer == y_) {
      return false;
    }
    for (const Access* a : {&t.a, &t.b}) {
      if (a->index.size() != 4) return false;
      for (const IndexExpr& e : a->index) {
        if (e.divisor != 1) return false;
      }
      const Affine& e = a->index[0].numer;
      if (e.coef_of(var) != 1 || (image->has_value() && !(**image == e))) return false;
      for (std::size_t d = 1; d < a->index.size(); ++d) {
        if (a->index[d].numer.coef_of(var) != 0) return false;
      }
      *image = e;
    }
    for (const Guard& g : t.guards) {
      if (g.expr.numer.coef_of(var) != 0) return false;
    }
    return true;
  }

  /// Whether `chunks` is a row chunk loop whose chunks can pair: step 1, one chunk or more,
  /// every tile in it a plain outer product of x (rows) and dy (columns) accumulating over one
  /// image expression, whose reads move with the chunk only along H (x and dy each by one
  /// distance, the same in every tile) and whose dW and guards do not move with it. Sets
  /// row_shift_ to those distances in elements. Not where dy's pairs take padded pixels or
  /// x's go by channel (AMX): those copies walk images.
  bool rows_pairable(Loop& chunks) {
    if (by_channel_ || y_padding_ > 0 || chunks.kind != LoopKind::kSerial || chunks.step != 1 ||
        chunks.trip_count() < 1 || nest_.role_of(chunks.var) != VarRole::kRowChunk) {
      return false;
    }
    const VarId var = chunks.var;
    std::optional<Affine> image;
    std::optional<std::int64_t> x_shift, y_shift;
    bool ok = true, any = false;
    for_each_tile(chunks.body, {}, [&](Tile& t, const VarRanges&) {
      any = true;
      if (!ok || !t.accumulate || t.paired || t.a.buffer != x_ || t.b.buffer != y_ ||
          t.c.buffer == x_ || t.c.buffer == y_) {
        ok = false;
        return;
      }
      for (const Access* a : {&t.a, &t.b}) {
        if (a->index.size() != 4) {
          ok = false;
          return;
        }
        for (std::size_t d = 0; d < a->index.size(); ++d) {
          const IndexExpr& e = a->index[d];
          if (e.divisor != 1 || (d != 1 && e.numer.coef_of(var) != 0)) ok = false;
        }
        const Affine& e = a->index[0].numer;
        if (image.has_value() && !(*image == e)) ok = false;
        image = e;
        // (A loop of one chunk pairs it with zeros: its reads need not move.)
        std::optional<std::int64_t>& shift = a == &t.a ? x_shift : y_shift;
        const std::int64_t moved = a->index[1].numer.coef_of(var) * buffer(a->buffer).strides[1];
        if ((moved <= 0 && chunks.trip_count() > 1) || (shift.has_value() && *shift != moved)) {
          ok = false;
        }
        shift = moved;
      }
      for (const IndexExpr& e : t.c.index) {
        if (e.numer.coef_of(var) != 0) ok = false;
      }
      for (const Guard& g : t.guards) {
        if (g.expr.numer.coef_of(var) != 0) ok = false;
      }
    });
    if (!ok || !any || !only_tiles_read_operands(chunks.body)) return false;
    row_shift_ = {*x_shift, *y_shift};
    return true;
  }

  /// Whether widening x once per image saves more than it costs. Each x element a tile row
  /// broadcasts is otherwise widened once per broadcast: (FMAs per x element) / (tile
  /// columns) times. The copy reads and writes each element once, about what two widened
  /// broadcasts cost; below four broadcasts per element (resnet_1x1: 64 FMAs per x element
  /// over 32-lane tile rows on AVX2) it is left out.
  // The plan's rule for the widest tile the schedule made.
  bool x_pays_for_its_copy() {
    std::int64_t cols = 1;
    for_each_tile(nest_.body, {},
                  [&](Tile& t, const VarRanges&) { cols = std::max(cols, t.cols); });
    return widening_input_pays(nest_.problem, cols);
  }

  /// The tiles are the only readers of x and dy in `body` (no copy reads them there).
  bool only_tiles_read_operands(std::vector<Stmt>& body) const {
    int accesses = 0, tiles = 0;
    for_each_access(body, [&](const Access& a, bool) {
      if (a.buffer == x_ || a.buffer == y_) ++accesses;
    });
    for_each_tile(body, {}, [&](Tile&, const VarRanges&) { ++tiles; });
    return tiles > 0 && accesses == 2 * tiles;
  }

  /// A blocked batch loop: at least two images, step 1, every tile in it accumulating (into
  /// dW or partial sums) over one image expression.
  bool batch_pairable(Loop& batch, std::optional<Affine>* image) {
    if (batch.step != 1 || batch.trip_count() < images_per_copy()) return false;
    bool ok = true;
    for_each_tile(batch.body, {}, [&](Tile& t, const VarRanges&) {
      ok = ok && t.accumulate && tile_pairable(t, batch.var, image);
    });
    return ok && image->has_value() && only_tiles_read_operands(batch.body);
  }

  /// Unblocked tiles: every tile's first reduce loop walks the same even number of images
  /// (two or more) from 0, step 1, at one image expression, and their copies stay small: one
  /// pair, or all of them within half the L2 (the unblocked schedule of a batch that fits).
  /// parallelize's split of a batch that blocking left alone can reach here with a large
  /// batch per thread; that one keeps its f32 tiles rather than copy it whole.
  bool reduce_pairable(std::vector<Stmt>& body) {
    bool ok = true, any = false;
    std::optional<ReduceLoop> images;
    std::optional<Affine> image;
    for_each_tile(body, {}, [&](Tile& t, const VarRanges&) {
      any = true;
      if (!ok || t.reduce.empty()) {
        ok = false;
        return;
      }
      const ReduceLoop& n = t.reduce.front();
      if (images.has_value() && !(*images == n)) ok = false;
      images = n;
      ok = ok && n.begin == 0 && n.step == 1 && n.end >= images_per_copy() &&
           n.end % images_per_copy() == 0 && tile_pairable(t, n.var, &image);
    });
    if (!ok || !any) return false;
    std::int64_t copied = 0;
    if (pairs_) {
      copied = (buffer(x_).strides[0] + buffer(y_).strides[0]) * dtype_size(buffer(x_).dtype);
    } else {
      for (const int operand : widened_operands()) copied += copied_image_bytes(operand);
    }
    return (images->end == images_per_copy() || images->end * copied <= images_budget()) &&
           only_tiles_read_operands(body);
  }

  /// The part of each image of an operand that one copy's tiles read: elements
  /// [base + lo, base + lo + extent) of the image taken as one run, `base` moving with the
  /// loops the copy sits in (the slot; a row chunk). A thread that takes some rows of an image
  /// (a batch split by rows) copies only those, not the whole image.
  struct Window {
    Affine base;  // the terms that move with the loops the copy sits in (slot, row chunk)
    std::int64_t lo = 0, extent = 0;
    /// Elements from lo that the copy reads from the image: the extent, or for a window
    /// widened to whole groups (by_channel_window) the tiles' own window's end, since a later
    /// pass may offset the copy's reads by an output slice's channels (input-channel slices),
    /// and the widened end would then run past the image. The rest of the scratch is never
    /// read by a tile.
    std::int64_t copy_extent = -1;
    /// False where the tiles' reads could not be bounded: the window is the whole image.
    bool bounded = true;
    std::int64_t copied() const { return copy_extent >= 0 ? copy_extent : extent; }
    /// The image element that element `k` of the copy holds.
    Affine element(const Affine& k) const { return base + lo + k; }
  };

  /// Where tile operand `a` (x or dy) lies within its image, taken as one run.
  Affine within_image(const Access& a) const {
    const Buffer& from = buffer(a.buffer);
    return a.index[1].numer * from.strides[1] + a.index[2].numer * from.strides[2] +
           a.index[3].numer;
  }

  /// The window of `operand`'s images (x_ or y_) that the tiles under `body` read, moving with
  /// the loops `movers` around `body` (the slot; a row chunk loop); the whole image when their
  /// reads cannot be bounded inside it (a loop between the movers and `body`, or offsets past
  /// the image that only guards keep out: x's borders). The window moves at the first tile's
  /// rates; tiles whose rows move at another (a row split's border parts take one row fewer
  /// per thread) widen it.
  Window window(std::vector<Stmt>& body, int operand,
                const std::vector<const Loop*>& movers) const {
    const std::int64_t image = buffer(operand).strides[0];
    VarRanges mover_ranges;
    for (const Loop* m : movers) {
      if (m != nullptr)
        mover_ranges[m->var] = Interval{m->begin, m->begin + (m->trip_count() - 1) * m->step};
    }
    Window w;
    bool ok = true, any = false;
    std::int64_t lo = 0, hi = 0;
    for_each_tile(body, mover_ranges, [&](Tile& t, const VarRanges& outer) {
      VarRanges ranges = outer;
      if (!ok || !tile_ranges(t, &ranges)) return;
      const Affine e = within_image(operand == x_ ? t.a : t.b);
      if (!any) {
        for (const auto& [var, range] : mover_ranges)
          w.base = w.base + Affine::var(var, e.coef_of(var));
      }
      const std::optional<Interval> iv = interval_of(e - w.base, ranges);
      if (!iv.has_value()) {
        ok = false;
        return;
      }
      lo = any ? std::min(lo, iv->lo) : iv->lo;
      hi = any ? std::max(hi, iv->hi) : iv->hi;
      any = true;
    });
    const std::optional<Interval> base = interval_of(w.base, mover_ranges);
    if (!ok || !any || !base.has_value() || base->lo + lo < 0 || base->hi + hi >= image) {
      Window whole{Affine::constant_of(0), 0, image};
      whole.bounded = false;
      return whole;
    }
    w.lo = lo;
    w.extent = hi - lo + 1;
    return w;
  }

  /// Where one operand's copies go in a blocked batch loop whose body is row chunk loops:
  /// once per image at the batch loop (`whole`), or inside each chunk loop, of that chunk's
  /// rows (`parts`, one per statement of the body). Per chunk when the image's copy would not
  /// stay in half the L2 (the tiles would read it back from L3) and the chunks' windows
  /// overlap little: dy's rows are disjoint; x's rows overlap by the filter's height less one
  /// per chunk (a 3x3 filter's one-row chunks would copy each x row three times).
  struct Placement {
    Window whole;
    std::vector<Window> parts;  // empty: the whole window at the batch loop
    const Window& of_part(std::size_t i) const { return parts.empty() ? whole : parts[i]; }
    std::int64_t largest() const {
      std::int64_t e = whole.extent;
      if (!parts.empty()) {
        e = 0;
        for (const Window& w : parts) e = std::max(e, w.extent);
      }
      return e;
    }
    /// The windows copies are made of: the whole one, or one per part.
    std::vector<Window> copied() const { return parts.empty() ? std::vector<Window>{whole} : parts; }
  };
  Placement place(std::vector<Stmt>& batch_body, int operand, const Loop* slot_loop,
                  std::int64_t copy_elem_bytes) const {
    Placement p;
    p.whole = window(batch_body, operand, {slot_loop});
    if (p.whole.extent * copy_elem_bytes <= budget_) return p;
    std::int64_t copied = 0;
    for (Stmt& s : batch_body) {
      auto* part = std::get_if<Loop>(&s.node);
      if (part == nullptr) return Placement{p.whole, {}};
      p.parts.push_back(window(part->body, operand, {slot_loop, part}));
      copied += p.parts.back().extent * part->trip_count();
    }
    if (4 * copied > 5 * p.whole.extent) p.parts.clear();
    return p;
  }

  /// The scratch `*id` (created on first use, named `name`, of `dtype`), grown to hold
  /// [slots][images][extent] elements, times `members` in a last dimension when it holds
  /// interleaved pairs ([..][extent][2]). Every place a copy is made reserves its own shape;
  /// the scratch is the largest of them.
  int reserve_scratch(int* id, const char* name, DType dtype, std::int64_t slots,
                      std::int64_t images, std::int64_t extent, std::int64_t members) {
    if (*id < 0) {
      Buffer b;
      b.name = name;
      b.kind = BufferKind::kScratch;
      b.role = id == &xc_                   ? BufferRole::kInputByChannelCopy
               : id == &xq_ || id == &xw_ ? BufferRole::kInputCopy
                                          : BufferRole::kOutBackpropCopy;
      b.dtype = dtype;
      b.dims = {0, 0, 0};
      if (members > 1) b.dims.push_back(members);
      b.strides.assign(b.dims.size(), 1);
      *id = nest_.add_buffer(std::move(b));
    }
    Buffer& b = nest_.buffers[static_cast<std::size_t>(*id)];
    b.dims[0] = std::max(b.dims[0], slots);
    b.dims[1] = std::max(b.dims[1], images);
    b.dims[2] = std::max(b.dims[2], extent);
    b.strides[2] = members;
    b.strides[1] = b.dims[2] * members;
    b.strides[0] = b.dims[1] * b.strides[1];
    return *id;
  }

  /// The copy of window `w` of images `first` and `first + 1` (image expressions) of `src`
  /// into dst[slot][pair]: one loop over the window storing both members of each pair.
  Stmt interleave(int src, int dst, const Window& w, const Affine& first, const Affine& second,
                  const Affine& slot, const Affine& pair, const char* name) {
    if (src == y_ && y_padding_ > 0) return interleave_padded_y(w, first, second, slot, pair);
    return interleave(src, dst, w, Members{first, second}, slot, pair, name);
  }
  /// The two members of a pair: their images, and elements from the first member's element
  /// to the second's within its image (row chunks of one image: pair_rows); or zero for the
  /// second (`zero_second`).
  struct Members {
    Affine first, second;
    std::int64_t shift = 0;
    bool zero_second = false;
  };
  Stmt interleave(int src, int dst, const Window& w, const Members& members, const Affine& slot,
                  const Affine& pair, const char* name) {
    Loop l;
    l.var = nest_.new_var(name);
    l.end = w.copied();
    const IndexExpr zero(Affine::constant_of(0));
    for (std::int64_t m = 0; m < 2; ++m) {
      Store s;
      s.dst = Access{dst,
                     {IndexExpr(slot), IndexExpr(pair), IndexExpr(Affine::var(l.var)),
                      IndexExpr(Affine::constant_of(m))}};
      s.has_src = m == 0 || !members.zero_second;
      if (s.has_src) {
        s.src = Access{src,
                       {IndexExpr(m == 0 ? members.first : members.second), zero, zero,
                        IndexExpr(w.element(Affine::var(l.var)) + m * members.shift)}};
      }
      l.body.push_back(Stmt{std::move(s)});
    }
    return Stmt{std::move(l)};
  }

  /// dy's pairs with padded pixels: for each pixel p of the window and channel c,
  /// dyq[slot][pair][p * (C + padding) + c][m] = dy[image m][window's first pixel + p][c].
  Stmt interleave_padded_y(const Window& w, const Affine& first, const Affine& second,
                           const Affine& slot, const Affine& pair) {
    const PixelWindow px = pixels_of(y_, w);
    const std::int64_t channels = buffer(y_).dims[3];
    Loop pixels, lanes;
    pixels.var = nest_.new_var("qpy");
    pixels.end = px.count;
    lanes.var = nest_.new_var("qcy");
    lanes.end = channels;
    const Affine p = Affine::var(pixels.var), c = Affine::var(lanes.var);
    const IndexExpr zero(Affine::constant_of(0));
    const Affine members[2] = {first, second};
    for (std::int64_t m = 0; m < 2; ++m) {
      Store s;
      s.dst = Access{yq_,
                     {IndexExpr(slot), IndexExpr(pair), IndexExpr(p * (channels + y_padding_) + c),
                      IndexExpr(Affine::constant_of(m))}};
      s.has_src = true;
      s.src = Access{y_, {IndexExpr(members[m]), zero, IndexExpr(px.first + p), IndexExpr(c)}};
      lanes.body.push_back(Stmt{std::move(s)});
    }
    pixels.body.push_back(Stmt{std::move(lanes)});
    return Stmt{std::move(pixels)};
  }

  /// Elements of dyq one copy of window `w` takes: the window, or its pixels padded.
  std::int64_t y_pairs_extent(const Window& w) const {
    if (y_padding_ == 0) return w.extent;
    return pixels_of(y_, w).count * (buffer(y_).dims[3] + y_padding_);
  }
  std::int64_t y_pairs_extent(const Placement& p) const {
    std::int64_t e = 0;
    for (const Window& w : p.copied()) e = std::max(e, y_pairs_extent(w));
    return e;
  }

  /// The tile reading member 0 of each pair from the scratches and member 1 beside it:
  /// [n][h][w][c] becomes [slot][pair][(h*W + w)*C + c - window start][member].
  /// By channel (`by_channel`: x's window in whole groups, see by_channel_window), x's pairs
  /// come from xc instead: [slot][pair][(group * C + channel) * stride + pixel in group][member].
  void make_paired(Tile& t, const Window& xw, const Window& yw, const Affine& slot,
                   const Affine& pair, bool by_channel) {
    auto member = [&](const Access& a, const Window& w, int scratch, std::int64_t m) {
      return Access{scratch,
                    {IndexExpr(slot), IndexExpr(pair),
                     IndexExpr(within_image(a) - w.element(Affine::constant_of(0))),
                     IndexExpr(Affine::constant_of(m))}};
    };
    auto by_channel_member = [&](const Access& a, std::int64_t m) {
      const Buffer& from = buffer(x_);
      const std::int64_t channels = from.strides[2], width = from.strides[1] / channels;
      const std::int64_t stride = channel_stride(xw);
      // Per row: the row within the window and the column's place among its residue's;
      // else the window's pixel.
      const Affine at = by_row_ ? (a.index[1].numer - first_group(xw)) * (channels * stride) +
                                      a.index[3].numer * stride + column_in_row(a.index[2].numer)
                                : a.index[3].numer * stride + a.index[1].numer * width +
                                      a.index[2].numer - first_group(xw);
      return Access{xc_,
                    {IndexExpr(slot), IndexExpr(pair), IndexExpr(at),
                     IndexExpr(Affine::constant_of(m))}};
    };
    t.a2 = by_channel ? by_channel_member(t.a, 1) : member(t.a, xw, xq_, 1);
    // dy's padded pairs: [slot][pair][(pixel - window's first) * (C + padding) + channel][member].
    auto padded_member = [&](const Access& a, std::int64_t m) {
      const Affine at =
          (pixel_of(a) - pixels_of(y_, yw).first) * (buffer(y_).dims[3] + y_padding_) +
          a.index[3].numer;
      return Access{
          yq_,
          {IndexExpr(slot), IndexExpr(pair), IndexExpr(at), IndexExpr(Affine::constant_of(m))}};
    };
    auto y_member = [&](const Access& a, std::int64_t m) {
      return y_padding_ > 0 ? padded_member(a, m) : member(a, yw, yq_, m);
    };
    t.b2 = y_member(t.b, 1);
    t.a = by_channel ? by_channel_member(t.a, 0) : member(t.a, xw, xq_, 0);
    t.b = y_member(t.b, 0);
    t.paired = true;
  }

  // The copy by channel lays x's window out in groups of pixels, each group channel by
  // channel: one group per row of x (by_row_), so a tile's 16 channels lie a row of pixels
  // apart, within a few KiB (a whole window apart, 8x14x14x256 3x3 ran 1.25x slower), or,
  // where rows are too short for the transposing copy's 8x8 blocks, one group of the window's
  // pixels.

  /// Where x's column `column` (q * stride + a constant, unroll_tap_columns) lies in a row of
  /// the copy by channel: among its residue's columns, each residue a residue_span apart.
  Affine column_in_row(const Affine& column) const {
    Affine q = Affine::constant_of(floor_div(column.constant, stride_));
    for (const auto& term : column.terms) q = q + Affine::var(term.var, term.coef / stride_);
    const std::int64_t residue = column.constant - floor_div(column.constant, stride_) * stride_;
    return q + residue * residue_span();
  }
  /// Columns of one residue in a row of x (the first residue's, the most).
  std::int64_t residue_span() const {
    return ceil_div(buffer(x_).strides[1] / buffer(x_).strides[2], stride_);
  }

  /// Elements of x in one group: a row, or the window.
  std::int64_t group_elements(const Window& w) const {
    return by_row_ ? buffer(x_).strides[1] : w.extent;
  }
  /// The pairs between consecutive channels of a group: its pixels, padded where a tile's 16
  /// rows (channels) that far apart would fall into a few L1 sets (pixel_padding).
  std::int64_t channel_stride(const Window& w) const {
    const std::int64_t pixels =
        by_row_ ? stride_ * residue_span() : w.extent / buffer(x_).strides[2];
    return pixels + pixel_padding(pixels, 2 * dtype_size(buffer(x_).dtype), 1);
  }
  /// Elements of the copy by channel of window `w`: its groups of channels, a stride apart.
  std::int64_t by_channel_extent(const Window& w) const {
    return w.extent / group_elements(w) * buffer(x_).strides[2] * channel_stride(w);
  }

  /// The first group of x's window `w` (whole groups): its row of x, or its first pixel,
  /// moving with its loops.
  Affine first_group(const Window& w) const {
    const std::int64_t unit = group_unit();
    Affine first = Affine::constant_of((w.base.constant + w.lo) / unit);
    for (const auto& term : w.base.terms) first = first + Affine::var(term.var, term.coef / unit);
    return first;
  }
  /// Elements of x a group starts on a multiple of: a row, or a pixel.
  std::int64_t group_unit() const { return buffer(x_).strides[by_row_ ? 1 : 2]; }

  /// x's window `w` widened to whole rows (by_row_) or pixels, for the copy by channel;
  /// nullopt where its moving start is not a whole number of them. Still within the image,
  /// which is whole rows, as is the window's start.
  std::optional<Window> by_channel_window(const Window& w) const {
    const std::int64_t unit = group_unit();
    if (w.base.constant % unit != 0) return std::nullopt;
    for (const auto& term : w.base.terms) {
      if (term.coef % unit != 0) return std::nullopt;
    }
    Window whole = w;
    whole.lo = floor_div(w.lo, unit) * unit;
    whole.extent = ceil_div(w.lo + w.extent, unit) * unit - whole.lo;
    whole.copy_extent = w.lo + w.copied() - whole.lo;
    return whole;
  }

  /// Whether x's pairs by channel are staged group by group: each group of the window
  /// interleaved into xq just before its transposing copy reads it back, so xq holds one
  /// group (a row of x, a few KiB, read back from L1) rather than the window's pair, which
  /// took two more passes over L2 and, beside xqc and dy's pairs, pushed the scratch past L2
  /// (ResNet-50's 56x56 layers: 800 KiB more per thread). The copy of x was half of those
  /// layers' time, more than the tiles' (measured by leaving it out). Paired on two Xeon
  /// threads over the 28 bfloat16 filter gradients it changed: 1.05x, 0.98-1.19x (r50's 56x56
  /// 64 -> 64 1x1 1.19x, 56x56 3x3/2 and 1x1/2 1.16x, unet's 128x128 2x2/2 1.12x).
  bool stages_groups(const Window& w, bool by_channel) const {
    return by_channel && group_elements(w) < w.extent;
  }
  /// Elements of xq one copy of window `w` takes: a group, or the window.
  std::int64_t staged_extent(const Window& w, bool by_channel) const {
    return stages_groups(w, by_channel) ? group_elements(w) : w.extent;
  }
  /// Group `g` (a loop variable) of window `w` as a window of its own, of which the copy reads
  /// the first `count` elements.
  Window group_window(const Window& w, VarId g, std::int64_t count) const {
    Window one = w;
    one.base = w.base + Affine::var(g, group_elements(w));
    one.extent = group_elements(w);
    one.copy_extent = count;
    return one;
  }

  /// x's copies at one place: its window `w` of images `first` and `first + 1` interleaved
  /// into xq[slot][pair]; by channel, into xq[slot][0] (group by group where stages_groups,
  /// else the whole window) and that transposed into xc[slot][pair] group by group: per
  /// channel the group's pixels' pairs, one loop over the channels around one over the pixels
  /// (the emitter's transposing copy moves 8x8 blocks of pairs through registers). xq then
  /// holds one group or one pair on its way, whatever the pairs xc holds.
  std::vector<Stmt> x_copies(const Window& w, const Affine& first, const Affine& second,
                             const Affine& slot, const Affine& pair, bool by_channel) {
    std::vector<Stmt> out;
    const Affine staged = by_channel ? Affine::constant_of(0) : pair;
    const bool per_group = stages_groups(w, by_channel);
    if (!per_group) out.push_back(interleave(x_, xq_, w, first, second, slot, staged, "qx"));
    if (!by_channel) return out;
    const std::int64_t group = group_elements(w), groups = w.extent / group;
    // Staged group by group, the last group may be copied in part (the window's copied extent
    // ends inside it): its own loop stages only that part.
    const std::int64_t last_part = w.copied() - (groups - 1) * group;
    if (!per_group || last_part == group) {
      out.push_back(
          by_channel_groups(w, 0, groups, per_group ? group : 0, first, second, slot, pair));
    } else {
      if (groups > 1) {
        out.push_back(by_channel_groups(w, 0, groups - 1, group, first, second, slot, pair));
      }
      out.push_back(by_channel_groups(w, groups - 1, groups, last_part, first, second, slot, pair));
    }
    return out;
  }

  /// The loop over groups [begin, end) of window `w` copied by channel into xc[slot][pair],
  /// from the pair of the window in xq[slot][0] or, where `staged` > 0, from each group's
  /// first `staged` elements interleaved into xq[slot][0] just before.
  Stmt by_channel_groups(const Window& w, std::int64_t begin, std::int64_t end, std::int64_t staged,
                         const Affine& first, const Affine& second, const Affine& slot,
                         const Affine& pair) {
    const std::int64_t channels = buffer(x_).strides[2], group = group_elements(w);
    const std::int64_t pixels = group / channels, stride = channel_stride(w);
    // Per row, the columns of each residue mod the column stride together (one residue, all
    // columns, at stride 1); per window, its pixels.
    const std::int64_t residues = by_row_ ? stride_ : 1;
    Loop g;
    g.var = nest_.new_var("xg");
    g.begin = begin;
    g.end = end;
    g.label = "pairs by channel";
    if (staged > 0) {
      g.body.push_back(interleave(x_, xq_, group_window(w, g.var, staged), first, second, slot,
                                  Affine::constant_of(0), "qx"));
    }
    for (std::int64_t r = 0; r < residues; ++r) {
      const std::int64_t columns = by_row_ ? ceil_div(pixels - r, stride_) : pixels;
      if (columns <= 0) continue;
      Loop c;
      c.var = nest_.new_var("xc");
      c.end = channels;
      Loop px;
      px.var = nest_.new_var("xp");
      px.end = columns;
      for (std::int64_t m = 0; m < 2; ++m) {
        Store st;
        st.dst = Access{xc_,
                        {IndexExpr(slot), IndexExpr(pair),
                         IndexExpr(Affine::var(g.var, channels * stride) +
                                   Affine::var(c.var, stride) + Affine::var(px.var) +
                                   r * (by_row_ ? residue_span() : 0)),
                         IndexExpr(Affine::constant_of(m))}};
        st.has_src = true;
        st.src = Access{xq_,
                        {IndexExpr(slot), IndexExpr(Affine::constant_of(0)),
                         IndexExpr(Affine::var(g.var, staged > 0 ? 0 : group) +
                                   Affine::var(px.var, residues * channels) + Affine::var(c.var) +
                                   r * channels),
                         IndexExpr(Affine::constant_of(m))}};
        px.body.push_back(Stmt{std::move(st)});
      }
      c.body.push_back(Stmt{std::move(px)});
      g.body.push_back(Stmt{std::move(c)});
    }
    return Stmt{std::move(g)};
  }

  /// At a column stride above 1 the copy by channel keeps each residue's columns of a row
  /// together, so a tile's column index must be q * stride plus a constant (its residue and
  /// first q): the serial loops over taps whose variables move it otherwise (kw, a dilation
  /// apart) are unrolled. Whether every tile under `body` then reads x so.
  bool unroll_tap_columns(std::vector<Stmt>& body) const {
    if (stride_ == 1) return true;
    std::set<VarId> taps;
    for_each_tile(body, {}, [&](Tile& t, const VarRanges&) {
      for (const auto& term : t.a.index[2].numer.terms) {
        if (term.coef % stride_ != 0) taps.insert(term.var);
      }
    });
    unroll(body, taps);
    bool ok = true;
    for_each_tile(body, {}, [&](Tile& t, const VarRanges&) {
      for (const auto& term : t.a.index[2].numer.terms) ok = ok && term.coef % stride_ == 0;
    });
    return ok;
  }
  static void unroll(std::vector<Stmt>& body, const std::set<VarId>& vars) {
    std::vector<Stmt> out;
    for (Stmt& s : body) {
      auto* l = std::get_if<Loop>(&s.node);
      if (l != nullptr) unroll(l->body, vars);
      if (l == nullptr || l->kind != LoopKind::kSerial || vars.count(l->var) == 0) {
        out.push_back(std::move(s));
        continue;
      }
      for (std::int64_t v = l->begin; v < l->end; v += l->step) {
        std::vector<Stmt> copy = l->body;
        substitute(copy, l->var, Affine::constant_of(v));
        for (Stmt& c : copy) out.push_back(std::move(c));
      }
    }
    body = std::move(out);
  }

  /// Widens every window of `p` to whole groups (by_channel_window); false, leaving `p` as it
  /// was, where one cannot be.
  bool to_whole_groups(Placement* p) const {
    Placement widened = *p;
    std::vector<Window*> windows{&widened.whole};
    for (Window& part : widened.parts) windows.push_back(&part);
    for (Window* w : windows) {
      const std::optional<Window> whole = by_channel_window(*w);
      if (!whole.has_value()) return false;
      *w = *whole;
    }
    *p = widened;
    return true;
  }

  /// The pair scratches, grown to hold `slots` x `pairs` x the windows' extents.
  /// By channel (`xc_extent` > 0, by_channel_extent), xq holds one pair (x_copies) and xc the
  /// pairs.
  void reserve(std::int64_t slots, std::int64_t pairs, std::int64_t x_extent,
               std::int64_t y_extent, std::int64_t xc_extent) {
    reserve_scratch(&xq_, "xq", buffer(x_).dtype, slots, xc_extent > 0 ? 1 : pairs, x_extent, 2);
    reserve_scratch(&yq_, "dyq", buffer(y_).dtype, slots, pairs, y_extent, 2);
    if (xc_extent > 0) reserve_scratch(&xc_, "xqc", buffer(x_).dtype, slots, pairs, xc_extent, 2);
  }

  static Affine slot_of(const Loop* slot_loop) {
    return slot_loop != nullptr ? Affine::var(slot_loop->var) + (-slot_loop->begin)
                                : Affine::constant_of(0);
  }

  std::vector<Stmt> pair_batch(const Loop& batch, const Affine& image, const Loop* slot_loop) {
    std::vector<Stmt> tiles = batch.body;
    const bool columns_by_residue = by_channel_ && unroll_tap_columns(tiles);
    const std::int64_t pair_bytes = 2 * dtype_size(buffer(x_).dtype);
    Placement xp = place(tiles, x_, slot_loop, pair_bytes);
    const Placement yp = place(tiles, y_, slot_loop, pair_bytes);
    const bool by_channel = columns_by_residue && to_whole_groups(&xp);
    const std::int64_t slots = slot_loop != nullptr ? slot_loop->trip_count() : 1;
    std::int64_t xc_extent = 0;
    if (by_channel) {
      for (const Window& w : xp.copied()) xc_extent = std::max(xc_extent, by_channel_extent(w));
    }
    std::int64_t x_staged = 0;
    for (const Window& w : xp.copied()) x_staged = std::max(x_staged, staged_extent(w, by_channel));
    reserve(slots, 1, x_staged, y_pairs_extent(yp), xc_extent);
    const Affine slot = slot_of(slot_loop), pair = Affine::constant_of(0);
    Loop pairs;
    pairs.var = nest_.new_var("np");
    pairs.end = batch.trip_count() / 2;
    pairs.label = "image pairs";
    const Affine first = Affine::var(pairs.var, 2) + batch.begin;
    const Affine e0 = image.substitute(batch.var, first),
                 e1 = image.substitute(batch.var, first + 1);
    if (xp.parts.empty()) {
      for (Stmt& c : x_copies(xp.whole, e0, e1, slot, pair, by_channel))
        pairs.body.push_back(std::move(c));
    }
    if (yp.parts.empty())
      pairs.body.push_back(interleave(y_, yq_, yp.whole, e0, e1, slot, pair, "qy"));
    substitute(tiles, batch.var, first);
    for (std::size_t i = 0; i < tiles.size(); ++i) {
      const Window &xw = xp.of_part(i), &yw = yp.of_part(i);
      std::vector<Stmt> part(1, std::move(tiles[i]));
      for_each_tile(part, {}, [&](Tile& t, const VarRanges&) {
        make_paired(t, xw, yw, slot, pair, by_channel);
      });
      // Per-chunk copies go first in their chunk loop (place() made parts only of loops).
      std::vector<Stmt>* chunk =
          xp.parts.empty() && yp.parts.empty() ? nullptr : &std::get<Loop>(part.front().node).body;
      if (!yp.parts.empty()) {
        chunk->insert(chunk->begin(), interleave(y_, yq_, yw, e0, e1, slot, pair, "qy"));
      }
      if (!xp.parts.empty()) {
        std::vector<Stmt> copies = x_copies(xw, e0, e1, slot, pair, by_channel);
        chunk->insert(chunk->begin(), std::make_move_iterator(copies.begin()),
                      std::make_move_iterator(copies.end()));
      }
      pairs.body.push_back(std::move(part.front()));
    }

    std::vector<Stmt> out;
    out.push_back(Stmt{std::move(pairs)});
    if (batch.trip_count() % 2 != 0) {
      Loop last = loop_header(batch);
      last.begin = batch.end - 1;
      last.label = "last image";
      last.body = batch.body;
      out.push_back(Stmt{std::move(last)});
    }
    return out;
  }

  /// Chunks `begin + 2p` and `begin + 2p + 1` of a row chunk loop (rows_pairable) as the two
  /// members of each pair (paired_chunks); an odd last chunk, and a loop of one chunk (the
  /// borders' chunks), paired with zero rows. Nullopt where a window cannot be bounded inside
  /// the image (the copy would take the whole image per pair).
  std::optional<std::vector<Stmt>> pair_rows(const Loop& chunks, const Loop* slot_loop) {
    const std::int64_t trip = chunks.trip_count();
    std::vector<Stmt> out;
    if (trip >= 2) {
      std::optional<Stmt> pairs = paired_chunks(chunks, chunks.begin, trip / 2, false, slot_loop);
      if (!pairs.has_value()) return std::nullopt;
      out.push_back(std::move(*pairs));
    }
    if (trip % 2 != 0) {
      std::optional<Stmt> last = paired_chunks(chunks, chunks.end - 1, 1, true, slot_loop);
      if (!last.has_value()) return std::nullopt;
      out.push_back(std::move(*last));
    }
    if (trip >= 2) ++row_pairs_;
    return out;
  }

  /// `count` pairs of chunks from chunk `first` of `chunks`: per pair, the window of x and of
  /// dy that the first member's tiles read is interleaved with the same window one chunk
  /// further down (row_shift_), or with zeros (`zero_partner`: both operands' second members,
  /// so the pair adds 0 x 0, never 0 x Inf), and the tiles read both members from the copies.
  /// Both members of a real pair are rows of the image (the tiles' reads, shifted): a pair never
  /// multiplies padding.
  std::optional<Stmt> paired_chunks(const Loop& chunks, std::int64_t first, std::int64_t count,
                                    bool zero_partner, const Loop* slot_loop) {
    Loop pairs = loop_header(chunks);
    pairs.var = nest_.new_var(zero_partner ? "ob" : "obp", VarRole::kRowChunk);
    // (A chunk paired with zeros keeps its number.)
    pairs.begin = zero_partner ? first : 0;
    pairs.end = pairs.begin + count;
    pairs.step = 1;
    pairs.label = !zero_partner             ? "row pairs"
                  : chunks.trip_count() > 1 ? "last row chunk"
                                            : chunks.label;
    std::vector<Stmt> tiles = chunks.body;
    substitute(tiles, chunks.var,
               zero_partner ? Affine::var(pairs.var) : Affine::var(pairs.var, 2) + first);
    const Window xw = window(tiles, x_, {slot_loop, &pairs});
    const Window yw = window(tiles, y_, {slot_loop, &pairs});
    if (!xw.bounded || !yw.bounded) return std::nullopt;
    Affine image;
    for_each_tile(tiles, {}, [&](Tile& t, const VarRanges&) { image = t.a.index[0].numer; });
    const std::int64_t slots = slot_loop != nullptr ? slot_loop->trip_count() : 1;
    reserve(slots, 1, xw.extent, yw.extent, 0);
    const Affine slot = slot_of(slot_loop), pair = Affine::constant_of(0);
    const Members x_members{image, image, row_shift_[0], zero_partner};
    const Members y_members{image, image, row_shift_[1], zero_partner};
    pairs.body.push_back(interleave(x_, xq_, xw, x_members, slot, pair, "qx"));
    pairs.body.push_back(interleave(y_, yq_, yw, y_members, slot, pair, "qy"));
    for_each_tile(tiles, {},
                  [&](Tile& t, const VarRanges&) { make_paired(t, xw, yw, slot, pair, false); });
    for (Stmt& t : tiles) pairs.body.push_back(std::move(t));
    return Stmt{std::move(pairs)};
  }

  /// The image reduction reduce_pairable() found common to the tiles under `body`: its
  /// length, variable and image expression.
  struct ImageReduction {
    std::int64_t len = 0;
    VarId n = -1;
    Affine image;
  };
  static ImageReduction image_reduction(std::vector<Stmt>& body) {
    ImageReduction r;
    for_each_tile(body, {}, [&](Tile& t, const VarRanges&) {
      r = {t.reduce.front().end, t.reduce.front().var, t.a.index[0].numer};
    });
    return r;
  }

  void pair_reduce(std::vector<Stmt>& body, const Loop* slot_loop) {
    // Plain variables, not a structured binding: lambdas below capture them (C++20 allows
    // capturing bindings; clang 14 does not).
    const bool columns_by_residue = by_channel_ && unroll_tap_columns(body);
    const ImageReduction reduction = image_reduction(body);
    const std::int64_t len = reduction.len;
    const VarId n = reduction.n;
    const Affine& image = reduction.image;
    Window xw = window(body, x_, {slot_loop});
    const Window yw = window(body, y_, {slot_loop});
    const std::optional<Window> xw_pixels =
        columns_by_residue ? by_channel_window(xw) : std::nullopt;
    const bool by_channel = xw_pixels.has_value();
    if (by_channel) xw = *xw_pixels;
    const std::int64_t slots = slot_loop != nullptr ? slot_loop->trip_count() : 1;
    reserve(slots, len / 2, staged_extent(xw, by_channel), y_pairs_extent(yw),
            by_channel ? by_channel_extent(xw) : 0);
    const Affine slot = slot_of(slot_loop);
    Loop pairs;
    pairs.var = nest_.new_var("np");
    pairs.end = len / 2;
    pairs.label = "image pairs";
    const Affine first = Affine::var(pairs.var, 2);
    const Affine e0 = image.substitute(n, first), e1 = image.substitute(n, first + 1);
    for (Stmt& c : x_copies(xw, e0, e1, slot, Affine::var(pairs.var), by_channel))
      pairs.body.push_back(std::move(c));
    pairs.body.push_back(interleave(y_, yq_, yw, e0, e1, slot, Affine::var(pairs.var), "qy"));
    for_each_tile(body, {}, [&](Tile& t, const VarRanges&) {
      make_paired(t, xw, yw, slot, Affine::var(n), by_channel);
      t.reduce.front().end = len / 2;
    });
    body.insert(body.begin(), Stmt{std::move(pairs)});
  }

  std::int64_t images_per_copy() const { return pairs_ ? 2 : 1; }

  /// The most bytes the copies of several images may take: half the L2 (the plan's budget),
  /// or for padded f32 and f64 copies, which pay by spreading the tiles' reads over the L1's
  /// sets wherever the images are, as much as the whole dW takes: a chunk of images whose
  /// points the reloads of dW's accumulators ask for, never the whole activations. Each
  /// thread's copies then stay within the filter's bytes, also where the thread owns a slice
  /// of dW and copies all of the unsliced operand besides (measured against a slice's dW, such
  /// slices went uncopied): ResNet-50's 8x7x7 1x1 512 -> 2048 on two threads, output-channel
  /// slices with 2.4 MB of copies each against a 2 MB slice of dW, read dy's pixels 8 KiB
  /// apart, all in one L1 set, without them. Paired, both builds alternating, on a Xeon
  /// (model 207, no AMX), two threads, f32: that layer 1.60x (184 -> 305 GFLOP/s), 2048 -> 512
  /// 1.47x, UNet's 2x2/2 512 -> 1024 1.91x, ResNet-50's 14x14 3x3 256 1.04x; AVX2 code
  /// 1.41-1.70x; f64 1.01-2.64x.
  std::int64_t images_budget() const {
    return restride_ ? std::max(budget_, filter_bytes_) : budget_;
  }

  /// Bytes one image's copy of `operand` takes: the image as one run, or padded pixel by pixel,
  /// each pixel's channels of this nest (an output slice's) and the padding.
  std::int64_t copied_image_bytes(int operand) const {
    const Buffer& b = buffer(operand);
    const std::int64_t elements = padding_of(operand) > 0
                                      ? b.dims[1] * b.dims[2] * (b.dims[3] + padding_of(operand))
                                      : b.strides[0];
    return elements * dtype_size(accumulator_dtype(b.dtype));
  }

  /// The operands the unpaired modes copy: for 16-bit types dy always (the column vectors)
  /// and x (the row broadcasts) where each x element is broadcast often enough to pay for its
  /// copy; and every operand whose pixels the plan pads.
  std::vector<int> widened_operands() const {
    std::vector<int> out;
    if (copy_x_) out.push_back(x_);
    if (copy_y_) out.push_back(y_);
    return out;
  }

  std::int64_t padding_of(int operand) const { return operand == x_ ? x_padding_ : y_padding_; }

  /// An element window of `operand`'s image as whole pixels, for its padded copy: the first
  /// pixel (moving with the copy's loops) and how many.
  struct PixelWindow {
    Affine first;
    std::int64_t count = 0;
  };
  // The window's moving start is a whole number of pixels: it moves with row chunks and a
  // split of H or W (index[1] and [2], whole rows and pixels), never with channels.
  PixelWindow pixels_of(int operand, const Window& w) const {
    const std::int64_t pixel = buffer(operand).strides[2];
    PixelWindow p;
    for (const auto& term : w.base.terms) p.first = p.first + Affine::var(term.var, term.coef / pixel);
    p.first = p.first + (w.base.constant + w.lo) / pixel;
    p.count = (w.lo + w.extent - 1) / pixel - w.lo / pixel + 1;
    return p;
  }

  /// The pixel within its image (h * W + w) that tile operand `a` reads.
  Affine pixel_of(const Access& a) const {
    const Buffer& from = buffer(a.buffer);
    return a.index[1].numer * (from.strides[1] / from.strides[2]) + a.index[2].numer;
  }

  /// Whether `operand`'s padded copy can address it by pixel and channel: its images' rows
  /// dense in pixels (H and W together), channels contiguous, and every window's moving start
  /// a whole number of pixels.
  bool addressable_by_pixel(int operand) const {
    const Buffer& b = buffer(operand);
    return b.dims.size() == 4 && b.strides[3] == 1 && b.strides[2] >= b.dims[3] &&
           b.strides[1] == b.dims[2] * b.strides[2];
  }

  /// The copied scratch of `operand` ("xw", "dyw": [slots][images][extent], or with padded
  /// pixels "xr", "dyr": [slots][images][pixels][channels + padding]; the accumulator's dtype),
  /// grown to hold this place's copies of `w`.
  int reserve_widened(int operand, std::int64_t slots, std::int64_t images, const Window& w) {
    const DType dtype = accumulator_dtype(buffer(operand).dtype);
    if (padding_of(operand) == 0) {
      return reserve_scratch(operand == x_ ? &xw_ : &yw_, operand == x_ ? "xw" : "dyw", dtype,
                             slots, images, w.extent, 1);
    }
    int* id = operand == x_ ? &xw_ : &yw_;
    if (*id < 0) {
      Buffer b;
      b.name = operand == x_ ? "xr" : "dyr";
      b.kind = BufferKind::kScratch;
      b.role = operand == x_ ? BufferRole::kInputCopy : BufferRole::kOutBackpropCopy;
      b.dtype = dtype;
      b.dims = {0, 0, 0, buffer(operand).dims[3] + padding_of(operand)};
      b.strides.assign(4, 1);
      *id = nest_.add_buffer(std::move(b));
    }
    Buffer& b = nest_.buffers[static_cast<std::size_t>(*id)];
    b.dims[0] = std::max(b.dims[0], slots);
    b.dims[1] = std::max(b.dims[1], images);
    b.dims[2] = std::max(b.dims[2], pixels_of(operand, w).count);
    b.strides = {b.dims[1] * b.dims[2] * b.dims[3], b.dims[2] * b.dims[3], b.dims[3], 1};
    return *id;
  }

  /// for k: scratch[slot][index][k] = operand[image][window start + k], the window as one run;
  /// with padded pixels, for each pixel p and channel c: scratch[slot][index][p][c].
  Stmt widen(int operand, int scratch, const Window& w, const Affine& image, const Affine& slot,
             const Affine& index) {
    const IndexExpr zero(Affine::constant_of(0));
    if (padding_of(operand) > 0) {
      const PixelWindow px = pixels_of(operand, w);
      Loop pixels, channels;
      pixels.var = nest_.new_var(operand == x_ ? "rpx" : "rpy");
      pixels.end = px.count;
      channels.var = nest_.new_var(operand == x_ ? "rcx" : "rcy");
      channels.end = buffer(operand).dims[3];
      const Affine p = Affine::var(pixels.var), c = Affine::var(channels.var);
      Store s;
      s.dst = Access{scratch, {IndexExpr(slot), IndexExpr(index), IndexExpr(p), IndexExpr(c)}};
      s.has_src = true;
      s.src = Access{operand, {IndexExpr(image), zero, IndexExpr(px.first + p), IndexExpr(c)}};
      channels.body.push_back(Stmt{std::move(s)});
      pixels.body.push_back(Stmt{std::move(channels)});
      return Stmt{std::move(pixels)};
    }
    Loop l;
    l.var = nest_.new_var(operand == x_ ? "wx" : "wy");
    l.end = w.extent;
    Store s;
    s.dst = Access{scratch, {IndexExpr(slot), IndexExpr(index), IndexExpr(Affine::var(l.var))}};
    s.has_src = true;
    s.src =
        Access{operand, {IndexExpr(image), zero, zero, IndexExpr(w.element(Affine::var(l.var)))}};
    l.body.push_back(Stmt{std::move(s)});
    return Stmt{std::move(l)};
  }

  /// The tile reading `operand` (its x rows or dy columns) from scratch[slot][index].
  void read_widened(Tile& t, int operand, int scratch, const Window& w, const Affine& slot,
                    const Affine& index) {
    Access& a = operand == x_ ? t.a : t.b;
    if (padding_of(operand) > 0) {
      a = Access{scratch,
                 {IndexExpr(slot), IndexExpr(index),
                  IndexExpr(pixel_of(a) - pixels_of(operand, w).first), a.index[3]}};
      return;
    }
    a = Access{scratch,
               {IndexExpr(slot), IndexExpr(index),
                IndexExpr(within_image(a) - w.element(Affine::constant_of(0)))}};
  }

  /// A blocked batch loop: each image's operands are widened into the slot before its tiles,
  /// or each chunk's rows before the chunk's.
  void widen_batch(Loop& batch, const Affine& image, const Loop* slot_loop) {
    const Affine slot = slot_of(slot_loop), index = Affine::constant_of(0);
    std::vector<Stmt> whole_copies;
    for (const int operand : widened_operands()) {
      const Placement p = place(batch.body, operand, slot_loop,
                                dtype_size(accumulator_dtype(buffer(operand).dtype)));
      // Every window reserves its own shape (a padded copy's pixels are not its extent's).
      int scratch = -1;
      for (const Window& w : p.copied()) {
        scratch = reserve_widened(operand, slot_loop != nullptr ? slot_loop->trip_count() : 1, 1, w);
      }
      for (std::size_t i = 0; i < batch.body.size(); ++i) {
        const Window& w = p.of_part(i);
        std::vector<Stmt> part(1, std::move(batch.body[i]));
        for_each_tile(part, {}, [&](Tile& t, const VarRanges&) {
          read_widened(t, operand, scratch, w, slot, index);
        });
        if (!p.parts.empty()) {
          std::vector<Stmt>& chunk = std::get<Loop>(part.front().node).body;
          chunk.insert(chunk.begin(), widen(operand, scratch, w, image, slot, index));
        }
        batch.body[i] = std::move(part.front());
      }
      if (p.parts.empty())
        whole_copies.push_back(widen(operand, scratch, p.whole, image, slot, index));
    }
    batch.body.insert(batch.body.begin(), std::make_move_iterator(whole_copies.begin()),
                      std::make_move_iterator(whole_copies.end()));
  }

  /// Unblocked tiles: every image's operands are widened into the slot before them.
  void widen_reduce(std::vector<Stmt>& body, const Loop* slot_loop) {
    // Plain variables, not a structured binding: lambdas below capture them (C++20 allows
    // capturing bindings; clang 14 does not).
    const ImageReduction reduction = image_reduction(body);
    const std::int64_t len = reduction.len;
    const VarId n = reduction.n;
    const Affine& image = reduction.image;
    const Affine slot = slot_of(slot_loop);
    Loop images;
    images.var = nest_.new_var("nw");
    images.end = len;
    images.label = "widened images";
    for (const int operand : widened_operands()) {
      const Window w = window(body, operand, {slot_loop});
      const int scratch = reserve_widened(
          operand, slot_loop != nullptr ? slot_loop->trip_count() : 1, len, w);
      images.body.push_back(widen(operand, scratch, w, image.substitute(n, Affine::var(images.var)),
                                  slot, Affine::var(images.var)));
      for_each_tile(body, {}, [&](Tile& t, const VarRanges&) {
        read_widened(t, operand, scratch, w, slot, Affine::var(n));
      });
    }
    body.insert(body.begin(), Stmt{std::move(images)});
  }

  LoopNest& nest_;
  std::int64_t budget_;
  std::int64_t filter_bytes_;  // the whole dW's, in the accumulator's dtype (not a slice's)
  bool pairs_;
  bool copy_x_ = false, copy_y_ = false, restride_ = false;
  std::int64_t x_padding_ = 0, y_padding_ = 0;
  bool by_channel_ = false;  // the plan's input_pairs_by_channel, where x has whole pixels
  // The copy by channel in groups of a row of x each (rows of kPairsByChannelBlock pixels or
  // more), else in one group per window.
  bool by_row_ = false;
  std::int64_t stride_ = 1;  // the column stride
  int x_ = -1, y_ = -1, xq_ = -1, yq_ = -1, xc_ = -1, xw_ = -1, yw_ = -1;
  // The row chunk loop being paired: elements from a chunk's x and dy to the next chunk's.
  std::array<std::int64_t, 2> row_shift_{};
  int row_pairs_ = 0;    // row chunk loops that formed pairs of chunks
  int image_pairs_ = 0;  // places that paired images
};

}  // namespace

LoopNest copy_batch_operands(LoopNest nest, const CpuPlan& plan) {
  if (plan.batch_copies == BatchCopies::kNone) return nest;
  // Unpadded copies walk each image of x and dy as one run (an output slice's copies would
  // take the other slices' channels between its own along); padded ones go pixel by pixel.
  const bool runs =
      images_in_runs(nest.buffers[static_cast<std::size_t>(nest.buffer_of_kind(BufferKind::kX))]) &&
      images_in_runs(nest.buffers[static_cast<std::size_t>(nest.buffer_of_kind(BufferKind::kY))]);
  if (plan.batch_copies == BatchCopies::kPairs) {
    if (!runs) return nest;
    LoopNest paired = nest;
    BatchOperandCopies pairs(paired, plan, true);
    // Chunks paired only with zeros run no faster than widened f32 tiles: those take over
    // where no real pair formed.
    if (pairs.run(paired.body, nullptr) > 0 && pairs.real_pairs() > 0) {
      if (pairs.y_padding() > 0) paired.derived["out_backprop_pair_padding"] = pairs.y_padding();
      if (pairs.only_row_pairs()) paired.derived["row_chunk_pairs"] = 1;
      return paired;
    }
    // No pair to form (one image per thread or batch loop, an odd unblocked count): the
    // unpaired tiles widen their bf16 operands like a CPU without the dot product, so they
    // take its copies as well.
  }
  LoopNest widened = nest;
  BatchOperandCopies copies(widened, plan, false);
  if ((copies.copies_runs() && !runs) || !copies.addressable() ||
      copies.run(widened.body, nullptr) == 0) {
    return nest;
  }
  return widened;
}

}  // namespace convjit::cpu
