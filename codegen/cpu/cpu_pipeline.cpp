// The CPU schedule: the pass list a CpuPlan asks for, readable top to bottom. Order matters:
// a 1x1 stride-1 problem's pixels as one row first (it lowers the nest again), the vector
// dimension next (it reorders the lowered loops), the NCHW depthwise copy of dy
// (its stride-2 form removes W's divisions), residues next (everything after sees affine
// indices), a depthwise filter gradient's filter columns kept whole over the columns where they
// all lie inside x, zero-padded copies of dy for the W-vector tiles (which remove most borders),
// then borders (so the interior tiles have no guards), packing, channel blocks (whole pixel sweeps
// per block of the packed filter), register tiles over the guard-free interior, bfloat16
// reduction pairs (they rewrite the tiles' final reduce loops), the channel blocks moved
// inside the pixel tiles or around each thread's images (once the tiles are final), the filter
// gradient's cache blocking of its reduction (after tiling, so it sees the border tiles' final
// ranges), the merging of parts that all this made equal, per-thread operand copies (one
// chunk of images per thread), non-temporal output stores (once the tiles and the buffers they
// write are final), the packing copy in bands of rows, threads (they split whatever loops are
// left), the 16-bit filter gradient's image pairs or widened images (they follow the per-thread
// batch loops the split made), and last a sliced filter gradient's slices (the schedule before it
// was made for one slice).
#include "codegen/cpu/cpu_pipeline.hpp"

#include "codegen/cpu/passes/passes.hpp"
#include "codegen/cpu/kernel_name.hpp"
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

// Borders peeled, but for W's where the plan keeps depthwise rows of the whole width (their
// tiles skip the taps past the borders themselves).
LoopNest peel_borders(LoopNest nest, const CpuPlan& plan) {
  std::vector<VarRole> keep_guarded;
  if (plan.whole_width_rows) keep_guarded.push_back(VarRole::kInCol);
  return border_peel(std::move(nest), keep_guarded);
}

}  // namespace

std::vector<NamedPass<CpuPlan>> cpu_passes(const CpuPlan& plan) {
  std::vector<NamedPass<CpuPlan>> passes;
  auto add = [&](bool wanted, std::string_view name, LoopNest (*run)(LoopNest, const CpuPlan&)) {
    if (wanted) passes.push_back({name, run});
  };
  // A filter gradient whose threads each own a slice of dW schedules one slice.
  const bool sliced = plan.output_slices > 1;
  add(sliced, "narrow_to_output_slice", &narrow_to_output_slice);
  // A 1x1 stride-1 problem's pixels as one row per image, then the layout the tiles take their
  // vectors in, and the dy copies it reads.
  add(plan.pixels_as_one_row, "pixels_as_one_row", &pixels_as_one_row);
  add(plan.channels_last_copies, "channels_last_copies", &channels_last_copies);
  add(plan.position_vectors, "position_vectors", &position_vectors);
  add(plan.channels_first_out_backprop_copy, "copy_channels_first_out_backprop",
      &copy_channels_first_out_backprop);
  // Dense stride-1 problems per residue (input gradients), zero borders on the dy copies,
  // then the guards' borders peeled so the interior tiles have none.
  add(true, "stride_residue_split", &transform<&stride_residue_split>);
  add(plan.taps_share_out_backprop, "taps_share_out_backprop", &taps_share_out_backprop);
  add(plan.pad_out_backprop_copies, "pad_transposed_out_backprop", &pad_transposed_out_backprop);
  add(true, "border_peel", &peel_borders);
  // Operand layouts: the packed (and channel-blocked) filter, the depth multiplier's and the
  // NCHW filter gradient's copies, 16-bit depthwise operands in f32.
  add(plan.pack_filter, "pack_filter", &pack_filter);
  add(plan.channel_block > 0, "block_channels", &block_channels);
  add(plan.deinterleave_multiplier, "deinterleave_multiplier", &deinterleave_multiplier);
  add(plan.channels_last_out_backprop, "channels_last_out_backprop", &channels_last_out_backprop);
  add(plan.widen_depthwise_operands, "widen_depthwise_operands", &widen_depthwise_operands);
  // Register tiles over the guard-free interior (the border columns' pixels down H as rows),
  // and bfloat16 pairs in them.
  add(plan.border_columns_as_rows, "border_columns_as_rows", &border_columns_as_rows);
  add(true, "register_tile", &register_tile);
  add(plan.pair_output_channels, "pair_reduction", &pair_reduction);
  add(plan.channel_blocks_inside_pixels, "channel_blocks_inside_pixels",
      &channel_blocks_inside_pixels);
  add(plan.channel_blocks_around_batch, "channel_blocks_around_batch",
      &channel_blocks_around_batch);
  // The filter gradient's reduction blocked for the caches (it sees the border tiles' final
  // ranges) and split among the threads into partial sums, then the parts all this made equal
  // merged.
  add(plan.reduction_blocking != ReductionBlocking::kNone || plan.columns_outside_rows ||
          plan.reduction_split != ReductionSplit::kNone || plan.partial_sums_for_rounding,
      "block_reduction", &block_reduction);
  add(true, "merge_equal_parts", &transform<&merge_equal_parts>);
  // Threads: per-image copies in per-thread slots, streamed output stores (once the tiles and
  // the buffers they write are final), the next row groups' prefetches, the split of the work,
  // the filter gradient's per-thread batch copies (they follow the batch loops the split
  // made), and the next blocks' prefetches once each tile's operands are final (a tile that
  // reads a copy leaves its source to the copy).
  add(plan.privatize_batch_copies, "privatize_batch_copies", &privatize_batch_copies);
  add(plan.stream_output, "stream_output_stores", &stream_output_stores);
  add(plan.prefetch_streamed_rows, "prefetch_streamed_rows", &prefetch_streamed_rows);
  add(plan.pack_filter && plan.threads > 1, "band_packing_rows", &band_packing_rows);
  add(true, "parallelize", &parallelize);
  add(plan.batch_copies != BatchCopies::kNone, "copy_batch_operands", &copy_batch_operands);
  add(plan.prefetch_streamed_rows && plan.problem.direction == ConvDirection::kBackpropFilter,
      "prefetch_next_blocks", &prefetch_next_blocks);
  add(sliced, "spread_output_slices", &spread_output_slices);
  return passes;
}

LoopNest schedule(LoopNest nest, const CpuPlan& plan, const PassObserver& observer) {
  nest = run_passes(std::move(nest), cpu_passes(plan), plan, observer);
  // The kernel's name, from the plan and what the schedule made of it.
  nest.schedule_summary = schedule_tokens(plan, nest);
  return nest;
}

LoopNest lower_and_schedule(const ConvProblem& problem, const CpuInfo& cpu, int threads,
                            const PassObserver& observer) {
  const CpuPlan plan = plan_cpu(problem, cpu, threads);
  LoopNest nest = lower(problem);
  if (observer) observer("lower", nest);
  return schedule(std::move(nest), plan, observer);
}

}  // namespace convjit::cpu
