// The schedule passes, in pipeline order (see ir/pipeline.cpp). Each takes a valid LoopNest and
// returns an equivalent one: interpreting before and after gives the same result.
#pragma once

#include "ir/ir.hpp"
#include "ir/target.hpp"

namespace convjit::ir {

/// Backprop data NCHW with enough channels to fill vectors: rebuilds the nest as the NHWC
/// problem over scratch copies of dy and dx (copied in before the tiles and out after them),
/// so every later pass schedules it as NHWC.
LoopNest channels_last_backprop_data(LoopNest nest, const Target& target);

/// Backprop data: reorders the input-channel loop inside the H loop so tiles can take rows over
/// channels and vectors along W: always for NCHW (every channel shares the dy vector), and for
/// NHWC when the cost model prefers W vectors over a mostly masked channel vector (few
/// channels), routing dy through a scratch transposed to [n][oh][oc][ow].
LoopNest position_vectors(LoopNest nest, const Target& target);

/// Depthwise backprop data NCHW: reads dy through a copy of each group's planes, made right
/// before their tiles (pad_transposed_out_backprop pads it), instead of in place; at stride 2
/// along W the copy repeats every column and the taps go in pairs against per-column weights,
/// so W needs no residues.
LoopNest copy_channels_first_out_backprop(LoopNest nest, const Target& target);

/// Backprop data: splits each X spatial loop by residue mod stride (v = stride*q + r) and
/// re-indexes the taps that reach residue r as a dense strided subset, so every divisor and
/// every divisibility guard disappears. Afterwards all indices are affine.
LoopNest stride_residue_split(LoopNest nest, const Target& target);

/// Backprop data in the W-vector form: zero rows and columns around each image of the
/// transposed dy copy, as wide as the taps reach, so the tiles need no guards on it and W and
/// H get no border parts.
LoopNest pad_transposed_out_backprop(LoopNest nest, const Target& target);

/// Splits loops whose variable appears in tile guards into border parts and an interior where
/// every guard provably holds and is removed. Short border parts are unrolled to single
/// iterations, whose guards become tighter reduce-loop bounds.
LoopNest border_peel(LoopNest nest, const Target& target);

/// Backprop data NHWC: packs W once per call into a scratch [kh][kw][oc][i] so the tile's b
/// operand is contiguous along the vectorized input channel.
LoopNest pack_filter(LoopNest nest, const Target& target);

/// Backprop data NHWC with a packed filter: moves blocks of input channels outside the pixel
/// loops (around each row, or around the image when the filter outgrows L2), so one block's
/// filter slice serves many pixels; the packed filter becomes [block][kh][kw][oc][cols].
LoopNest block_channels(LoopNest nest, const Target& target);

/// Depthwise backprop data NHWC with a depth multiplier M > 1: copies W and dy once per call
/// into scratches laid out [..][m][c], so the channel vector is contiguous in both operands.
LoopNest deinterleave_multiplier(LoopNest nest, const Target& target);

/// Backprop filter NCHW: copies dy once per call into an NHWC scratch so the tiles' column
/// vectors (output channels) are contiguous in it.
LoopNest channels_last_out_backprop(LoopNest nest, const Target& target);

/// Turns an innermost (row loop, column loop, 1x1 tile) nest into rows x cols register tiles
/// sized for the target's vector lanes and registers, with remainder rows and channel tails.
LoopNest register_tile(LoopNest nest, const Target& target);

/// Bfloat16 backprop data on CPUs with avx512_bf16: re-packs the filter as pairs of output
/// channels and makes every tile a paired tile (two reduction points per `vdpbf16ps`).
LoopNest pair_reduction(LoopNest nest, const Target& target);

/// Backprop filter: hoists the batch and blocks of output rows (sized to stay in L2) out of
/// the tiles' reduction, so every tile of a chunk reuses its x and dy rows from cache; the
/// tiles then accumulate into dW, which a Store nest zeroes first.
LoopNest block_reduction(LoopNest nest, const Target& target);

/// Joins adjacent serial loops over one variable whose bodies are the same code on every
/// iteration (peeled parts that blocking made alike) into one loop, so it is generated once.
LoopNest merge_equal_parts(LoopNest nest, const Target& target);

/// 16-bit depthwise backprop data (NHWC): the tiles read f32 copies of the filter (once per
/// call) and of dy (per image), instead of widening both vectors at every reduction point.
LoopNest widen_depthwise_operands(LoopNest nest, const Target& target);

/// Backprop data whose tiles run on per-call copies of an operand (a transposed dy, NCHW's
/// channels-last dy and dx): the batch walks images in one chunk per thread, copying each
/// image into the thread's slot, so those scratches hold one image per thread.
LoopNest privatize_batch_copies(LoopNest nest, const Target& target);

/// Data gradients (and the forward op) whose output outgrows the last-level cache: marks the
/// tiles that write whole cache lines of it, when nothing else touches it, for non-temporal
/// stores.
LoopNest stream_output_stores(LoopNest nest, const Target& target);

/// Marks the outermost independent loops parallel; for backprop filter, first splits the
/// spatial reduction into chunks with private partial sums reduced at the end.
LoopNest parallelize(LoopNest nest, const Target& target);

/// 16-bit backprop filter NHWC, once the schedule is final. Bfloat16 on CPUs with
/// avx512_bf16: each per-thread batch loop takes its images in pairs, interleaving x and dy of
/// the pair into the thread's slot, and every tile becomes a paired tile (two images per
/// `vdpbf16ps`). Otherwise each image's dy is widened to f32 into the slot before its tiles.
/// The copies hold only the part of each image the slot's tiles read.
LoopNest copy_batch_operands(LoopNest nest, const Target& target);

/// Backprop filter NCHW, a step of parallelize once it has split the batch among the threads:
/// dy's channels-last copy moves into the per-chunk batch loop, one image at a time into its
/// chunk's slot, so the copy holds one image per thread. Returns whether it applied.
bool privatize_filter_gradient_copy(LoopNest& nest);

}  // namespace convjit::ir
