// Bands of packed-filter rows. The packing copy wp[.., o, i] = w[.., i, o] is a transpose:
// its rows (output channels) are contiguous in W, its columns (input channels) in the pack.
// It ran as one nest per channel block, [block][kh][kw][o][i], which left threads to split
// the outermost loop with more than one iteration: five channel blocks over two threads is
// three against two, three taps over two threads two against one, and a 1x1 filter's tail
// block split its rows, one row per iteration, where no 8x8 transposing block fits (a
// gather per element instead). That copy is about a tenth of a deep 1x1 input gradient's
// time (ResNet-50's 512->2048: a 4 MiB filter transposed per call).
//
// Here each packing nest runs as one band of rows per thread, outermost, every (block, tap)
// inside a band:
//
//   for pb: for pkh: for pkw:              for prb in [0, T) parallel:
//     for po in [0, OC):           ->        for pb: for pkh: for pkw:
//       for pi: store                          for po in [0, R): for pi: store (R x cols)
//
// with R = OC/T rounded to whole 64-byte lines (16 rows of f32 or of bfloat16 pairs), so
// the threads split equal bands of whole transposing blocks, and inside its band a thread
// walks each of W's rows along R contiguous elements as the unbanded nest walked all OC of
// them (the hardware prefetchers see streams: bands of a single line each measured 3% slower
// on a 2x2 filter's pack than a band per thread). The rows past the last whole band stay a
// nest of their own. One thread has nothing to balance and keeps the nests as they were.
#include <algorithm>
#include <optional>

#include "codegen/cpu/passes/passes.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

constexpr std::int64_t kLineRows = 16;  // one 64-byte line of 32-bit elements

// The loops of a packing nest, outer first, down to the innermost loop, when each loop holds
// exactly one loop and the innermost holds only stores into `wp`; empty otherwise.
std::vector<Loop*> packing_chain(Stmt& s, int wp) {
  std::vector<Loop*> chain;
  for (Stmt* at = &s;;) {
    auto* l = std::get_if<Loop>(&at->node);
    if (l == nullptr || l->body.empty()) return {};
    chain.push_back(l);
    if (l->body.size() == 1 && std::holds_alternative<Loop>(l->body[0].node)) {
      at = &l->body[0];
      continue;
    }
    for (const Stmt& st : l->body) {
      const auto* store = std::get_if<Store>(&st.node);
      if (store == nullptr || store->dst.buffer != wp) return {};
    }
    return chain;
  }
}

// The band height for `rows` rows on `threads` threads: rows/threads rounded down or up to
// whole lines, whichever gives the busiest thread fewer rows (its bands, and its share of the
// rows past the last band, which run as a parallel nest of their own).
std::int64_t rows_per_band(std::int64_t rows, int threads) {
  auto busiest = [&](std::int64_t band) {
    const std::int64_t bands = rows / band;
    return ceil_div(bands, threads) * band + ceil_div(rows - bands * band, threads);
  };
  const std::int64_t up = ceil_div(rows, threads * kLineRows) * kLineRows;
  const std::int64_t down = std::max<std::int64_t>(1, rows / (threads * kLineRows)) * kLineRows;
  return busiest(down) < busiest(up) ? down : up;
}

}  // namespace

LoopNest band_packing_rows(LoopNest nest, const CpuPlan& plan) {
  if (!plan.pack_filter || plan.threads <= 1) return nest;
  const int wp = nest.buffer_of_role(BufferRole::kPackedFilter);
  if (wp < 0) return nest;
  std::vector<Stmt> body;
  for (Stmt& s : nest.body) {
    const std::vector<Loop*> chain = packing_chain(s, wp);
    // The row loop holds the innermost (column) loop.
    Loop* rows = chain.size() >= 2 ? chain[chain.size() - 2] : nullptr;
    if (rows == nullptr || rows->step != 1 || rows->trip_count() < 2 * kLineRows) {
      body.push_back(std::move(s));
      continue;
    }
    const std::int64_t band_rows = rows_per_band(rows->trip_count(), plan.threads);
    const std::int64_t bands = rows->trip_count() / band_rows;
    if (bands < 2) {
      body.push_back(std::move(s));
      continue;
    }
    const std::int64_t first = rows->begin, rest = first + bands * band_rows;
    // The rows past the last whole band: the nest as it was over them.
    std::optional<Stmt> remainder;
    if (rest < rows->end) {
      remainder = s;
      packing_chain(*remainder, wp)[chain.size() - 2]->begin = rest;
    }
    Loop band;
    band.var = nest.new_var("prb", nest.role_of(rows->var));
    band.begin = 0;
    band.end = bands;
    band.label = "packing bands";
    substitute(rows->body, rows->var,
               Affine::var(rows->var) + Affine::var(band.var, band_rows) + first);
    rows->begin = 0;
    rows->end = band_rows;
    band.body.push_back(std::move(s));
    body.push_back(Stmt{std::move(band)});
    if (remainder) body.push_back(std::move(*remainder));
  }
  nest.body = std::move(body);
  return nest;
}

}  // namespace convjit::cpu
