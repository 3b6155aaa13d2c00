// Per-thread operand copy of the filter gradient (NCHW), a step of parallelize.
// channels_last_out_backprop copies dy channels-last once per call, a scratch as large as dy.
// Once parallelize has split the reduction, it walks the batch inside per-chunk loops
// ("batch", split_batch's chunks of images per thread), and each image's copy is read only
// while that image is reduced. So the copy moves into the batch loop, one image at a time into
// the slot of the chunk that reduces it:
//
//   for cn: dyc[cn] = dy[cn]                     for chunk in [0, T) parallel:
//   for chunk in [0, T) parallel:          ->      zero partial[chunk]
//     zero partial[chunk]                          for nb "batch":
//     for nb "batch": tiles on dyc[e(chunk, nb)]     dyc[chunk] = dy[e(chunk, nb)]
//                                                    tiles on dyc[chunk]
//
// dyc then holds T images. The copy stays where it is unless every read of the scratch is at
// one image expression e that moves with the chunk (with the rows of every image split among
// the threads instead, each thread would copy every image), or there is no chunk loop (one
// thread: one slot).
#include <fmt/format.h>

#include <span>
#include <string>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// The first loop over the batch under `body`, with the loop around it (nullptr at the top).
Loop* find_batch(const LoopNest& nest, std::vector<Stmt>& body, Loop* around, Loop** outer) {
  for (Stmt& s : body) {
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr) continue;
    if (nest.role_of(l->var) == VarRole::kBatch) {
      *outer = around;
      return l;
    }
    if (Loop* found = find_batch(nest, l->body, around != nullptr ? around : l, outer)) {
      return found;
    }
  }
  return nullptr;
}

class PrivatizeCopy {
 public:
  explicit PrivatizeCopy(LoopNest& nest) : nest_(nest) {}

  bool run() {
    const std::int64_t n = nest_.problem.n;
    // The copy: the first top-level loop over the batch, tile-free, writing one scratch at
    // its own image.
    std::size_t ci = 0;
    for (; ci < nest_.body.size(); ++ci) {
      const auto* l = std::get_if<Loop>(&nest_.body[ci].node);
      if (l != nullptr && l->begin == 0 && l->end == n && l->step == 1 && !has_tile(l->body)) break;
    }
    if (ci == nest_.body.size()) return false;
    const Loop copy = std::get<Loop>(nest_.body[ci].node);
    int scratch = -1;
    bool ok = true;
    for_each_access(copy.body, [&](const Access& a, bool write) {
      if (!write) return;
      if (scratch < 0) scratch = a.buffer;
      ok = ok && a.buffer == scratch && !a.index.empty() && a.index[0].divisor == 1 &&
           a.index[0].numer == Affine::var(copy.var);
    });
    if (!ok || scratch < 0 ||
        nest_.buffers[static_cast<std::size_t>(scratch)].kind != BufferKind::kScratch ||
        nest_.buffers[static_cast<std::size_t>(scratch)].dims.front() != n) {
      return false;
    }

    Loop* outer = nullptr;
    Loop* batch = find_batch(nest_, nest_.body, nullptr, &outer);
    if (batch == nullptr) return false;
    // Every other access to the scratch: a read in the batch loop at one image expression.
    std::optional<Affine> image;
    for (std::size_t i = 0; i < nest_.body.size(); ++i) {
      if (i == ci) continue;
      const bool holds_batch = contains(nest_.body[i], batch);
      for_each_access(std::span(&nest_.body[i], 1), [&](const Access& a, bool write) {
        if (a.buffer != scratch) return;
        ok = ok && holds_batch && !write && a.index[0].divisor == 1 &&
             (!image || *image == a.index[0].numer);
        if (!image) image = a.index[0].numer;
      });
      // Nothing else may write what the copy reads, or read what it writes.
      for_each_access(std::span(&nest_.body[i], 1), [&](const Access& a, bool write) {
        if (write && reads_of_copy(copy, a.buffer)) ok = false;
      });
    }
    if (!ok || !image) return false;
    // The slot: the chunk loop around the batch, which the image must move with.
    Affine slot = Affine::constant_of(0);
    std::int64_t slots = 1;
    if (outer != nullptr) {
      if (outer->kind != LoopKind::kParallel || image->coef_of(outer->var) == 0) return false;
      slot = Affine::var(outer->var);
      slots = outer->trip_count();
    } else if (batch->kind == LoopKind::kParallel) {
      return false;  // images of one loop on several threads at once
    }

    // The copy of image `image` into the slot, then the batch body reading the slot.
    std::vector<Stmt> fill = copy.body;
    for_each_access(fill, [&](Access& a, bool write) {
      if (write) a.index[0] = IndexExpr(slot);
    });
    substitute(fill, copy.var, *image);
    for_each_access(batch->body, [&](Access& a, bool) {
      if (a.buffer == scratch) a.index[0] = IndexExpr(slot);
    });
    batch->body.insert(batch->body.begin(), std::make_move_iterator(fill.begin()),
                       std::make_move_iterator(fill.end()));
    nest_.body.erase(nest_.body.begin() + static_cast<std::ptrdiff_t>(ci));
    nest_.buffers[static_cast<std::size_t>(scratch)].dims.front() = slots;
    return true;
  }

 private:
  static bool contains(Stmt& s, const Loop* target) {
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr) return false;
    if (l == target) return true;
    for (Stmt& inner : l->body) {
      if (contains(inner, target)) return true;
    }
    return false;
  }

  static bool reads_of_copy(const Loop& copy, int buffer) {
    bool reads = false;
    for_each_access(copy.body, [&](const Access& a, bool write) {
      reads = reads || (!write && a.buffer == buffer);
    });
    return reads;
  }

  LoopNest& nest_;
};

}  // namespace

bool privatize_filter_gradient_copy(LoopNest& nest) {
  if (nest.problem.direction != ConvDirection::kBackpropFilter || nest.problem.is_empty()) {
    return false;
  }
  return PrivatizeCopy(nest).run();
}

}  // namespace convjit::cpu
