// Output slices (backprop filter with threads): each thread owns an equal slice of dW's output
// channels (or input channels) and reduces over every image for it, so no thread keeps partial
// sums of the whole filter. The schedule is made for one slice as a problem of its own, on
// windows of the op's tensors; the last pass runs the slices as a parallel loop.
//
// narrow_to_output_slice (first) lowers the slice's problem and gives its X, W and Y buffers
// the real tensors' strides: every later pass schedules one thread's slice and sees nothing
// else. spread_output_slices (last) puts the whole nest in a loop over the slices, moves the
// sliced tensors' channel index by the slice's offset, and gives every scratch buffer a slot
// per slice (the copies and partial sums a slice makes are its own).
#include "codegen/cpu/passes/passes.hpp"
#include "ir/lower.hpp"
#include "ir/transforms/nest_util.hpp"

namespace convjit::cpu {

using namespace ir;

LoopNest narrow_to_output_slice(LoopNest nest, const CpuPlan& plan) {
  LoopNest slice = lower(output_slice_problem(nest.problem, plan));
  for (Buffer& b : slice.buffers) {
    if (b.kind != BufferKind::kScratch) b.strides = nest.buffers[nest.buffer_of_kind(b.kind)].strides;
  }
  return slice;
}

LoopNest spread_output_slices(LoopNest nest, const CpuPlan& plan) {
  const ConvProblem& whole = plan.problem;
  const std::int64_t slices = plan.output_slices;
  const bool input_channels = plan.slices_of_input_channels;
  Loop loop;
  loop.var = nest.new_var("slice", VarRole::kThreads);
  loop.end = slices;
  loop.kind = LoopKind::kParallel;
  loop.label = "output slices";
  const Affine slice = Affine::var(loop.var);

  // The sliced channel: W's dim 2 (input channels) or 3 (output channels), and the same
  // channels of X or Y (dim 3 of both).
  const int w = nest.buffer_of_kind(BufferKind::kW);
  const int other = nest.buffer_of_kind(input_channels ? BufferKind::kX : BufferKind::kY);
  const std::size_t w_dim = input_channels ? 2 : 3;
  const std::int64_t extent = nest.buffers[static_cast<std::size_t>(w)].dims[w_dim];
  for_each_access(nest.body, [&](Access& access, bool) {
    Buffer& b = nest.buffers[static_cast<std::size_t>(access.buffer)];
    if (access.buffer == w || access.buffer == other) {
      IndexExpr& channel = access.index[access.buffer == w ? w_dim : 3];
      channel.numer = channel.numer + slice * (extent * channel.divisor);
    } else if (b.kind == BufferKind::kScratch) {
      access.index.insert(access.index.begin(), IndexExpr(slice));
    }
  });
  for (std::size_t i = 0; i < nest.buffers.size(); ++i) {
    Buffer& b = nest.buffers[i];
    if (static_cast<int>(i) == w) {
      b.dims[w_dim] *= slices;
    } else if (static_cast<int>(i) == other) {
      b.dims[3] *= slices;
    } else if (b.kind == BufferKind::kScratch) {
      b.strides.insert(b.strides.begin(), b.elements());
      b.dims.insert(b.dims.begin(), slices);
    }
  }
  loop.body = std::move(nest.body);
  nest.body.clear();
  nest.body.push_back(Stmt{std::move(loop)});
  nest.problem = whole;
  return nest;
}

}  // namespace convjit::cpu
