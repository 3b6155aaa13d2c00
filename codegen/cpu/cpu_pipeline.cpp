// The schedule pipeline. Order matters: the vector dimension first (it reorders the lowered
// loops), the NCHW depthwise copy of dy (its stride-2 form removes W's divisions), residues
// next (everything after sees affine indices), zero-padded copies of dy for the W-vector
// tiles (which remove most borders), then borders (so the interior
// tiles have no guards), packing, channel blocks (whole pixel sweeps per block of the packed
// filter), register tiles over the guard-free interior, bfloat16 reduction pairs (they rewrite
// the tiles' final reduce loops), the filter gradient's cache blocking of its reduction (after
// tiling, so it sees the border tiles' final ranges), the merging of parts that all this made
// equal, per-thread operand copies (one chunk of images per thread), the choice of
// non-temporal output stores (once the tiles and the buffers they write are final), threads
// (they split whatever loops are left), and last the 16-bit filter gradient's image pairs or
// widened images (they follow the per-thread batch loops the split made).
#include "codegen/cpu/cpu_pipeline.hpp"

#include "codegen/cpu/passes/passes.hpp"
#include "ir/lower.hpp"
#include "ir/transforms/transforms.hpp"

namespace convjit::cpu {

using namespace ir;

namespace {

// A target-independent transform in a CPU pass list.
template <LoopNest (*kTransform)(LoopNest)>
LoopNest transform(LoopNest nest, const CpuPlan&) {
  return kTransform(std::move(nest));
}

}  // namespace

std::vector<NamedPass<CpuPlan>> cpu_passes(const CpuPlan& plan) {
  (void)plan;
  return {
      {"channels_last_backprop_data", &channels_last_backprop_data},
      {"position_vectors", &position_vectors},
      {"copy_channels_first_out_backprop", &copy_channels_first_out_backprop},
      {"stride_residue_split", &transform<&stride_residue_split>},
      {"pad_transposed_out_backprop", &pad_transposed_out_backprop},
      {"border_peel", &transform<&border_peel>},
      {"pack_filter", &pack_filter},
      {"block_channels", &block_channels},
      {"deinterleave_multiplier", &deinterleave_multiplier},
      {"channels_last_out_backprop", &channels_last_out_backprop},
      {"widen_depthwise_operands", &widen_depthwise_operands},
      {"register_tile", &register_tile},
      {"pair_reduction", &pair_reduction},
      {"block_reduction", &block_reduction},
      {"merge_equal_parts", &transform<&merge_equal_parts>},
      {"privatize_batch_copies", &privatize_batch_copies},
      {"stream_output_stores", &stream_output_stores},
      {"parallelize", &parallelize},
      {"copy_batch_operands", &copy_batch_operands},
  };
}

LoopNest schedule(LoopNest nest, const CpuPlan& plan, const PassObserver& observer) {
  return run_passes(std::move(nest), cpu_passes(plan), plan, observer);
}

LoopNest lower_and_schedule(const ConvProblem& problem, const CpuInfo& cpu, int threads,
                            const PassObserver& observer) {
  const CpuPlan plan = plan_cpu(problem, cpu, threads);
  LoopNest nest = lower(problem);
  if (observer) observer("lower", nest);
  return schedule(std::move(nest), plan, observer);
}

}  // namespace convjit::cpu
