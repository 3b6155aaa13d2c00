// Channel blocks around each thread's images (backprop data, after register_tile). Where the
// packed filter outgrows L2, block_channels puts its blocks around the image: one block's
// slice stays in L2 for the image's rows, but the next image starts again from the first
// block, so the whole filter comes back from L3 once per image, and each block's first tiles
// wait on it. With one chunk of images per thread inside each block instead, the thread reads
// every slice from L3 once and its tiles reuse it from L2 for all its images; what each block
// reads again is the chunk's dy, which the plan keeps only where that costs less
// (channel_blocks_around_batch in plan_data_gradient.cpp).
//
//   for n in [0, N):                  for chunk in [0, T) "image chunks":
//     for cb "channel blocks": B(n)     for cb "channel blocks":
//     for cb "channel tail": C(n)   ->    for nb in [0, N/T): B(chunk*(N/T) + nb)
//                                       for cb "channel tail":
//                                         for nb in [0, N/T): C(chunk*(N/T) + nb)
//                                     for nr in [0, N%T) "images left": (n = T*(N/T) + nr)
//                                       the blocks as before
//
// Every (image, block) pair writes its own pixels and channels of dx and reads only the
// operands, so any order of the pairs gives the same result; parallelize then splits the
// chunks (and the images left) among the threads. Applies to top-level batch loops whose body
// is only channel-block loops; anything else is left as it was.
#include "ir/transforms/nest_util.hpp"
#include "codegen/cpu/passes/passes.hpp"

namespace convjit::cpu {
using namespace ir;
namespace {

bool only_channel_blocks(const LoopNest& nest, const Loop& batch) {
  if (batch.body.empty()) return false;
  for (const Stmt& s : batch.body) {
    const auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr || nest.role_of(l->var) != VarRole::kInChannelBlock) return false;
  }
  return true;
}

// `batch`'s blocks, each around a loop over one chunk's `per` images (image = first + nb).
std::vector<Stmt> blocks_around_images(LoopNest& nest, const Loop& batch, const Affine& first,
                                       std::int64_t per) {
  std::vector<Stmt> out;
  for (const Stmt& s : batch.body) {
    Loop block = loop_header(std::get<Loop>(s.node));
    Loop images;
    images.var = nest.new_var("nb", VarRole::kBatch);
    images.end = per;
    images.label = "images";
    images.body = std::get<Loop>(s.node).body;
    substitute(images.body, batch.var, first + Affine::var(images.var));
    block.body.push_back(Stmt{std::move(images)});
    out.push_back(Stmt{std::move(block)});
  }
  return out;
}

}  // namespace

LoopNest channel_blocks_around_batch(LoopNest nest, const CpuPlan& plan) {
  const std::int64_t threads = std::max(plan.threads, 1);
  std::vector<Stmt> out;
  bool changed = false;
  for (Stmt& s : nest.body) {
    const auto* batch = std::get_if<Loop>(&s.node);
    if (batch == nullptr || nest.role_of(batch->var) != VarRole::kBatch || batch->begin != 0 ||
        batch->step != 1 || batch->trip_count() < 2 * threads ||
        !only_channel_blocks(nest, *batch)) {
      out.push_back(std::move(s));
      continue;
    }
    const std::int64_t per = batch->end / threads, rest = batch->end % threads;
    Loop chunk;
    chunk.var = nest.new_var("chunk", VarRole::kThreads);
    chunk.end = threads;
    chunk.label = "image chunks";
    chunk.body = blocks_around_images(nest, *batch, Affine::var(chunk.var, per), per);
    out.push_back(Stmt{std::move(chunk)});
    if (rest > 0) {
      Loop left = loop_header(*batch);
      left.var = nest.new_var("nr", VarRole::kBatch);
      left.begin = 0;
      left.end = rest;
      left.label = "images left";
      left.body = batch->body;
      substitute(left.body, batch->var, Affine::var(left.var) + threads * per);
      out.push_back(Stmt{std::move(left)});
    }
    changed = true;
  }
  nest.body = std::move(out);
  if (changed) nest.derived["channel_blocks_around_batch"] = threads;
  return nest;
}

}  // namespace convjit::cpu
