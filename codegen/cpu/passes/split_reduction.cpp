// The filter gradient's reduction split among the threads (backprop filter), the one place
// partial sums are made. dW is small and its reduction over (n, oh, ow) large, so the threads
// share the reduction: each chunk's tiles write private partial sums into scratch
// [chunk][kh][kw][i][o] (never proportional to the activations), and a final Store nest adds
// them up and rounds once into dW (so a 16-bit dW is rounded once, as SEMANTICS.md requires).
// The plan chose the split; the forms it can take:
//   - the row split's thread loop (block_reduction made it; each thread's rows accumulate)
//     gets partial[rt] zeroed per thread, the leftover rows adding into partial[0];
//   - the blocked batch loop splits into one chunk of images per thread;
//   - an unblocked reduction splits n, oh or ow into chunks;
//   - one thread with a blocked 16-bit dW accumulates into a single f32 partial.
// The chunk (or thread) loop is parallel; parallelize marks the rest.
#include "codegen/cpu/passes/passes.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// Scratch [chunk][kh][kw][i][o] of the accumulator dtype for each chunk's partial sums.
int add_partial_buffer(LoopNest& nest, std::int64_t chunks) {
  const ConvProblem& p = nest.problem;
  Buffer partial;
  partial.name = "partial";
  partial.kind = BufferKind::kScratch;
  partial.role = BufferRole::kPartialSums;
  partial.dtype = accumulator_dtype(p.dtype);
  partial.dims = {chunks, p.kh, p.kw, p.filter_in, p.oc};
  const std::int64_t filter = p.kh * p.kw * p.filter_in * p.oc;
  partial.strides = {filter, p.kw * p.filter_in * p.oc, p.filter_in * p.oc, p.oc, 1};
  return nest.add_buffer(std::move(partial));
}

// Appends to the nest: dW = the sum over chunks of partial[chunk] (buffer `pb`), rounded into
// dW once:
//   for i, kh, kw:
//     for c in [1, chunks): for o: partial[0] += partial[c]
//     for o: dw = partial[0]
// Each row of output channels is its own loop around one store, which the backends vectorize;
// dims of extent 1 get no loop, so the outermost loop (input channels, where the filter has
// several) is the one the threads share (parallelize marks only top-level loops for the pool:
// a 1x1 filter's kh and kw loops of one trip would otherwise leave the whole sum to one thread,
// element by element).
void append_sum_partials(LoopNest& nest, int pb, std::int64_t chunks) {
  const ConvProblem& p = nest.problem;
  const int dw = nest.buffer_of_kind(BufferKind::kW);
  // Index of dims kh, kw, i in the order their loops nest (outermost first).
  const int order[3] = {2, 0, 1};
  const std::int64_t extents[3] = {p.kh, p.kw, p.filter_in};
  const char* names[3] = {"rkh", "rkw", "ri"};
  Affine v[3] = {Affine::constant_of(0), Affine::constant_of(0), Affine::constant_of(0)};
  std::vector<Loop> loops;
  for (const int d : order) {
    if (extents[d] == 1) continue;
    Loop l;
    l.var = nest.new_var(names[d]);
    l.end = extents[d];
    v[d] = Affine::var(l.var);
    loops.push_back(std::move(l));
  }
  // One loop over the output channels around `store`, whose accesses end in that index.
  auto row_loop = [&](Access dst, Access src, bool accumulate) {
    Loop row;
    row.var = nest.new_var("ro");
    row.end = p.oc;
    dst.index.push_back(IndexExpr(Affine::var(row.var)));
    src.index.push_back(IndexExpr(Affine::var(row.var)));
    Store store;
    store.dst = std::move(dst);
    store.has_src = true;
    store.src = std::move(src);
    store.accumulate = accumulate;
    row.body.push_back(Stmt{std::move(store)});
    return Stmt{std::move(row)};
  };
  const Access first{pb, {Affine::constant_of(0), v[0], v[1], v[2]}};
  std::vector<Stmt> rows;
  if (chunks > 1) {
    Loop sum;
    sum.var = nest.new_var("rc");
    sum.begin = 1;
    sum.end = chunks;
    sum.body.push_back(row_loop(first, Access{pb, {Affine::var(sum.var), v[0], v[1], v[2]}},
                                /*accumulate=*/true));
    rows.push_back(Stmt{std::move(sum)});
  }
  rows.push_back(row_loop(Access{dw, {v[0], v[1], v[2]}}, first, /*accumulate=*/false));
  // Nest the loops, innermost first, around the rows.
  for (auto l = loops.rbegin(); l != loops.rend(); ++l) {
    l->body = std::move(rows);
    rows.clear();
    rows.push_back(Stmt{std::move(*l)});
  }
  // (A 1x1 filter of one input channel has no loops: its rows stand at the top.)
  for (Stmt& s : rows) nest.body.push_back(std::move(s));
}

// The parallel loop over `chunks` the threads take (its variable "chunk").
Loop chunk_loop_of(LoopNest& nest, std::int64_t chunks) {
  Loop chunk;
  chunk.var = nest.new_var("chunk", VarRole::kThreads);
  chunk.end = chunks;
  chunk.kind = LoopKind::kParallel;
  return chunk;
}

// Every tile under `body` writes partial[chunk] at its dW element instead of dW.
void into_partial(std::vector<Stmt>& body, int pb, const Affine& chunk) {
  for_each_tile(body, {}, [&](Tile& t, const VarRanges&) {
    std::vector<IndexExpr> idx = {IndexExpr(chunk)};
    idx.insert(idx.end(), t.c.index.begin(), t.c.index.end());
    t.c = Access{pb, std::move(idx)};
  });
}

// The zero fill of dW (a loop nest around one Store) writes partial[chunk] instead.
void zero_into_partial(Loop& zero, int pb, const Affine& chunk) {
  Loop* cur = &zero;
  while (!cur->body.empty() && std::holds_alternative<Loop>(cur->body[0].node)) {
    cur = &std::get<Loop>(cur->body[0].node);
  }
  auto& fill = std::get<Store>(cur->body[0].node);
  std::vector<IndexExpr> idx = {IndexExpr(chunk)};
  idx.insert(idx.end(), fill.dst.index.begin(), fill.dst.index.end());
  fill.dst = Access{pb, std::move(idx)};
}

// Backprop filter after block_reduction: [zero dW, batch loop of tiles accumulating into dW].
// The batch loop splits into `chunks` parallel parts; each zeroes and accumulates its own
// partial sums.
bool split_batch(LoopNest& nest, std::int64_t chunks) {
  if (nest.body.size() != 2) return false;
  auto* zero = std::get_if<Loop>(&nest.body[0].node);
  auto* batch = std::get_if<Loop>(&nest.body[1].node);
  // The batch loop walks images, or chunks of several images each (blk=nG).
  if (zero == nullptr || batch == nullptr || nest.role_of(batch->var) != VarRole::kBatch ||
      batch->begin != 0 || batch->step != 1 || batch->end % chunks != 0) {
    return false;
  }
  const int pb = add_partial_buffer(nest, chunks);
  Loop chunk_loop = chunk_loop_of(nest, chunks);
  const Affine ch = Affine::var(chunk_loop.var);
  const std::int64_t len = batch->end / chunks;
  batch->end = len;
  substitute(batch->body, batch->var, ch * len + Affine::var(batch->var));
  into_partial(batch->body, pb, ch);
  zero_into_partial(*zero, pb, ch);
  chunk_loop.body.push_back(std::move(nest.body[0]));
  chunk_loop.body.push_back(std::move(nest.body[1]));
  nest.body.clear();
  nest.body.push_back(Stmt{std::move(chunk_loop)});
  append_sum_partials(nest, pb, chunks);
  return true;
}

// Backprop filter after block_reduction's row split: [zero dW, "row threads" loop, "row rest"
// loop]. Each thread zeroes and accumulates its own partial sums; the leftover rows add into the
// first thread's.
bool split_row_threads(LoopNest& nest, int threads) {
  if (nest.body.size() < 2) return false;
  auto* zero = std::get_if<Loop>(&nest.body[0].node);
  auto* split = std::get_if<Loop>(&nest.body[1].node);
  if (zero == nullptr || split == nullptr || nest.role_of(split->var) != VarRole::kThreads) {
    return false;
  }
  const int pb = add_partial_buffer(nest, threads);
  into_partial(split->body, pb, Affine::var(split->var));
  if (nest.body.size() > 2) {
    into_partial(std::get<Loop>(nest.body[2].node).body, pb, Affine::constant_of(0));
  }
  zero_into_partial(*zero, pb, Affine::var(split->var));
  split->body.insert(split->body.begin(), std::move(nest.body[0]));
  split->kind = LoopKind::kParallel;
  nest.body.erase(nest.body.begin());
  append_sum_partials(nest, pb, threads);
  return true;
}

// An unblocked reduction: reduce dim `dim` (n, oh, ow) of every tile split into `chunks` parallel
// chunks, each writing its own partial sums.
void split_dim(LoopNest& nest, int dim, std::int64_t chunks) {
  const ConvProblem& p = nest.problem;
  const std::int64_t extent = dim == 0 ? p.n : dim == 1 ? p.oh : p.ow;
  const std::int64_t len = extent / chunks;
  const int pb = add_partial_buffer(nest, chunks);
  Loop chunk_loop = chunk_loop_of(nest, chunks);
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
  });
  // Every tile keeps its own accumulate: each chunk's first tile of an element writes its
  // partial, the later parts of a reduction split by taps_share_out_backprop add to it.
  into_partial(nest.body, pb, ch);
  chunk_loop.body = std::move(nest.body);
  nest.body.clear();
  nest.body.push_back(Stmt{std::move(chunk_loop)});
  append_sum_partials(nest, pb, chunks);
}

}  // namespace

LoopNest split_reduction(LoopNest nest, const CpuPlan& plan) {
  // The split restructures the tile nest alone; operand copies that run once per call (the NCHW
  // channels-last dy) stay in front.
  std::vector<Stmt> prologue = take_prologue(nest);
  if (plan.partial_sums_for_rounding) split_batch(nest, 1);
  switch (plan.reduction_split) {
    case ReductionSplit::kNone: break;
    case ReductionSplit::kRowThreads: split_row_threads(nest, plan.threads); break;
    case ReductionSplit::kBatch: split_batch(nest, plan.threads); break;
    case ReductionSplit::kDims: split_dim(nest, plan.split_dim, plan.split_chunks); break;
  }
  nest.body.insert(nest.body.begin(), std::make_move_iterator(prologue.begin()),
                   std::make_move_iterator(prologue.end()));
  return nest;
}

}  // namespace convjit::cpu
