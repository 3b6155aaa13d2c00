// Channel blocks inside the pixel tiles (backprop data, after register_tile). block_channels
// put each block of input channels around a row (or the image) so that the block's slice of
// the packed filter serves a whole row of tiles. Where that slice outgrows L1 it does not
// survive from one tile to the next, and every tile then streams both operands from L2: its
// dy window and its filter slice. With the blocks inside each pixel tile instead, the window
// of dy (a few rows of a few dozen pixels) stays in L1 across all blocks and only the
// filter's slices stream, each still one contiguous run of the blocked packing. The plan
// chooses this (channel_blocks_inside_pixels) where the tiles' rate would make those rereads
// bind on L2 and the whole filter stays there.
//
//   for ih:                            for ih:
//     for cb "channel blocks":           for iw step R:
//       for iw step R:          ->         for cb "channel blocks":
//         for i in [0, B): tile              for i in [0, B): tile
//
// Every iteration of cb writes its own channels of dx from its own slice of the filter, so
// distributing cb over the loops below it and sinking it to the column loops keeps the
// result; every statement between must be a loop (nothing else runs once per block).
#include <optional>

#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {
using namespace ir;
namespace {

bool is_column_loop(const Stmt& s) {
  const auto* l = std::get_if<Loop>(&s.node);
  return l != nullptr && l->body.size() == 1 && std::holds_alternative<Tile>(l->body[0].node);
}

/// `body` (the body of `block`) with `block` sunk right above every column loop; nullopt when
/// something other than a loop stands between.
std::optional<std::vector<Stmt>> sink(const Loop& block, std::vector<Stmt> body) {
  for (Stmt& s : body) {
    if (is_column_loop(s)) {
      Loop inner = block;
      inner.body = {std::move(s)};
      s = Stmt{std::move(inner)};
      continue;
    }
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr) return std::nullopt;
    auto below = sink(block, std::move(l->body));
    if (!below) return std::nullopt;
    l->body = std::move(*below);
  }
  return body;
}

/// Rewrites every channel-block loop under `body`; false when one cannot be sunk.
bool sink_blocks(const LoopNest& nest, std::vector<Stmt>& body) {
  std::vector<Stmt> out;
  for (Stmt& s : body) {
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr || is_column_loop(s)) {
      out.push_back(std::move(s));
      continue;
    }
    if (nest.role_of(l->var) != VarRole::kInChannelBlock) {
      if (!sink_blocks(nest, l->body)) return false;
      out.push_back(std::move(s));
      continue;
    }
    Loop block = *l;
    block.body.clear();
    auto sunk = sink(block, std::move(l->body));
    if (!sunk) return false;
    for (Stmt& part : *sunk) out.push_back(std::move(part));
  }
  body = std::move(out);
  return true;
}

}  // namespace

LoopNest channel_blocks_inside_pixels(LoopNest nest, const CpuPlan&) {
  LoopNest sunk = nest;
  return sink_blocks(sunk, sunk.body) ? sunk : nest;
}

}  // namespace convjit::cpu
