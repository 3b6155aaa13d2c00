// The CPU schedule passes, in pipeline order (see cpu_pipeline.cpp). Each takes a valid LoopNest and
// returns an equivalent one: interpreting before and after gives the same result.
#pragma once

#include "codegen/cpu/cpu_plan.hpp"
#include "ir/ir.hpp"

namespace convjit::cpu {

/// Forward and backprop data with a 1x1 filter at stride 1 and no padding: the nest lowered
/// again with each image's H x W pixels as one row of H*W, the same tensors in memory. The
/// first pass of such a schedule; it replaces the nest.
ir::LoopNest pixels_as_one_row(ir::LoopNest nest, const CpuPlan& plan);

/// NCHW forward and backprop data with enough channels to fill vectors: rebuilds the nest as
/// the NHWC problem over scratch copies of the activations (x and y; dy and dx), the one read
/// copied in before the tiles and the one written copied out after them, so every later pass
/// schedules it as NHWC.
ir::LoopNest channels_last_copies(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop filter split into output slices (one per thread): the schedule of one slice, lowered
/// as a problem of its own over windows of the op's tensors (their real strides). The first
/// pass of such a schedule; it replaces the nest.
ir::LoopNest narrow_to_output_slice(ir::LoopNest nest, const CpuPlan& plan);

/// The last pass of an output-sliced schedule: the slice's nest runs once per slice in a
/// parallel loop, at the slice's offset in the sliced tensors, each slice with scratch of its own.
ir::LoopNest spread_output_slices(ir::LoopNest nest, const CpuPlan& plan);

/// Depthwise backprop filter: splits each filter-column loop's reduction over ow into the left
/// border columns, the interior where every filter column lies inside x (its guard on x's W
/// dropped) and the right border columns, the later parts accumulating, so border_peel leaves
/// the interior's kw loop whole for register_tile to take as rows sharing dy.
ir::LoopNest taps_share_out_backprop(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop data: reorders the input-channel loop inside the H loop so tiles can take rows over
/// channels and vectors along W: always for NCHW (every channel shares the dy vector), and for
/// NHWC when the cost model prefers W vectors over a mostly masked channel vector (few
/// channels), routing dy through a scratch transposed to [n][oh][oc][ow].
ir::LoopNest position_vectors(ir::LoopNest nest, const CpuPlan& plan);

/// Depthwise backprop data NCHW: reads dy through a copy of each group's planes, made right
/// before their tiles (pad_transposed_out_backprop pads it), instead of in place; at stride 2
/// along W the copy repeats every column and the taps go in pairs against per-column weights,
/// so W needs no residues.
ir::LoopNest copy_channels_first_out_backprop(ir::LoopNest nest, const CpuPlan& plan);


/// Backprop data in the W-vector form: zero rows and columns around each image of the
/// transposed dy copy, as wide as the taps reach, so the tiles need no guards on it and W and
/// H get no border parts.
ir::LoopNest pad_transposed_out_backprop(ir::LoopNest nest, const CpuPlan& plan);


/// Backprop data NHWC: packs W once per call into a scratch [kh][kw][oc][i] so the tile's b
/// operand is contiguous along the vectorized input channel.
ir::LoopNest pack_filter(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop data NHWC with a packed filter: moves blocks of input channels outside the pixel
/// loops (around each row, or around the image when the filter outgrows L2), so one block's
/// filter slice serves many pixels; the packed filter becomes [block][kh][kw][oc][cols].
ir::LoopNest block_channels(ir::LoopNest nest, const CpuPlan& plan);

/// Depthwise gradients NHWC with a depth multiplier M > 1: copies dy (and for the input
/// gradient W) into scratches laid out [..][m][c], so the channel vector is contiguous in the
/// operands; the filter gradient's tiles take the multiplier's outputs as rows.
ir::LoopNest deinterleave_multiplier(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop filter NCHW: copies dy once per call into an NHWC scratch so the tiles' column
/// vectors (output channels) are contiguous in it.
ir::LoopNest channels_last_out_backprop(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop data and the forward op, NHWC with channel vectors: each H loop around a row's
/// border columns (W loops of one position) is distributed over the row's parts, the border
/// columns' position substituted, so their pixels down H become the rows of register tiles.
ir::LoopNest border_columns_as_rows(ir::LoopNest nest, const CpuPlan& plan);

/// Turns an innermost (row loop, column loop, 1x1 tile) nest into rows x cols register tiles
/// sized for the target's vector lanes and registers, with remainder rows and channel tails.
ir::LoopNest register_tile(ir::LoopNest nest, const CpuPlan& plan);

/// Bfloat16 backprop data on CPUs with avx512_bf16: re-packs the filter as pairs of output
/// channels and makes every tile a paired tile (two reduction points per `vdpbf16ps`).
ir::LoopNest pair_reduction(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop data with channel blocks: each block loop sunk from around the rows (or the
/// image) to right above the column loops, so one pixel tile's dy stays in L1 across the
/// blocks while their filter slices stream (channel_blocks_inside_pixels).
ir::LoopNest channel_blocks_inside_pixels(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop data with channel blocks around the image: the batch walked in one chunk of images
/// per thread inside each block, so a block's filter slice serves all the chunk's images from
/// L2 (channel_blocks_around_batch).
ir::LoopNest channel_blocks_around_batch(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop filter: hoists the batch and blocks of output rows (sized to stay in L2) out of
/// the tiles' reduction, so every tile of a chunk reuses its x and dy rows from cache; the
/// tiles then accumulate into dW, which a Store nest zeroes first. Then splits the reduction
/// among the threads (split_reduction).
ir::LoopNest block_reduction(ir::LoopNest nest, const CpuPlan& plan);


/// 16-bit depthwise backprop data (NHWC): the tiles read f32 copies of the filter (once per
/// call) and of dy (per image), instead of widening both vectors at every reduction point.
ir::LoopNest widen_depthwise_operands(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop data whose tiles run on per-call copies of an operand (a transposed dy, NCHW's
/// channels-last dy and dx): the batch walks images in one chunk per thread, copying each
/// image into the thread's slot, so those scratches hold one image per thread.
ir::LoopNest privatize_batch_copies(ir::LoopNest nest, const CpuPlan& plan);

/// Data gradients (and the forward op) whose output outgrows the last-level cache: marks the
/// tiles that write whole cache lines of it, when nothing else touches it, for non-temporal
/// stores.
ir::LoopNest stream_output_stores(ir::LoopNest nest, const CpuPlan& plan);

/// Marks the tiles whose per-row operand (one broadcast per row, rows in different lines)
/// outgrows the core's L2 to prefetch their next row group's lines.
ir::LoopNest prefetch_streamed_rows(ir::LoopNest nest, const CpuPlan& plan);

/// Filter gradients: marks the tiles that take a new line of a tensor beyond L2 per reduction
/// point to prefetch, at every point, the lines of the same point of their next block of pixels.
/// Runs on the final nest (after copy_batch_operands): copies are not marked.
ir::LoopNest prefetch_next_blocks(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop data with a packed filter on more than one thread: each packing copy as bands of 16
/// rows (output channels) outermost, every channel block and tap inside a band, so threads split
/// equal bands and each band transposes whole 64-byte lines of W.
ir::LoopNest band_packing_rows(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop filter: splits the reduction among the threads as the plan chose, each chunk
/// writing private partial sums that a final Store nest adds up and rounds once into dW (the
/// one place partial sums are made). block_reduction's last step.
ir::LoopNest split_reduction(ir::LoopNest nest, const CpuPlan& plan);

/// Marks the outermost independent loops parallel (the filter gradient's copy of dy first moved
/// into the split's per-chunk batch loop).
ir::LoopNest parallelize(ir::LoopNest nest, const CpuPlan& plan);

/// 16-bit backprop filter NHWC, once the schedule is final. Bfloat16 on CPUs with
/// avx512_bf16: each per-thread batch loop takes its images in pairs, interleaving x and dy of
/// the pair into the thread's slot, and every tile becomes a paired tile (two images per
/// `vdpbf16ps`). Otherwise each image's dy is widened to f32 into the slot before its tiles.
/// The copies hold only the part of each image the slot's tiles read.
ir::LoopNest copy_batch_operands(ir::LoopNest nest, const CpuPlan& plan);

/// Backprop filter NCHW, a step of parallelize once it has split the batch among the threads:
/// dy's channels-last copy moves into the per-chunk batch loop, one image at a time into its
/// chunk's slot, so the copy holds one image per thread. Returns whether it applied.
bool privatize_filter_gradient_copy(ir::LoopNest& nest);

}  // namespace convjit::cpu
