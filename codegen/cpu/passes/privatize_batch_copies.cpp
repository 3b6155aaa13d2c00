// Per-thread operand copies (backprop data). Some schedules run the tiles on a copy of an
// operand in another layout: the 3-channel input gradient reads dy transposed to
// [n][oh][oc][ow], the NCHW input gradient reads dy and writes dx channels-last. Made once per
// call, each copy was a scratch as large as the activation (25.7 MB for the 8x224x224 stem).
// Each image's copy is used only by that image's tiles, so the batch can instead be walked in
// one chunk of images per thread (parallelize, next, makes the chunk loop parallel), each
// image copied into its chunk's slot right before its tiles:
//
//   for tn: S[tn] = f(tn)               for chunk in [0, T):
//   for n:  tiles(n) reading S[n]   ->    for nb in [0, N / T):     (n = chunk*(N/T) + nb)
//   for fn: g(fn) from S2[fn]               S[chunk] = f(n); tiles(n) on S[chunk];
//                                           g(n) from S2[chunk]
//                                       for nr in [0, N % T):        (n = T*(N/T) + nr)
//                                         the same with slot nr
//
// The scratches shrink from N images to T (T = 1 on one thread). A copy may also sit inside the
// batch loop itself (the NCHW depthwise dy, copied group by group right before its tiles):
// the batch loop alone is then walked the same way. A scratch is privatized when
// every access to it is in the copy-in loop, the batch loop or the copy-out loop, indexing its
// first dimension by exactly that loop's variable, and the loops share no other buffer one of
// them writes.
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <span>

#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {

using namespace ir;
namespace {

class Privatize {
 public:
  Privatize(LoopNest& nest, int threads) : nest_(nest), threads_(threads) {}

  bool run() {
    const std::int64_t n = nest_.problem.n;
    if (n < threads_) return false;
    // The batch loop: the top-level loop over the batch that holds the tiles.
    std::size_t b = nest_.body.size();
    for (std::size_t i = 0; i < nest_.body.size(); ++i) {
      const auto* l = std::get_if<Loop>(&nest_.body[i].node);
      if (l != nullptr && l->begin == 0 && l->end == n && l->step == 1 && has_tile(l->body)) {
        b = i;
        break;
      }
    }
    if (b == nest_.body.size()) return false;
    std::vector<std::size_t> parts{b};
    if (b > 0 && is_batch_copy(b - 1)) parts.insert(parts.begin(), b - 1);
    if (b + 1 < nest_.body.size() && is_batch_copy(b + 1)) parts.push_back(b + 1);
    // Scratches whose every access sits in these parts at their own batch index.
    std::set<int> scratches;
    for (std::size_t i = 0; i < nest_.buffers.size(); ++i) {
      if (nest_.buffers[i].kind == BufferKind::kScratch && nest_.buffers[i].dims.front() == n &&
          private_to(static_cast<int>(i), parts)) {
        scratches.insert(static_cast<int>(i));
      }
    }
    if (scratches.empty() || !independent(parts, scratches)) return false;

    const std::int64_t per = n / threads_, rest = n % threads_;
    Loop chunk;
    chunk.var = nest_.new_var("chunk", VarRole::kThreads);
    chunk.end = threads_;
    chunk.label = "image chunks";
    Loop images;
    images.var = nest_.new_var("nb", VarRole::kBatch);
    images.end = per;
    images.label = "images";
    images.body = chained_bodies(parts, scratches, Affine::var(chunk.var),
                                 Affine::var(chunk.var, per) + Affine::var(images.var));
    chunk.body.push_back(Stmt{std::move(images)});
    std::vector<Stmt> out;
    for (std::size_t i = 0; i < parts.front(); ++i) out.push_back(std::move(nest_.body[i]));
    if (per > 0) out.push_back(Stmt{std::move(chunk)});
    if (rest > 0) {
      Loop tail;
      tail.var = nest_.new_var("nr", VarRole::kBatch);
      tail.end = rest;
      tail.label = "images left";
      tail.body = chained_bodies(parts, scratches, Affine::var(tail.var),
                                 Affine::var(tail.var) + threads_ * per);
      out.push_back(Stmt{std::move(tail)});
    }
    for (std::size_t i = parts.back() + 1; i < nest_.body.size(); ++i) {
      out.push_back(std::move(nest_.body[i]));
    }
    nest_.body = std::move(out);
    for (int s : scratches) nest_.buffers[static_cast<std::size_t>(s)].dims.front() = threads_;
    return true;
  }

 private:
  // A top-level loop over the whole batch with no tiles: an operand copy. It reads or writes
  // the caller's activations at its own image (a filter packing loop whose extent happens to
  // equal the batch does not).
  bool is_batch_copy(std::size_t i) const {
    const auto* l = std::get_if<Loop>(&nest_.body[i].node);
    if (l == nullptr || l->begin != 0 || l->end != nest_.problem.n || l->step != 1 ||
        has_tile(l->body)) {
      return false;
    }
    bool per_image = false;
    for_each_access(l->body, [&](const Access& a, bool) {
      const BufferKind kind = nest_.buffers[static_cast<std::size_t>(a.buffer)].kind;
      if ((kind == BufferKind::kX || kind == BufferKind::kY) && a.index[0].divisor == 1 &&
          a.index[0].numer == Affine::var(l->var)) {
        per_image = true;
      }
    });
    return per_image;
  }

  // Whether every access to buffer `s` in the nest lies in one of `parts` with its first
  // index exactly that part's loop variable.
  bool private_to(int s, const std::vector<std::size_t>& parts) const {
    bool ok = true, used = false;
    for (std::size_t i = 0; i < nest_.body.size(); ++i) {
      const bool in_part = std::find(parts.begin(), parts.end(), i) != parts.end();
      const auto* l = std::get_if<Loop>(&nest_.body[i].node);
      const Affine own = l != nullptr ? Affine::var(l->var) : Affine{};
      for_each_access(std::span(&nest_.body[i], 1), [&](const Access& a, bool) {
        if (a.buffer != s) return;
        used = true;
        ok =
            ok && in_part && !a.index.empty() && a.index[0].divisor == 1 && a.index[0].numer == own;
      });
    }
    return ok && used;
  }

  // Whether running the parts image by image keeps their results: a buffer one part writes is
  // read or written by another only through the privatized scratches (each image's copy is
  // made before its tiles read it and read back after they wrote it).
  bool independent(const std::vector<std::size_t>& parts, const std::set<int>& scratches) const {
    std::vector<std::set<int>> reads(parts.size()), writes(parts.size());
    for (std::size_t k = 0; k < parts.size(); ++k) {
      for_each_access(std::span(&nest_.body[parts[k]], 1), [&](const Access& a, bool write) {
        if (scratches.count(a.buffer) == 0) (write ? writes : reads)[k].insert(a.buffer);
      });
    }
    for (std::size_t i = 0; i < parts.size(); ++i) {
      for (std::size_t j = 0; j < parts.size(); ++j) {
        if (i == j) continue;
        for (int w : writes[i]) {
          if (reads[j].count(w) != 0 || writes[j].count(w) != 0) return false;
        }
      }
    }
    return true;
  }

  // The parts' bodies one after another for the image `image`, the scratches at `slot`.
  std::vector<Stmt> chained_bodies(const std::vector<std::size_t>& parts,
                                   const std::set<int>& scratches, const Affine& slot,
                                   const Affine& image) {
    std::vector<Stmt> out;
    for (std::size_t i : parts) {
      const Loop& l = std::get<Loop>(nest_.body[i].node);
      std::vector<Stmt> body = l.body;
      for_each_access(body, [&](Access& a, bool) {
        if (scratches.count(a.buffer) != 0) a.index[0] = IndexExpr(slot);
      });
      substitute(body, l.var, image);
      for (Stmt& s : body) out.push_back(std::move(s));
    }
    return out;
  }

  LoopNest& nest_;
  int threads_;
};

}  // namespace

LoopNest privatize_batch_copies(LoopNest nest, const CpuPlan& plan) {
  if (plan.privatize_batch_copies) Privatize(nest, plan.threads).run();
  return nest;
}

}  // namespace convjit::cpu
