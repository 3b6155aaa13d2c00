// Reduction blocking (backprop filter). Every filter-gradient tile reduces over all of
// (n, oh, ow); run one after another, each tile streams the whole of x and dy through the
// caches. Hoisting the batch and blocks of output rows outside the tiles makes the loop order
// chunk -> (kh, kw) -> oc block -> ic block: each chunk's rows of x and dy are read from memory
// once and then reused by every tile, which accumulates into dW (zeroed first). Chunks are a
// row or a few, so one oc block's slice of dy and the x lines its tiles read stay in L1 while
// the ic blocks go by (chunks sized for L2 left every tile streaming from L2, at about 40% of
// the FMA peak).
//
// The border tiles' oh ranges were tightened by border_peel, so the chunks they clip run as
// separate constant parts (first and last chunks) and the chunks in between as one loop where
// every tile covers whole chunks: no guard comes back.
//
// When the batch cannot be divided among the threads (batch 1, or a batch that is not a
// multiple of the thread count), each tile's own oh range is divided instead: thread t takes
// rows [begin + t*P, begin + (t+1)*P) of every tile (P per tile), walked in chunks of R rows, so
// each thread's code is the same and every tile still covers whole rows of its range (border
// tiles stay guard-free). The few rows left over (fewer than the threads, per tile) run after.
// The thread loop starts serial, every thread accumulating into dW; split_reduction (the last
// step of this pass) then gives each thread partial sums of its own and runs them at once.
#include <fmt/format.h>

#include <algorithm>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// dW = 0, the start of every blocked reduction (its tiles accumulate).
Stmt zero_filter_gradient(LoopNest& nest) {
  const ConvProblem& p = nest.problem;
  const int dw = nest.buffer_of_kind(BufferKind::kW);
  return loop_nest(nest, {p.kh, p.kw, p.filter_in, p.oc}, {"zkh", "zkw", "zi", "zo"},
                   [&](const std::vector<Affine>& v) {
                     Store s;
                     s.dst = Access{dw, {v[0], v[1], v[2], v[3]}};
                     return Stmt{std::move(s)};
                   });
}

struct ReduceVars {
  VarId n = -1;
  VarId oh = -1;
};

// The n and oh reduce variables, when every tile reduces over (n, oh, ow) with n whole and
// step 1 everywhere. A tile may accumulate already (a later part of a reduction split by
// taps_share_out_backprop): the blocking zeroes dW and makes every tile accumulate anyway.
bool find_reduce_vars(LoopNest& nest, ReduceVars* vars) {
  bool ok = true, any = false;
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    any = true;
    if (t.reduce.size() != 3) {
      ok = false;
      return;
    }
    const ReduceLoop &n = t.reduce[0], &oh = t.reduce[1];
    if (vars->n < 0) *vars = {n.var, oh.var};
    ok = ok && n.var == vars->n && oh.var == vars->oh && n.begin == 0 &&
         n.end == nest.problem.n && n.step == 1 && oh.step == 1;
  });
  return ok && any;
}

// The widest register tile's columns: what a chunk's working set per column block depends on.
std::int64_t widest_tile(LoopNest& nest) {
  std::int64_t cols = 1;
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) { cols = std::max(cols, t.cols); });
  return cols;
}

bool is_column_loop(const Stmt& s) {
  const auto* l = std::get_if<Loop>(&s.node);
  return l != nullptr && l->body.size() == 1 && std::holds_alternative<Tile>(l->body[0].node);
}

bool is_row_loop(const Stmt& s) {
  const auto* l = std::get_if<Loop>(&s.node);
  return l != nullptr && !l->body.empty() && std::all_of(l->body.begin(), l->body.end(), is_column_loop);
}

bool same_header(const Loop& a, const Loop& b) {
  return a.var == b.var && a.begin == b.begin && a.end == b.end && a.step == b.step;
}

// Loop interchange inside each tap: [row part { column parts { tile } }] becomes
// [column part { row parts { tile } }], so one column block's tiles (its dy slice) run one
// after another over all the rows (input channels). Valid because every tile writes its own
// dW elements and only reads x and dy.
void columns_outside_rows(std::vector<Stmt>& body) {
  if (!body.empty() && std::all_of(body.begin(), body.end(), is_row_loop)) {
    const Loop& first = std::get<Loop>(body[0].node);
    for (const Stmt& s : body) {
      const Loop& row = std::get<Loop>(s.node);
      if (row.body.size() != first.body.size()) return;
      for (std::size_t k = 0; k < row.body.size(); ++k) {
        if (!same_header(std::get<Loop>(row.body[k].node), std::get<Loop>(first.body[k].node))) return;
      }
    }
    std::vector<Stmt> out;
    for (std::size_t k = 0; k < first.body.size(); ++k) {
      Loop col = loop_header(std::get<Loop>(first.body[k].node));
      for (const Stmt& s : body) {
        const Loop& row_part = std::get<Loop>(s.node);
        Loop row = loop_header(row_part);
        row.body = std::get<Loop>(row_part.body[k].node).body;
        col.body.push_back(Stmt{std::move(row)});
      }
      out.push_back(Stmt{std::move(col)});
    }
    body = std::move(out);
    return;
  }
  for (Stmt& s : body) {
    if (auto* l = std::get_if<Loop>(&s.node)) columns_outside_rows(l->body);
  }
}

class BlockReduction {
 public:
  BlockReduction(LoopNest& nest, ReduceVars vars, std::int64_t rows, std::int64_t images)
      : nest_(nest), vars_(vars), rows_(rows), images_(images) {}

  // Chunks of `rows` output rows that clip some tile's oh range and so run as constant parts.
  static std::int64_t constant_chunks(std::int64_t oh, std::int64_t max_begin, std::int64_t min_end,
                                      std::int64_t rows) {
    const std::int64_t chunks = ceil_div(oh, rows);
    const std::int64_t lo = std::min(chunks, ceil_div(max_begin, rows));
    const std::int64_t hi = std::max(lo, std::min(min_end, oh) / rows);
    return chunks - (hi - lo);
  }
  std::int64_t max_begin() const { return max_begin_; }
  std::int64_t min_end() const { return min_end_; }
  void set_rows(std::int64_t rows) { rows_ = rows; }

  // The tiles' bounds on oh: the largest begin and smallest end over all tiles.
  void scan() {
    for_each_tile(nest_.body, {}, [&](Tile& t, const VarRanges&) {
      const ReduceLoop& oh = t.reduce[1];
      if (oh.end <= oh.begin) return;  // an empty tile constrains nothing
      max_begin_ = std::max(max_begin_, oh.begin);
      min_end_ = std::min(min_end_, oh.end);
    });
  }

  void run() {
    const ConvProblem& p = nest_.problem;
    const std::int64_t chunks = ceil_div(p.oh, rows_);
    // Chunks [lo, hi) lie inside every tile's range and are whole.
    const std::int64_t lo = std::min(chunks, ceil_div(max_begin_, rows_));
    const std::int64_t hi = std::max(lo, std::min(min_end_, p.oh) / rows_);
    Loop batch;
    batch.var = nest_.new_var("nb", VarRole::kBatch);
    batch.end = p.n / images_;
    batch.label = "batch";
    for (std::int64_t c = 0; c < lo; ++c) batch.body.push_back(constant_chunk(c));
    if (hi > lo) {
      Loop mid;
      mid.var = nest_.new_var("ob", VarRole::kRowChunk);
      mid.begin = lo;
      mid.end = hi;
      mid.label = "row chunks";
      mid.body = nest_.body;
      for_each_tile(mid.body, {}, [&](Tile& t, const VarRanges&) {
        ReduceLoop& oh = t.reduce[1];
        if (oh.end > oh.begin) {
          substitute(t, vars_.oh, Affine::var(mid.var, rows_) + Affine::var(vars_.oh));
          oh.begin = 0;
          oh.end = rows_;
        }
      });
      batch.body.push_back(Stmt{std::move(mid)});
    }
    for (std::int64_t c = hi; c < chunks; ++c) batch.body.push_back(constant_chunk(c));
    // Each chunk: image nb of one, or images [nb*G, nb*G + G) of G each.
    for_each_tile(batch.body, {}, [&](Tile& t, const VarRanges&) {
      if (images_ > 1) {
        substitute(t, vars_.n, Affine::var(batch.var, images_) + Affine::var(vars_.n));
        t.reduce[0].end = images_;
      } else {
        substitute(t, vars_.n, Affine::var(batch.var));
        t.reduce.erase(t.reduce.begin());
      }
      t.accumulate = true;
    });
    // The first and last chunks hold tiles whose taps reach none of their rows (a top filter
    // row in the top chunk): they would only load and store their dW block.
    drop_empty_tiles(batch.body);
    Stmt zero = zero_filter_gradient(nest_);
    nest_.body.clear();
    nest_.body.push_back(std::move(zero));
    nest_.body.push_back(Stmt{std::move(batch)});
  }

 private:
  // A copy of the tile nest restricted to the output rows of chunk `c`.
  Stmt constant_chunk(std::int64_t c) {
    Loop part;
    part.var = nest_.new_var("ob", VarRole::kRowChunk);
    part.begin = c;
    part.end = c + 1;
    part.label = "row chunk";
    part.body = nest_.body;
    const std::int64_t b = c * rows_, e = std::min(nest_.problem.oh, b + rows_);
    for_each_tile(part.body, {}, [&](Tile& t, const VarRanges&) {
      ReduceLoop& oh = t.reduce[1];
      oh.begin = std::max(oh.begin, b);
      oh.end = std::max(oh.begin, std::min(oh.end, e));
    });
    return Stmt{std::move(part)};
  }

  LoopNest& nest_;
  ReduceVars vars_;
  std::int64_t rows_;
  std::int64_t images_;
  std::int64_t max_begin_ = 0;
  std::int64_t min_end_ = INT64_MAX;
};

// The row split: [zero dW, "row threads" loop rt over threads { batch { row chunks, tail } },
// "row rest" batch loop], every tile accumulating into dW: thread rt's part of each tile is rows
// rt*P .. (rt+1)*P of its range, the rest the few rows left over. Returns the rows per chunk, or
// 0 (leaving the nest alone) when some tile's range has fewer rows than threads.
std::int64_t split_rows(LoopNest& nest, ReduceVars vars, int threads, std::int64_t max_chunk_rows) {
  const ConvProblem& p = nest.problem;
  std::int64_t min_rows = INT64_MAX;
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    const ReduceLoop& oh = t.reduce[1];
    if (oh.end > oh.begin) min_rows = std::min(min_rows, oh.end - oh.begin);
  });
  if (min_rows == INT64_MAX || min_rows < threads) return 0;
  const std::int64_t per_min = min_rows / threads;
  const std::int64_t max_rows = std::min(per_min, max_chunk_rows);
  const std::int64_t chunks = ceil_div(per_min, max_rows);
  const std::int64_t rows = ceil_div(per_min, chunks);
  const std::int64_t whole = per_min / rows;  // chunks of `rows` every tile has per thread

  Loop split;
  split.var = nest.new_var("rt", VarRole::kThreads);
  split.end = threads;
  split.label = "row threads";
  Loop batch;
  batch.var = nest.new_var("nb", VarRole::kBatch);
  batch.end = p.n;
  batch.label = "batch";
  // Tile `t` of a thread's part: rows begin + rt*P + offset + [from, from + count).
  auto thread_part = [&](VarId outer, std::int64_t outer_coef, std::int64_t first,
                         bool whole_chunk, const char* label, std::int64_t begin, std::int64_t end) {
    Loop part;
    part.var = outer;
    part.begin = begin;
    part.end = end;
    part.label = label;
    part.body = nest.body;
    for_each_tile(part.body, {}, [&](Tile& t, const VarRanges&) {
      ReduceLoop& oh = t.reduce[1];
      if (oh.end <= oh.begin) return;
      const std::int64_t per = (oh.end - oh.begin) / threads;
      substitute(t, vars.oh,
                 Affine::var(vars.oh) + Affine::var(split.var, per) + Affine::var(outer, outer_coef));
      oh.begin += first;
      oh.end = whole_chunk ? oh.begin + rows : oh.begin - first + per;
    });
    return part;
  };
  const VarId ob = nest.new_var("ob", VarRole::kRowChunk);
  if (whole > 0) batch.body.push_back(Stmt{thread_part(ob, rows, 0, true, "row chunks", 0, whole)});
  // The rest of each thread's rows: the chunk's worth past the whole chunks (ob is 0 there).
  batch.body.push_back(Stmt{thread_part(nest.new_var("ob", VarRole::kRowChunk), 0, whole * rows, false, "row chunk", 0, 1)});
  split.body.push_back(Stmt{std::move(batch)});

  Loop rest;
  rest.var = nest.new_var("nb", VarRole::kBatch);
  rest.end = p.n;
  rest.label = "row rest";
  rest.body = nest.body;
  for_each_tile(rest.body, {}, [&](Tile& t, const VarRanges&) {
    ReduceLoop& oh = t.reduce[1];
    if (oh.end > oh.begin) oh.begin += (oh.end - oh.begin) / threads * threads;
  });

  auto finish = [&](Loop& l, VarId nb) {
    for_each_tile(l.body, {}, [&](Tile& t, const VarRanges&) {
      substitute(t, vars.n, Affine::var(nb));
      t.reduce.erase(t.reduce.begin());
      t.accumulate = true;
    });
    drop_empty_tiles(l.body);
  };
  finish(split, batch.var);
  finish(rest, rest.var);
  // dW zeroed, then every thread's rows and the leftover rows accumulated into it, in order:
  // split_reduction gives each thread partial sums of its own and runs the threads at once.
  Stmt zero = zero_filter_gradient(nest);
  nest.body.clear();
  nest.body.push_back(std::move(zero));
  nest.body.push_back(Stmt{std::move(split)});
  if (!rest.body.empty()) nest.body.push_back(Stmt{std::move(rest)});
  return rows;
}

}  // namespace

namespace {

// The blocking the plan chose, on the tile nest (operand copies taken out).
LoopNest block_tiles(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  ReduceVars vars;
  if (!find_reduce_vars(nest, &vars)) return nest;
  if (plan.columns_outside_rows) columns_outside_rows(nest.body);
  const std::int64_t rows = plan.whole_image_chunks || plan.chunk_images > 1
                                ? p.oh
                                : reduction_chunk_rows(p, plan, widest_tile(nest));
  if (plan.reduction_blocking == ReductionBlocking::kRowSplit) {
    if (const std::int64_t split = split_rows(nest, vars, plan.threads, rows)) {
      nest.derived["chunk_rows"] = split;
    }
  } else if (plan.reduction_blocking == ReductionBlocking::kBatchChunks) {
    BlockReduction block(nest, vars, rows, plan.chunk_images);
    block.scan();
    // Constant parts (chunks some tile's rows clip) copy the tile nest: past a few, the
    // chunks grow instead.
    std::int64_t grown = rows;
    while (grown < p.oh && BlockReduction::constant_chunks(p.oh, block.max_begin(),
                                                           block.min_end(), grown) >
                               kMaxConstantChunks) {
      ++grown;
    }
    block.set_rows(grown);
    block.run();
    nest.derived["chunk_rows"] = grown;
  }
  return nest;
}

}  // namespace

LoopNest block_reduction(LoopNest nest, const CpuPlan& plan) {
  if (plan.reduction_blocking != ReductionBlocking::kNone || plan.columns_outside_rows) {
    // Operand copies that run once per call (channels_last_out_backprop's) stay in front.
    std::vector<Stmt> prologue = take_prologue(nest);
    nest = block_tiles(std::move(nest), plan);
    nest.body.insert(nest.body.begin(), std::make_move_iterator(prologue.begin()),
                     std::make_move_iterator(prologue.end()));
  }
  // Then the threads' partial sums, so no stage leaves a 16-bit dW accumulated in steps.
  return split_reduction(std::move(nest), plan);
}

}  // namespace convjit::cpu
