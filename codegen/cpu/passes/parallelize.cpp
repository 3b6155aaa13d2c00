// Parallelization. Marks the outermost loops whose iterations write disjoint output elements
// as parallel (a split filter-gradient reduction already has its chunk loop: split_reduction),
// going one level deeper where a short loop holds a single longer one.
#include <fmt/format.h>

#include <algorithm>

#include "ir/transforms/nest_util.hpp"
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
  // A filter gradient's copies (dy; x and dy for the NCHW depthwise one; a depth multiplier's
  // de-interleaved dy) move into the batch loop the split made, one image per chunk, before
  // loops are marked parallel (so a copy never becomes a parallel loop of its own).
  if (plan.channels_last_out_backprop || plan.channels_last_copies ||
      plan.deinterleave_multiplier) {
    while (privatize_filter_gradient_copy(nest)) {
    }
  }
  // Output slices are the threads' split (spread_output_slices): each slice runs serially.
  if (plan.threads <= 1 || plan.output_slices > 1) return nest;
  // A split reduction already has its parallel loop at the top; what follows it is small.
  if (plan.reduction_split == ReductionSplit::kNone) unwrap_single_trips(nest.body);
  Parallelize(nest, plan.threads).stmts(nest.body);
  return nest;
}

}  // namespace convjit::cpu
