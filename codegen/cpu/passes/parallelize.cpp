// Parallelization. Marks the outermost loops whose iterations write disjoint output elements
// as parallel. The filter gradient's output (the filter) is small and its reduction (n, oh, ow)
// is large, so there the reduction is first split into chunks: each chunk's tiles write private
// partial sums into scratch [chunk][kh][kw][i][o] (never proportional to the activations), and
// a final Store nest adds them up and rounds once into dW.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/cpu/passes/cpu_pass_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// True when every tile and store under `body` writes at a flat offset that moves with `var`.
bool writes_disjoint(const LoopNest& nest, const std::vector<Stmt>& body, VarId var) {
  for (const Stmt& s : body) {
    const Access* dst = nullptr;
    if (const auto* l = std::get_if<Loop>(&s.node)) {
      if (!writes_disjoint(nest, l->body, var)) return false;
      continue;
    }
    if (const auto* t = std::get_if<Tile>(&s.node)) dst = &t->c;
    if (const auto* st = std::get_if<Store>(&s.node)) dst = &st->dst;
    Affine off;
    if (dst == nullptr || !flatten_access(nest, *dst, &off) || off.coef_of(var) == 0) return false;
  }
  return true;
}

class Parallelize {
 public:
  Parallelize(LoopNest& nest, int threads) : nest_(nest), threads_(threads) {}

  void stmts(std::vector<Stmt>& body) {
    for (Stmt& s : body) {
      auto* l = std::get_if<Loop>(&s.node);
      if (l == nullptr) continue;
      const bool ok = l->trip_count() >= 2 && writes_disjoint(nest_, l->body, l->var);
      // A short loop around a single longer one: the inner one spreads better.
      const bool go_deeper = ok && l->trip_count() < threads_ && l->body.size() == 1 &&
                             std::holds_alternative<Loop>(l->body[0].node) &&
                             std::get<Loop>(l->body[0].node).trip_count() > l->trip_count();
      if (ok && !go_deeper) {
        l->kind = LoopKind::kParallel;
      } else {
        stmts(l->body);
      }
    }
  }

 private:
  LoopNest& nest_;
  int threads_;
};

void split_reduction(LoopNest& nest, int dim, std::int64_t chunks) {
  const ConvProblem& p = nest.problem;
  const std::int64_t extent = dim == 0 ? p.n : dim == 1 ? p.oh : p.ow;
  const std::int64_t len = extent / chunks;
  const int pb = add_partial_buffer(nest, chunks);

  Loop chunk_loop;
  chunk_loop.var = nest.new_var("chunk", VarRole::kThreads);
  chunk_loop.end = chunks;
  chunk_loop.kind = LoopKind::kParallel;
  const Affine ch = Affine::var(chunk_loop.var);
  for_each_tile(nest.body, {}, [&](Tile& t, const VarRanges&) {
    ReduceLoop& r = t.reduce[static_cast<std::size_t>(dim)];
    const VarId v = r.var;
    const Affine shifted = ch * len + Affine::var(v);
    const ReduceLoop original = r;
    r.begin = 0;
    r.end = len;
    r.step = 1;
    for (Access* a : {&t.a, &t.b}) {
      for (IndexExpr& e : a->index) e.numer = e.numer.substitute(v, shifted);
    }
    for (Guard& g : t.guards) g.expr.numer = g.expr.numer.substitute(v, shifted);
    // A border tile whose range was tightened keeps it as a guard on the chunked index.
    if (original.begin != 0 || original.end != extent || original.step != 1) {
      t.guards.push_back(Guard{shifted, original.begin, original.end});
      if (original.step != 1) {
        t.guards.push_back(Guard{IndexExpr(shifted + (-original.begin), original.step), 0, extent});
      }
    }
    std::vector<IndexExpr> idx = {IndexExpr(ch)};
    idx.insert(idx.end(), t.c.index.begin(), t.c.index.end());
    t.c = Access{pb, std::move(idx)};
    t.accumulate = false;
  });
  chunk_loop.body = std::move(nest.body);

  nest.body.clear();
  nest.body.push_back(Stmt{std::move(chunk_loop)});
  nest.body.push_back(sum_partials(nest, pb, chunks));
}

// Backprop filter after block_reduction: [zero dW, batch loop of tiles accumulating into dW].
// The batch loop splits into `chunks` parallel parts; each zeroes and accumulates its own
// partial sums, which a final Store nest adds up into dW.
bool split_batch(LoopNest& nest, std::int64_t chunks) {
  const ConvProblem& p = nest.problem;
  if (nest.body.size() != 2 || p.n % chunks != 0) return false;
  auto* zero = std::get_if<Loop>(&nest.body[0].node);
  auto* batch = std::get_if<Loop>(&nest.body[1].node);
  if (zero == nullptr || batch == nullptr || nest.role_of(batch->var) != VarRole::kBatch) {
    return false;
  }
  const int pb = add_partial_buffer(nest, chunks);
  Loop chunk_loop;
  chunk_loop.var = nest.new_var("chunk", VarRole::kThreads);
  chunk_loop.end = chunks;
  chunk_loop.kind = LoopKind::kParallel;
  const Affine ch = Affine::var(chunk_loop.var);
  const std::int64_t len = p.n / chunks;
  batch->end = len;
  substitute(batch->body, batch->var, ch * len + Affine::var(batch->var));
  for_each_tile(batch->body, {}, [&](Tile& t, const VarRanges&) {
    std::vector<IndexExpr> idx = {IndexExpr(ch)};
    idx.insert(idx.end(), t.c.index.begin(), t.c.index.end());
    t.c = Access{pb, std::move(idx)};
  });
  // The zero fill writes this chunk's partial sums instead of dW.
  Loop* cur = zero;
  while (!cur->body.empty() && std::holds_alternative<Loop>(cur->body[0].node)) {
    cur = &std::get<Loop>(cur->body[0].node);
  }
  auto& fill = std::get<Store>(cur->body[0].node);
  std::vector<IndexExpr> idx = {IndexExpr(ch)};
  idx.insert(idx.end(), fill.dst.index.begin(), fill.dst.index.end());
  fill.dst = Access{pb, std::move(idx)};
  chunk_loop.body.push_back(std::move(nest.body[0]));
  chunk_loop.body.push_back(std::move(nest.body[1]));
  nest.body.clear();
  nest.body.push_back(Stmt{std::move(chunk_loop)});
  nest.body.push_back(sum_partials(nest, pb, chunks));
  return true;
}

// Backprop filter after block_reduction's row split: its "row threads" loop, each thread
// accumulating into its own partial sums, becomes the parallel loop.
bool parallel_row_threads(LoopNest& nest) {
  if (nest.body.empty()) return false;
  auto* split = std::get_if<Loop>(&nest.body[0].node);
  if (split == nullptr || nest.role_of(split->var) != VarRole::kThreads) return false;
  split->kind = LoopKind::kParallel;
  return true;
}

// Replaces top-level loops of one iteration by their bodies: only top-level parallel loops
// reach the pool (backends run nested ones serially), so a batch of one must not hide the
// loops inside it.
void unwrap_single_trips(std::vector<Stmt>& body) {
  std::vector<Stmt> out;
  bool changed = false;
  for (Stmt& s : body) {
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr || l->trip_count() != 1) {
      out.push_back(std::move(s));
      continue;
    }
    substitute(l->body, l->var, Affine::constant_of(l->begin));
    for (Stmt& inner : l->body) out.push_back(std::move(inner));
    changed = true;
  }
  body = std::move(out);
  if (changed) unwrap_single_trips(body);
}

}  // namespace

LoopNest parallelize(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& p = nest.problem;
  const int threads = plan.threads;
  // The reduction splits restructure the tile nest alone; operand copies that run once per
  // call stay in front, where they are parallelized like any other loop.
  std::vector<Stmt> prologue;
  if (p.direction == ConvDirection::kBackpropFilter) prologue = take_prologue(nest);
  // One thread: a blocked 16-bit dW accumulates into one f32 partial, rounded once.
  if (plan.partial_sums_for_rounding) split_batch(nest, 1);
  switch (plan.reduction_split) {
    case ReductionSplit::kNone: break;
    case ReductionSplit::kRowThreads: parallel_row_threads(nest); break;
    case ReductionSplit::kBatch: split_batch(nest, threads); break;
    case ReductionSplit::kDims: split_reduction(nest, plan.split_dim, plan.split_chunks); break;
  }
  // The copies go back in front; a filter gradient's copy of dy then moves into the batch
  // loop the split made, one image per chunk, before loops are marked parallel (so the copy
  // never becomes a parallel loop of its own).
  nest.body.insert(nest.body.begin(), std::make_move_iterator(prologue.begin()),
                   std::make_move_iterator(prologue.end()));
  if (!prologue.empty()) privatize_filter_gradient_copy(nest);
  if (threads <= 1) return nest;
  // A split reduction already has its parallel loop at the top; what follows it is small.
  if (plan.reduction_split == ReductionSplit::kNone) unwrap_single_trips(nest.body);
  Parallelize(nest, threads).stmts(nest.body);
  return nest;
}

}  // namespace convjit::cpu
