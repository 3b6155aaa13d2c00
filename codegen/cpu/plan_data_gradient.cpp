// The CPU plan's data-gradient decisions: which layout the tiles take their vectors in, which
// operands are copied or packed first, channel blocks and bfloat16 pairs. Every rule reads the
// problem (as the schedule will see it) and the core; the numbers behind each are measured and
// stated where the rule is.
#include <algorithm>

#include "codegen/cpu/plan_rules.hpp"

namespace convjit::cpu {
namespace {

// Cycles to copy one dy element into the transposed scratch (a strided gather, lane by lane).
constexpr double kTransposeCyclesPerElement = 1.5;
// Share of L2 the packed filter may fill and still count as staying there between rows.
constexpr double kFilterL2Share = 0.5;
// NHWC depthwise rows span the whole width once its border positions (where some tap leaves
// dy) are this share of it: each would otherwise be a tile of one position loading a dy vector
// per FMA. Measured on Zen 5, one thread: 8x56x56x144 3x3 (2 of 56) 154 -> 176 GFLOP/s with
// whole rows, 8x112x112x32 3x3 (2 of 112) 191 -> 163: the peeled interior's two-vector tiles
// win once the borders are that few.
constexpr double kWholeWidthBorderShare = 1.0 / 32;

// Share of a row's positions (per stride residue) in its border columns above which channel
// blocks go around the image, so the border columns run down H, rather than around each row,
// which keeps each row's dy in cache across the blocks. Measured on Zen 5, two threads, 3x3
// SAME input gradients (two border columns): 28 wide, bf16 128 -> 128 878 -> 991 GFLOP/s and
// 256 -> 64 909 -> 1003; 56 wide, f32 128 -> 64 466 -> 514, AVX2 code 64 -> 64 254 -> 259;
// 112 wide bf16 952 -> 944; 224 and 256 wide on AVX2 254 -> 247 (around the image lost there).
constexpr double kBorderColumnsShare = 1.0 / 32;

std::int64_t ceil_div_pos(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The share of a residue row's positions that are border columns (some tap leaves dy).
double border_columns_share(const ConvProblem& p) {
  const std::int64_t taps = ceil_div_pos(p.kw_eff(), p.stride_w);
  return static_cast<double>(taps - 1) / static_cast<double>(ceil_div_pos(p.iw, p.stride_w));
}

// Bytes per cycle of the dy window a pixel tile rereads for every channel block (see
// out_backprop_reread_rate) above which the blocks go inside the pixel tiles. The FMA tiles
// the model picks (f32, vdpbf16ps; several vectors wide) ask 1-3 and hide them; AMX tiles,
// several times faster per reduce point, ask 18 at 1x1, 9 at 2x2 and 6.5 at 3x3 (3 at 7x7),
// which L2 then has to deliver beside the filter's slices. Measured on the AMX Xeon, two
// threads, bfloat16 networks.txt layers whose packed filter stays in L2, both builds
// alternating (benchmarks/paired_compare.py): 1x1 1.05-1.76x (8x56x56 96 <- 384 1191 -> 2100
// GFLOP/s, 8x28x28 512 <- 128 1814 -> 2393), 3x3 at stride 2 1.12x, 3x3 at stride 1
// 0.99-1.05x (the tile configuration also changes less often, each kind of border tile
// running for all blocks of a row); f32 FMA tiles within noise either way. 5x5 and wider
// filters are unmeasured and keep the blocks around.
constexpr double kRereadBytesPerCycle = 5;

// The bytes of dy one pixel tile of `shape` reads (its window: the rows and columns the taps
// of one residue class reach, every output channel) per cycle of one channel block's tile, as
// the model costs it: what each further channel block around the pixels reads again from L2.
double out_backprop_reread_rate(const ConvProblem& p, const TileModel& model, TileShape shape) {
  const std::int64_t taps_h = ceil_div_pos(p.kh, p.stride_h);
  const std::int64_t taps_w = ceil_div_pos(p.kw, p.stride_w);
  const double window = static_cast<double>(taps_h * (shape.rows + taps_w - 1) * p.oc) *
                        static_cast<double>(dtype_size(p.dtype));
  const double cycles =
      static_cast<double>(taps_h * taps_w * p.oc) * model.cycles_per_reduce_point(shape);
  return cycles > 0 ? window / cycles : 0;
}

// Share of L1 the filter lines one row block of position-vector tiles broadcasts from may
// fill: they are reread by every W tile of the row and by the next rows of channels.
constexpr double kPositionFilterL1Share = 0.5;

// Bytes of the filter the position-vector tiles of one block of channel rows broadcast from:
// per (tap of a residue class, output channel), the rows' consecutive input channels, a line
// of them at most (several taps' elements share a line where the channels are few).
double position_filter_bytes(const ConvProblem& p) {
  const std::int64_t taps = ceil_div_pos(p.kh, p.stride_h) * ceil_div_pos(p.kw, p.stride_w);
  const std::int64_t row_bytes =
      std::min<std::int64_t>(p.filter_in * dtype_size(p.dtype), CpuInfo::kCacheLineBytes);
  return static_cast<double>(taps * p.oc * row_bytes);
}

// NHWC with few input channels: a vector over 3 channels is mostly masked lanes, so W
// positions become the vector and channels the rows, reading dy through a copy transposed to
// [n][oh][oc][ow]. Compares both tiles' whole-problem cycles, the copy included, the channel
// tiles' under `channel_model` (AMX's where they would run there), the positions' under
// `model`. Only while the filter the rows broadcast from stays in L1: the position tiles read
// it as scalars, a line per tap and output channel, and where those lines outgrow L1 every
// broadcast goes to L2 (2x64x64, 256 -> 256 channels, 3x3 on Zen 3: 147 KB of lines, 34
// GFLOP/s against 74 with channel vectors; the ResNet stem's 3 channels take 12 KB).
bool positions_win(const ConvProblem& p, const TileModel& model, const TileModel& channel_model,
                   const CpuInfo& cpu) {
  if (position_filter_bytes(p) > kPositionFilterL1Share * static_cast<double>(cpu.l1_bytes)) {
    return false;
  }
  // Per residue row: the positions of one residue class, each a reduction over the taps that
  // reach it and every output channel.
  const std::int64_t q = ceil_div_pos(p.iw, p.stride_w);
  const std::int64_t k = ceil_div_pos(p.kh, p.stride_h) * ceil_div_pos(p.kw, p.stride_w) * p.oc;
  const double channel = channel_model.best_cycles(TileForm::kOuterProduct, q, p.filter_in, k);
  const double position = model.best_cycles(TileForm::kOuterProduct, p.filter_in, q, k);
  const double rows = static_cast<double>(p.n * p.ih * p.stride_w);
  const double copy = kTransposeCyclesPerElement * static_cast<double>(p.n * p.oh * p.ow * p.oc);
  return position * rows + copy < channel * rows;
}

// Channel blocks around the image with a filter past L2 read the whole filter from L3 once
// per image; around each thread's chunk of images, once per thread, each block then rereading
// the chunk's dy instead (from L2 where it fits there beside the block's slice, from L3 once
// per block otherwise). True where the second costs the thread fewer bytes from L3.
bool blocks_around_batch_read_less(const ConvProblem& p, const CpuInfo& cpu, int threads,
                                   double filter_bytes, std::int64_t blocks) {
  const std::int64_t per_thread = p.n / std::max(threads, 1);
  if (per_thread < 2 || blocks < 2) return false;
  const double chunk_dy =
      static_cast<double>(per_thread * p.oh * p.ow * p.oc * dtype_size(p.dtype));
  const double slice = filter_bytes / static_cast<double>(blocks);
  const bool dy_stays = chunk_dy + slice <= kFilterL2Share * static_cast<double>(cpu.l2_bytes);
  const double around_images = filter_bytes * static_cast<double>(per_thread);
  const double around_batch =
      filter_bytes + chunk_dy * (dy_stays ? 1.0 : static_cast<double>(blocks));
  return around_batch < around_images;
}

}  // namespace

ConvProblem plan_data_gradient(const ConvProblem& problem, CpuPlan& plan) {
  const CpuInfo& cpu = plan.cpu;
  const bool vectors = cpu.vector_registers > 0;
  plan.channels_last_copies = wants_channels_last_copies(problem, cpu);
  // From here on the schedule sees the problem in the layout its tiles run in.
  ConvProblem p = problem;
  if (plan.channels_last_copies) p.format = DataFormat::kNHWC;
  const bool nchw = p.format == DataFormat::kNCHW;
  const std::int64_t mult = p.oc_per_group();

  // The channel-vector tiles would run paired where the output channels pair (below): on AMX
  // where the core has it, else on vdpbf16ps; the W-position tiles run on FMAs. A stem's 3 channels
  // fill 3 of an AMX tile's 16 columns and still win there: ResNet's 8x224x224x3 7x7/2 221 -> 636
  // GFLOP/s, ConvNeXt's 4x4/4 175 -> 445 (the Xeon, two threads).
  const TileModel channel_model =
      pairs_output_channels(p, cpu) ? paired_bf16_tiles(cpu) : plan.tiles;
  // Vectors along W with rows over input channels: always in NCHW (every channel shares the
  // dy vector along W), and in NHWC where the model prefers them. Only with a channel loop to
  // give the rows (several input channels per group).
  plan.position_vectors =
      !plan.channels_last_copies && p.filter_in > 1 &&
      (nchw || (p.groups == 1 && positions_win(p, plan.tiles, channel_model, cpu)));
  plan.transposed_out_backprop = plan.position_vectors && !nchw;

  // NCHW depthwise reads dy through per-group copies of its planes (there the lowered nest has
  // a group loop to hold them: every depthwise problem with more than one channel).
  plan.channels_first_out_backprop_copy =
      nchw && p.depthwise && vectors && (p.groups > 1 || p.ih == 1);
  // Only for an even filter width: an odd one's last tap pair would multiply dy by a zero
  // weight, which an Inf in dy turns into NaN.
  plan.repeated_columns = plan.channels_first_out_backprop_copy && p.stride_w == 2 &&
                          p.dilation_w == 1 && p.kw > 1 && p.kw % 2 == 0 &&
                          p.dtype != DType::kFloat64;
  plan.planes_per_group = plan.channels_first_out_backprop_copy && p.n < plan.threads;

  // Stride residues: one class of input positions per residue, each a dense stride-1 problem.
  // The repeated columns already make W's taps exact.
  plan.residues_h = p.stride_h;
  plan.residues_w = plan.repeated_columns ? 1 : p.stride_w;
  // The W-contiguous dy copies get zero borders where taps reach past dy.
  plan.pad_out_backprop_copies =
      plan.transposed_out_backprop || plan.channels_first_out_backprop_copy;

  // NHWC: the filter packed so a (tap, output channel) row of input channels is contiguous;
  // 16-bit filters the core multiplies in f32 are widened by the same copy.
  plan.pack_filter = !nchw && p.filter_in > 1 && p.oc > 1;
  // vdpbf16ps and AMX take the packed filter's output channels in pairs; on AMX the tiles
  // are its blocks of 16 rows and 16 columns, and the channel blocks below are chosen with
  // them.
  plan.pair_output_channels =
      pairs_output_channels(p, cpu) && plan.pack_filter && !plan.position_vectors;
  if (plan.pair_output_channels) plan.tiles = paired_bf16_tiles(cpu);
  plan.packed_filter_dtype =
      widens_to_f32(p.dtype, cpu) && !plan.pair_output_channels ? DType::kFloat32 : p.dtype;

  // Channel-vector tiles (not the depthwise ones, whose border columns whole_width_rows
  // covers): a border column's pixels are rows of the tiles down H, not one-row tiles each.
  // Measured on Zen 5, one thread, 3x3 SAME from 512 channels to 512: 4x14x14 169-182 ->
  // 226 GFLOP/s, 8x7x7 202 -> 276, 1x28x28 206 -> 237.
  plan.border_columns_as_rows = !nchw && vectors && !plan.position_vectors && !p.depthwise;
  // Channel blocks as wide as the tile the model picks for a row of pixels, around each row
  // when the whole packed filter stays in L2 between rows, around the image otherwise. But
  // border columns down H need the image's rows inside the channel blocks: where they are a
  // share of the row worth it the blocks go around the image, each block's slice of the filter
  // then staying in L2 for all rows (see kBorderColumnsShare). Where the filter stays in L2,
  // a pixel tile's rereads of dy would bind on L2 (kRereadBytesPerCycle) and the threads have
  // images to split, the blocks then sink inside each pixel tile, the filter streaming per
  // tile from L2 instead.
  if (plan.pack_filter && !plan.position_vectors && p.groups == 1 && !p.depthwise && vectors) {
    const TileShape shape =
        plan.tiles.choose(TileForm::kOuterProduct, p.iw, p.ic, p.kh * p.kw * p.oc);
    const std::int64_t cols = shape.cols;
    if (cols < p.ic) {
      const double filter_bytes = static_cast<double>(p.kh * p.kw * p.oc * p.ic) *
                                  dtype_size(plan.packed_filter_dtype);
      plan.channel_block = cols;
      const bool filter_in_l2 = filter_bytes <= kFilterL2Share * static_cast<double>(cpu.l2_bytes);
      plan.channel_blocks_around_rows =
          filter_in_l2 &&
          !(plan.border_columns_as_rows && border_columns_share(p) >= kBorderColumnsShare);
      // Where the images are fewer than the threads, the blocks around the image are what the
      // threads split (1x56x56 64 <- 64 3x3, two threads: 2860 GFLOP/s with the blocks
      // around, 2070 inside the pixel tiles, split among the threads tile by tile).
      plan.channel_blocks_inside_pixels =
          filter_in_l2 && p.n >= plan.threads &&
          out_backprop_reread_rate(p, plan.tiles, shape) >= kRereadBytesPerCycle;
      // Past L2 (so not around rows), the blocks go around each thread's chunk of images
      // where that reads less from L3. Measured on the AMX Xeon, two threads, both builds alternating
      // (benchmarks/paired_compare.py), ResNet-50's layer 4: f32 1x1 2048 <- 512 256 -> 296
      // GFLOP/s, 3x3 295 -> 334, 3x3/2 261 -> 281; bfloat16 on AMX 1.11-1.17x; AVX2 code
      // 1.06-1.15x; 14x14 layers with 2 images per thread 1.00-1.03x.
      plan.channel_blocks_around_batch =
          !filter_in_l2 && blocks_around_batch_read_less(p, cpu, plan.threads, filter_bytes,
                                                         ceil_div_pos(p.ic, cols));
    }
  }

  plan.whole_width_rows =
      p.depthwise && !nchw && vectors &&
      static_cast<double>(p.kw_eff() - 1) >= kWholeWidthBorderShare * static_cast<double>(p.iw);
  plan.deinterleave_multiplier = !nchw && p.filter_in == 1 && p.groups > 1 && mult > 1;
  plan.widen_depthwise_operands = p.depthwise && !nchw && !plan.deinterleave_multiplier &&
                                  ir::accumulator_dtype(p.dtype) != p.dtype;
  // Copies made per image (transposed or channels-last dy, dy planes, widened dy) walk the
  // batch in one chunk of images per thread.
  plan.privatize_batch_copies =
      p.n >= plan.threads &&
      (plan.channels_last_copies || plan.transposed_out_backprop ||
       plan.channels_first_out_backprop_copy || plan.deinterleave_multiplier ||
       plan.widen_depthwise_operands);
  return p;
}

}  // namespace convjit::cpu
