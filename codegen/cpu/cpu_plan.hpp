// CpuPlan: every decision the CPU schedule carries out for one problem on one core type, made in
// one place (plan_cpu, before lowering) from the ConvProblem and the CpuInfo. The pass list
// (cpu_pipeline.cpp) is built from it, each pass reads its part and decides nothing: it only
// works out the geometry its part implies (which taps reach a border, where chunk boundaries
// fall) and applies the plan's tile and blocking rules to the shapes it finds. The kernel's name
// is printed from the plan (kernel_name.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "codegen/backend.hpp"
#include "codegen/cpu/cpu_info.hpp"
#include "codegen/cpu/tile_model.hpp"
#include "frontend/problem.hpp"

namespace convjit::cpu {

/// How a filter gradient's reduction over (n, oh, ow) meets the caches and the threads.
enum class ReductionBlocking : std::uint8_t {
  kNone,         // every tile reduces over all of it (it fits in half the L2)
  kBatchChunks,  // a batch loop outside the tiles, chunks of output rows inside (blk=n,ohR)
  kRowSplit,     // each thread takes a share of every tile's rows (blk=ohxT,ohR)
};

/// How the threads share a filter gradient's reduction (data gradients and the forward op
/// always split their independent outer loops).
enum class ReductionSplit : std::uint8_t {
  kNone,        // one thread (or independent loops only)
  kRowThreads,  // the row split's per-thread loop (ReductionBlocking::kRowSplit)
  kBatch,       // the blocked batch loop, in one chunk of images per thread (split=nbxT)
  kDims,        // n, oh or ow divided into chunks, unblocked (split=nxT, ohxT, owxT)
};

/// The 16-bit filter gradient's per-thread copies of its batch operands.
enum class BatchCopies : std::uint8_t {
  kNone,
  kPairs,     // image pairs interleaved for vdpbf16ps (dp2n) or AMX (dp2t)
  kWiden,     // each image's dy (and x) widened to f32 once (wdy, wxdy)
  kRestride,  // f32/f64: each image's x and/or dy copied with padded pixels (rsx, rsdy, rsxdy)
};

struct CpuPlan final : codegen::Plan {
  /// The problem and the core the kernel is planned for.
  ConvProblem problem;
  CpuInfo cpu;
  /// Threads worth using: the caller's count, or 1 where waking the pool costs more than it
  /// saves (small problems).
  int threads = 1;
  /// The register-tile cost model the tiles are chosen with, for this core and dtype.
  TileModel tiles;

  // --- The activations' layout (backprop data, forward) ---------------------------------------
  /// A 1x1 filter at stride 1 with no padding: the H x W pixels of each image scheduled as one
  /// row of H*W (px), so register tiles run down the whole image, not row by row.
  bool pixels_as_one_row = false;
  /// NCHW through NHWC copies of the activations (dy and dx; x and y): the rest of the
  /// schedule is NHWC's (tonhwc).
  bool channels_last_copies = false;
  /// Vectors along W and rows over input channels (NCHW; NHWC with few channels).
  bool position_vectors = false;
  /// NHWC position vectors read dy through a copy transposed to [n][oh][oc][ow] (wvec).
  bool transposed_out_backprop = false;
  /// NCHW depthwise: dy through per-group copies of its planes made right before the tiles.
  bool channels_first_out_backprop_copy = false;
  /// ... at stride 2 along W each column copied twice, so W needs no residues (dyp2).
  bool repeated_columns = false;
  /// ... into planes of each group's own (fewer images than threads: the group loop splits).
  bool planes_per_group = false;
  /// The residues each spatial dim of the input gradient is split into (1: none).
  std::int64_t residues_h = 1, residues_w = 1;
  /// Those dy copies get zero borders wide enough for every tap (zpad). The padding multiplies
  /// the filter, so the kernel keeps an exact twin without it for filters holding Inf or NaN.
  bool pad_out_backprop_copies = false;
  /// NHWC: the filter packed once per call to [kh][kw][oc][ic] (pack), in this dtype.
  bool pack_filter = false;
  DType packed_filter_dtype = DType::kFloat32;
  /// Blocks of input channels moved outside the pixel loops (cbW, around each row: cbWr); 0:
  /// no blocks.
  std::int64_t channel_block = 0;
  bool channel_blocks_around_rows = false;
  /// ... then sunk inside each pixel tile, so its dy stays in L1 across the blocks (cbP).
  bool channel_blocks_inside_pixels = false;
  /// ... or, around the image where the filter outgrows L2, made to go around one chunk of
  /// images per thread, so each block's slice comes from L3 once per thread (cbWb).
  bool channel_blocks_around_batch = false;
  /// NHWC depthwise with a depth multiplier: filter and dy deinterleaved to [..][m][c] (deintM).
  bool deinterleave_multiplier = false;
  /// 16-bit NHWC depthwise: the tiles read f32 copies of the filter and dy (f32ops).
  bool widen_depthwise_operands = false;
  /// bfloat16 with vdpbf16ps: the packed filter's output channels in pairs (dp2).
  bool pair_output_channels = false;
  /// NHWC depthwise: W's borders stay guarded and each tile's rows span the whole width, so
  /// the x86 emitter's sliding-window tile reads each dy vector once per filter row and skips
  /// the taps past the borders, where border peeling left a one-position tile per border
  /// column (wrow).
  bool whole_width_rows = false;
  /// Operand copies per image walked in one chunk of images per thread (priv=xT).
  bool privatize_batch_copies = false;
  /// NHWC channel-vector tiles: the border columns' pixels down H tiled as rows, not one
  /// one-row tile per pixel (bcr).
  bool border_columns_as_rows = false;

  // --- The filter gradient's reduction ------------------------------------------------------
  /// Depthwise: the filter's columns kept whole over the interior columns of ow, where every
  /// one lies inside x, so their tiles take them as rows sharing dy (tkw).
  bool taps_share_out_backprop = false;
  /// NCHW: dy copied channels-last so the tiles' columns (output channels) are contiguous (dyc).
  bool channels_last_out_backprop = false;
  ReductionBlocking reduction_blocking = ReductionBlocking::kNone;
  /// kBatchChunks of whole images (everything fits, but the NCHW copy of dy should follow the
  /// images); otherwise chunks of reduction_chunk_rows() output rows.
  bool whole_image_chunks = false;
  /// kBatchChunks: images per chunk, where one image holds fewer points than a chunk needs
  /// (min_chunk_points); the chunks are then whole images (blk=nG).
  std::int64_t chunk_images = 1;
  /// The tile loops of each tap interchanged so one column block's tiles run over all rows
  /// (with any blocking, and wherever the batch does not divide among the threads).
  bool columns_outside_rows = false;
  /// Unblocked tiles with their row blocks (input channels) outside the column blocks: each row
  /// block rereads all of dy, where dy is the smaller operand (plan_filter_gradient.cpp).
  bool rereads_out_backprop = false;
  ReductionSplit reduction_split = ReductionSplit::kNone;
  /// Threads that each own an equal slice of dW instead: its output channels (or input
  /// channels) divided into this many slices, each reduced over everything by one thread, so
  /// no thread keeps partial sums of the whole filter (slice=ocxT, icxT; 1: none). Every other
  /// decision is then made for one slice on one thread (output_slice_problem).
  std::int64_t output_slices = 1;
  bool slices_of_input_channels = false;
  /// kDims: the reduce dim divided (0 n, 1 oh, 2 ow) and into how many chunks.
  int split_dim = 0;
  std::int64_t split_chunks = 1;
  /// One thread, 16-bit dW: accumulated into f32 partial sums, rounded once (acc=partial).
  bool partial_sums_for_rounding = false;
  BatchCopies batch_copies = BatchCopies::kNone;
  /// kPairs on AMX: x's image pairs copied once more with each input channel's pixels
  /// together, [channel][pixel][2], so that 16 consecutive pixels of a channel are one row of
  /// a tdpbf16ps row tile (dy's image pairs already are its column tiles) (dp2t).
  bool input_pairs_by_channel = false;
  /// Elements added to each pixel of those copies of x and of dy (0: the copy keeps the
  /// tensor's pixel stride): where the tiles' consecutive reduce points are a multiple of 512
  /// bytes apart in an operand, its lines crowd a few L1 sets and the rows of one column block
  /// (or the columns of one row block) cannot keep them (pixel_padding).
  std::int64_t x_pixel_padding = 0;
  std::int64_t y_pixel_padding = 0;
  /// The most bytes a per-thread copy of an operand may take and still be read from L2 between
  /// its uses (half the core's L2): larger copies are made per row chunk, or not unblocked.
  std::int64_t copy_budget_bytes = 0;

  // --- Every op ------------------------------------------------------------------------------
  /// The output outgrows the last-level cache: tiles writing it take whole cache lines of
  /// columns where the extent allows ...
  bool whole_line_output_tiles = false;
  /// ... and those tiles (or the copy that writes it) store with non-temporal stores (nt),
  /// except the filter gradient's, which accumulates.
  bool stream_output = false;
  /// Tiles whose per-row operand outgrows the L2 prefetch their next row group (pf; the
  /// vector targets: the interpreter has no prefetch).
  bool prefetch_streamed_rows = false;

  std::string describe() const override;
};

/// The plan for `problem` on `cpu` with up to `max_threads` threads.
CpuPlan plan_cpu(const ConvProblem& problem, const CpuInfo& cpu, int max_threads);

/// Whether `problem` is one matrix product per image over its pixels, so its H x W pixels can
/// be scheduled as one row: forward or input gradient, a 1x1 filter at stride 1, no padding.
bool pixels_form_one_row(const ConvProblem& problem);

/// `problem` with each image's H x W pixels as one row of H*W (the same tensors in memory: H
/// and W are dense together in both layouts).
ConvProblem one_row_problem(const ConvProblem& problem);

/// The problem one slice of an output-sliced filter gradient schedules: `problem` with the
/// sliced channels divided by plan.output_slices.
ConvProblem output_slice_problem(const ConvProblem& problem, const CpuPlan& plan);

/// Reduce points each tile must cover per chunk of a blocked filter-gradient reduction so that
/// reloading its accumulators from wherever dW lives (L1, L2, L3 or memory, by its size) costs
/// at most a small share of the chunk's FMAs; `grown_past_l1`: for a chunk that outgrows L1
/// anyway, whose share is smaller where L2 feeds the tiles.
std::int64_t min_chunk_points(const ConvProblem& problem, const CpuPlan& plan,
                              bool grown_past_l1 = false);

/// Output rows per chunk of a blocked filter-gradient reduction whose widest tile has
/// `tile_cols` columns (the plan's blocking rule, applied by block_reduction to its tiles).
std::int64_t reduction_chunk_rows(const ConvProblem& problem, const CpuPlan& plan,
                                  std::int64_t tile_cols);

/// Elements to add to each pixel of `channels` elements of `bytes` bytes, read `step` pixels
/// apart, so that consecutive reads spread over the L1's sets (0 where they already do).
std::int64_t pixel_padding(std::int64_t channels, std::int64_t bytes, std::int64_t step);

/// A bfloat16 filter gradient's copy of x by channel (input_pairs_by_channel) transposes
/// blocks of 8 pixels x 8 channels of pairs: x needs that many channels (fewer go element by
/// element, and fill few of a tile's 16 rows: the 3-channel stems ran 20% slower than
/// widened), and rows that many pixels to be copied row by row, as a column stride's residues
/// must.
inline constexpr std::int64_t kPairsByChannelBlock = 8;

/// Whether a 16-bit filter gradient's per-image widened copy of x pays for itself with tiles of
/// `tile_cols` columns: each x element is broadcast often enough that converting it once beats
/// converting it at every broadcast.
bool widening_input_pays(const ConvProblem& problem, std::int64_t tile_cols);

/// The most chunks of output rows a blocked reduction emits as constant parts (each copies the
/// tile nest) before its chunks grow instead.
inline constexpr std::int64_t kMaxConstantChunks = 8;

}  // namespace convjit::cpu
