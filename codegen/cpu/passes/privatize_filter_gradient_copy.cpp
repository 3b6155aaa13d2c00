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
// dyc then holds T images. Where the rows of every image are split among the threads instead
// (block_reduction's row split), each thread copies every image into its own slot before
// reducing its rows of it, and the leftover rows copy theirs into slot 0 after: the copy is made
// once per thread, not once, but the scratch holds T images, never the batch. The copy stays
// where it is unless every read of the scratch is in a batch loop at one image expression.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <span>
#include <string>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

// A loop over the batch and the parallel loop around it (nullptr: none).
struct BatchLoop {
  Loop* loop = nullptr;
  Loop* parallel = nullptr;
};

// The outermost loops over the batch under `body`, each with the innermost parallel loop around
// it.
void find_batches(const LoopNest& nest, std::vector<Stmt>& body, Loop* parallel,
                  std::vector<BatchLoop>* out) {
  for (Stmt& s : body) {
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr) continue;
    if (nest.role_of(l->var) == VarRole::kBatch) {
      out->push_back({l, parallel});
    } else {
      find_batches(nest, l->body, l->kind == LoopKind::kParallel ? l : parallel, out);
    }
  }
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

    std::vector<BatchLoop> batches;
    find_batches(nest_, nest_.body, nullptr, &batches);
    if (batches.empty()) return false;
    // Every other access to the scratch: a read inside a batch loop, at one image expression per
    // loop; and nothing else writes what the copy reads, or reads what it writes.
    std::vector<std::optional<Affine>> images(batches.size());
    for (std::size_t i = 0; i < nest_.body.size(); ++i) {
      if (i == ci) continue;
      for_each_access(std::span(&nest_.body[i], 1), [&](const Access& a, bool write) {
        if (write && reads_of_copy(copy, a.buffer)) ok = false;
      });
    }
    std::int64_t reads = 0, in_batches = 0;
    for_each_access(nest_.body, [&](const Access& a, bool write) {
      if (a.buffer == scratch && !write) ++reads;
    });
    for (std::size_t b = 0; b < batches.size(); ++b) {
      for_each_access(batches[b].loop->body, [&](const Access& a, bool write) {
        if (a.buffer != scratch) return;
        ++in_batches;
        ok = ok && !write && a.index[0].divisor == 1 &&
             (!images[b] || *images[b] == a.index[0].numer);
        if (!images[b]) images[b] = a.index[0].numer;
      });
    }
    if (!ok || reads != in_batches) return false;
    // Each batch loop copies its image into the slot of the parallel loop around it (a thread
    // or a chunk of images); a serial one outside any into slot 0. A batch loop that is itself
    // parallel would copy several images into one slot at once.
    std::int64_t slots = 1;
    for (const BatchLoop& b : batches) {
      if (b.loop->kind == LoopKind::kParallel) return false;
      if (b.parallel != nullptr) slots = std::max(slots, b.parallel->trip_count());
    }
    for (std::size_t b = 0; b < batches.size(); ++b) {
      if (!images[b]) continue;  // no tile of this loop reads the copy
      const Affine slot = batches[b].parallel != nullptr ? Affine::var(batches[b].parallel->var)
                                                         : Affine::constant_of(0);
      // The copy of image `image` into the slot, then the batch body reading the slot.
      std::vector<Stmt> fill = copy.body;
      for_each_access(fill, [&](Access& a, bool write) {
        if (write) a.index[0] = IndexExpr(slot);
      });
      substitute(fill, copy.var, *images[b]);
      Loop& loop = *batches[b].loop;
      for_each_access(loop.body, [&](Access& a, bool) {
        if (a.buffer == scratch) a.index[0] = IndexExpr(slot);
      });
      loop.body.insert(loop.body.begin(), std::make_move_iterator(fill.begin()),
                       std::make_move_iterator(fill.end()));
    }
    nest_.body.erase(nest_.body.begin() + static_cast<std::ptrdiff_t>(ci));
    nest_.buffers[static_cast<std::size_t>(scratch)].dims.front() = slots;
    return true;
  }

 private:
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
