// Helpers every pass list shares: substitution, tile traversal, interval analysis and small
// builders of loop nests. Nothing here knows a target.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "ir/ir.hpp"

namespace convjit::ir {

/// Inclusive integer interval.
struct Interval {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
};

/// Known ranges of variables (loop, reduce, row and column variables).
using VarRanges = std::map<VarId, Interval>;

/// Floor and ceiling division for any signs (b != 0).
std::int64_t floor_div(std::int64_t a, std::int64_t b);
std::int64_t ceil_div(std::int64_t a, std::int64_t b);

/// Range of `e` over `ranges`; nullopt when a variable's range is unknown.
std::optional<Interval> interval_of(const Affine& e, const VarRanges& ranges);

/// Replaces `var` by `value` in every index and guard of the statements (recursively).
void substitute(std::vector<Stmt>& body, VarId var, const Affine& value);
void substitute(Tile& tile, VarId var, const Affine& value);

/// Divides every IndexExpr whose numerator is a multiple of its divisor (divisor becomes 1).
void simplify_divisions(Tile& tile);

/// Calls fn for every Tile in the statements, with the ranges of the loops between the
/// statements and the tile added to `outer`.
void for_each_tile(std::vector<Stmt>& body, const VarRanges& outer,
                   const std::function<void(Tile&, const VarRanges&)>& fn);

/// Ranges inside a tile: `outer` plus its reduce, row and column variables. Returns false when
/// some reduce loop is empty (the tile then contributes nothing).
bool tile_ranges(const Tile& tile, VarRanges* ranges);

/// Removes guards that always hold and turns guards on a single reduce variable (everything
/// else constant) into tighter reduce-loop bounds.
void prune_guards(Tile& tile, const VarRanges& outer);

/// A copy of `l` with an empty body: copying a whole loop to replace its body copies every
/// statement under it.
Loop loop_header(const Loop& l);

/// Whether some Tile lies under the statements.
bool has_tile(const std::vector<Stmt>& body);

/// Calls fn(access, writes) on every access under the statements (a range of Stmt, const or
/// not): tile operands (a, b, and a2, b2 when paired) as reads, tile outputs as writes, store
/// sources as reads and destinations as writes.
template <typename Body, typename Fn>
void for_each_access(Body&& body, const Fn& fn) {
  for (auto& s : body) {
    if (auto* l = std::get_if<Loop>(&s.node)) {
      for_each_access(l->body, fn);
    } else if (auto* t = std::get_if<Tile>(&s.node)) {
      fn(t->a, false);
      fn(t->b, false);
      fn(t->c, true);
      if (t->paired) {
        fn(t->a2, false);
        fn(t->b2, false);
      }
    } else {
      auto& st = std::get<Store>(s.node);
      fn(st.dst, true);
      if (st.has_src) fn(st.src, false);
    }
  }
}

/// Appends a token to the schedule summary.
void add_summary(LoopNest& nest, const std::string& token);

/// Removes accumulating tiles whose reduction is empty (they change nothing) and the loops
/// left with an empty body.
void drop_empty_tiles(std::vector<Stmt>& body);

/// Removes and returns the leading operand copies of `nest` (statements with no tile whose
/// stores all write scratch buffers: packed or transposed operands, made once per call), so a
/// pass can restructure the rest alone and put them back in front.
std::vector<Stmt> take_prologue(LoopNest& nest);

/// The buffer the op writes (dx, dW or y); -1 when absent.
int output_buffer(const LoopNest& nest);

/// Whether `b`'s images are dense ([n][h][w][c], c contiguous): one image is then one run of
/// h*w*c elements that a copy can walk as a single loop.
bool dense_images(const Buffer& b);


/// A nest of serial loops [0, extents[d]) named `names[d]` (outer first) around the statement
/// `body` builds from the loop variables.
Stmt loop_nest(LoopNest& nest, const std::vector<std::int64_t>& extents,
               const std::vector<std::string>& names,
               const std::function<Stmt(const std::vector<Affine>&)>& body);

/// Where an operand copy lands: a scratch with `from`'s dims in another layout or dtype.
struct CopyScratch {
  std::string name;
  BufferRole role = BufferRole::kOutBackpropCopy;
  DType dtype = DType::kFloat32;
  /// Element strides of its dims (`from`'s dims); empty: `from`'s strides.
  std::vector<std::int64_t> strides;
};

/// Adds the scratch a copy of buffer `from` lands in.
int add_copy_scratch(LoopNest& nest, int from, CopyScratch copy);

/// Points every tile operand that reads buffer `from` at `to` (same indices).
void read_tiles_from(std::vector<Stmt>& body, int from, int to);

/// Buffer indices from the values of a copy's loops.
using CopyIndex = std::function<std::vector<IndexExpr>(const std::vector<Affine>&)>;

/// The copy dst[dst_index(v)] = src[src_index(v)] (converting to dst's dtype) as a nest of
/// serial loops over `extents` (outer first, named `names`); without `src_index`, src is read
/// at dst's index.
Stmt copy_nest(LoopNest& nest, const std::vector<std::int64_t>& extents,
               const std::vector<std::string>& names, int dst, int src, const CopyIndex& dst_index,
               const CopyIndex& src_index = {});

}  // namespace convjit::ir
