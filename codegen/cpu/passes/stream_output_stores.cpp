// Non-temporal output stores. A data gradient writes every element of dx exactly once, and
// dx is often many times the caches (8x112x112x64 floats: 25.7 MB). Ordinary stores first read
// each line into the cache (a read for ownership) and later write it back, and a tile that
// writes only part of each line, or every other pixel (a stride residue), defeats the
// hardware's write combining: on the AVX2 host a plain store stream ran at 6 GB/s, 3.7 with
// the residue's every-other-pixel order, and a non-temporal one at 13-15 GB/s in both orders,
// provided each tile writes whole lines. So tiles that write whole lines of an output larger
// than the last-level cache, which the kernel never reads back, are marked to stream; the
// backend keeps ordinary stores where the address turns out misaligned at run time. An output
// that only a copy writes (NCHW's dx, from the channels-last scratch the tiles fill) marks the
// copy's Stores instead; the backend streams the parts it writes in whole lines.
#include <functional>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// What writes buffer `out`: plain (overwriting) tiles, copies (Stores from another buffer),
// and anything else (accumulating tiles, zero fills, accumulating stores), which rules
// streaming out.
struct Writers {
  bool plain_tiles = false;
  std::vector<Store*> copies;
  bool others = false;
};

Writers writers_of(std::vector<Stmt>& body, int out) {
  Writers w;
  const std::function<void(std::vector<Stmt>&)> walk = [&](std::vector<Stmt>& stmts) {
    for (Stmt& s : stmts) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        walk(l->body);
      } else if (auto* t = std::get_if<Tile>(&s.node)) {
        if (t->c.buffer != out) continue;
        (t->accumulate ? w.others : w.plain_tiles) = true;
      } else {
        auto& st = std::get<Store>(s.node);
        if (st.dst.buffer != out) continue;
        if (!st.has_src || st.accumulate || st.src.buffer == out) {
          w.others = true;
        } else {
          w.copies.push_back(&st);
        }
      }
    }
  };
  walk(body);
  return w;
}

}  // namespace

LoopNest stream_output_stores(LoopNest nest, const CpuPlan& plan) {
  const int out = output_buffer(nest);
  if (!plan.stream_output || out < 0) return nest;
  // Never read back, and written only by plain tiles or only by copies.
  bool reads = false;
  for_each_access(nest.body, [&](const Access& a, bool writes) {
    reads = reads || (a.buffer == out && !writes);
  });
  const Writers writers = writers_of(nest.body, out);
  if (reads || writers.others || (writers.plain_tiles && !writers.copies.empty())) return nest;
  if (!writers.copies.empty()) {
    for (Store* st : writers.copies) st->stream = true;
    return nest;
  }
  // 16-bit outputs are stored from half-width registers: a line takes two vectors.
  const std::int64_t eb = dtype_size(nest.buffers[static_cast<std::size_t>(out)].dtype);

  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    if (t.c.buffer != out) return;
    Affine offset;
    if (!flatten_access(nest, t.c, &offset) || offset.coef_of(t.col_var) != 1) return;
    // Every row's vectors cover whole lines when the tile starts on a line, which the
    // generated code checks before it streams.
    if ((t.cols * eb) % CpuInfo::kCacheLineBytes != 0) return;
    if (t.rows > 1 && (offset.coef_of(t.row_var) * eb) % CpuInfo::kCacheLineBytes != 0) return;
    t.stream = true;
  });
  return nest;
}

}  // namespace convjit::cpu
