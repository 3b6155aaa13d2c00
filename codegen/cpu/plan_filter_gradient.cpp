// The CPU plan's filter-gradient decisions: how the reduction over (n, oh, ow) is blocked for
// the caches, how the threads share it (and where their partial sums live), and which copies
// of its operands the tiles read.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "codegen/cpu/plan_rules.hpp"

namespace convjit::cpu {
namespace {

// Taps that reach each pixel of x (and of dy) on average: how often a copy of either is read
// per element, the measure of what widening it once saves.
double taps_per_pixel(const ConvProblem& p) {
  return static_cast<double>(p.kh * p.kw * p.oh * p.ow) /
         static_cast<double>(std::max<std::int64_t>(p.ih * p.iw, 1));
}

// Share of L2 one chunk's x and dy rows may fill for the problem to count as fitting unblocked.
constexpr double kL2Share = 0.5;
// Share of L1 a chunk's working set for one column block may fill: its dy slice and a line of
// x per pixel. Measured on the benchmark suite: chunks of a half or a quarter of L1 ran
// 10-25% slower than a fifth (the tiles' dW lines and the next tap's x rows need the rest).
constexpr double kL1Share = 0.2;
// Share of a chunk's FMA time that reloading and storing back each tile's accumulators may
// take: chunks give every tile enough reduce points to keep the reloads below it.
constexpr double kReloadShare = 0.1;
// ... where dW is in L2, unless the chunk that fits L1's share keeps them below this share
// already: growing it past L1 then streams x and dy from L2 for little (56-wide layers: one
// row ran 4-7% faster than the two rows kReloadShare asks for; 14-wide ones, whose L1 chunk of
// two rows spends about 40% of its time on reloads, ran 30% faster grown to seven). dW in L3
// or memory keeps the chunks its reloads ask for (kBeyondL2ReloadShare; 112-wide 3x3 layers
// of 128 channels ran 3-5% slower on the one-row L1 chunks).
constexpr double kL1ChunkReloadShare = 0.2;
// The reload share where dW is beyond L2: half of kReloadShare, since there a chunk's reloads
// cost about twice the latency and transfer min_chunk_points counts (each tile's stores send
// its lines back out of L2 while the next tile's loads wait behind them). Paired on Zen 4
// (f32, two threads, the 19 networks.txt filter gradients whose chunks this grows, 6 pairs
// each): 1.055x in geometric mean, every one faster: ResNet-50's 7x7 3x3 512 1.16x, VGG16's
// 14x14 512 1.20x, ConvNeXt's 2x2/2 192 -> 384 1.14x, UNet's 32x32 512 1.06x. A quarter of
// kReloadShare gained nothing more (1.00x).
constexpr double kBeyondL2ReloadShare = 0.05;
// Share of L1 a chunk's working set for one column block may fill at most where the chunk
// grows for the reloads (dW beyond L2): its dy slice and the x lines its tiles broadcast from
// are reread by every row block, and past L1 every tile streams them from L2. On the Zen 3 host
// (32 KiB L1, r3x32 tiles: 192 bytes a point), ResNet-50's 7x7 1x1 filter gradients of 2048
// <-> 512 channels in chunks of 4 images (196 points, 37 KB) ran 6% (one thread) and 13% (two)
// slower than in chunks of 2 (98 points, 19 KB).
constexpr double kGrownChunkL1Share = 0.75;

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0);
}

// The fewest output rows any filter row (tap kh) reaches with its taps inside x, over the taps
// that reach some: what each thread's share of every tile's rows is cut from.
std::int64_t fewest_tap_rows(const ConvProblem& p) {
  std::int64_t fewest = INT64_MAX;
  for (std::int64_t kh = 0; kh < p.kh; ++kh) {
    // 0 <= oh*sh + kh*dh - pad_top < ih
    const std::int64_t offset = kh * p.dilation_h - p.pad_top;
    const std::int64_t lo = std::max<std::int64_t>(0, -floor_div(offset, p.stride_h));
    const std::int64_t hi = std::min(p.oh, floor_div(p.ih - 1 - offset, p.stride_h) + 1);
    if (hi > lo) fewest = std::min(fewest, hi - lo);
  }
  return fewest;
}

// Bytes of x and dy one chunk of `rows` output rows of one image touches.
double chunk_bytes(const ConvProblem& p, std::int64_t rows) {
  const double eb = dtype_size(p.dtype);
  const double x_rows = static_cast<double>(std::min(p.ih, (rows - 1) * p.stride_h + p.kh_eff()));
  return eb * (x_rows * static_cast<double>(p.iw * p.ic) + static_cast<double>(rows * p.ow * p.oc));
}

// Bytes of a chunk one column block of `tile_cols` rereads per reduce point: its slice of
// the dy pixel and the line of x the tile rows broadcast from.
std::int64_t column_block_point_bytes(const ConvProblem& p, std::int64_t tile_cols) {
  return tile_cols * dtype_size(p.dtype) + CpuInfo::kCacheLineBytes;
}

// The reduce points whose column block's bytes fit within `share` of L1.
std::int64_t points_within_l1_share(const ConvProblem& p, const CpuInfo& cpu,
                                    std::int64_t tile_cols, double share) {
  return static_cast<std::int64_t>(share * static_cast<double>(cpu.l1_bytes)) /
         column_block_point_bytes(p, tile_cols);
}

// The most reduce points a chunk grown for the reloads may hold.
std::int64_t grown_chunk_points(const ConvProblem& p, const CpuInfo& cpu, std::int64_t tile_cols) {
  return points_within_l1_share(p, cpu, tile_cols, kGrownChunkL1Share);
}

// The register tile the chunk rules model: input channels as rows, output channels as
// vectors, over the whole reduction.
TileShape modelled_tile(const ConvProblem& p, const CpuPlan& plan) {
  return plan.tiles.choose(TileForm::kOuterProduct, p.filter_in, p.oc, p.n * p.oh * p.ow);
}

// Whether L2 alone feeds the tiles of `p`'s f32 or f64 vector schedule: a column block's tile
// reads its slice of a dy pixel and a line of x per reduce point (column_block_point_bytes),
// and where those bytes take no more than half the rate at which L2 fills L1 in the tile's FMA
// cycles, its L1 misses hide under the FMAs. 64 bytes a cycle (Intel, Zen 5) feed AVX-512's
// r6x64 tile (320 bytes in 12 cycles) and AVX2's r3x32 (192 in 6); 32 (Zen 1-4) feed neither
// at two FMAs a cycle, but do feed Zen 4's r6x64 at one zmm FMA a cycle (320 in 24).
bool l2_feeds_the_tiles(const ConvProblem& p, const CpuPlan& plan) {
  constexpr double kL2FillShare = 0.5;
  if (ir::accumulator_dtype(p.dtype) != p.dtype || plan.input_pairs_by_channel ||
      plan.cpu.vector_bytes == 0) {
    return false;
  }
  const TileShape tile = modelled_tile(p, plan);
  const double bytes_per_cycle = static_cast<double>(column_block_point_bytes(p, tile.cols)) /
                                 plan.tiles.cycles_per_reduce_point(tile);
  return bytes_per_cycle <= kL2FillShare * plan.cpu.l2_fill_bytes_per_cycle;
}

// Row blocks of AMX tiles that must reread a column block's dy slice for the cap to pay.
constexpr std::int64_t kAmxCappedRowBlocks = 8;

// Whether that cap applies: to tiles reading the problem's own type (f32, f64) where L2 cannot
// feed them (l2_feeds_the_tiles; where it can, what a chunk grown past L1 streams from L2 hides
// under the FMAs, and the chunk takes the points the reloads ask for), and to AMX's
// (input_pairs_by_channel) where the row blocks reread a column block's dy slice often enough:
// their tile groups consume a point every 2-4 cycles, too fast for L2 to feed both operands.
// Uncapped chunks, paired against the capped ones on Zen 4 (every networks.txt filter gradient
// whose kernel changed): f32 on two threads 1.05x in geometric mean over 16 layers
// (0.98-1.22x; ResNet-50's 7x7 3x3 layers 1.16-1.22x in chunks of 4 images, not 1, its 7x7
// 1x1 layers 1.05-1.07x), one thread 1.06x over 18 (0.98-1.26x), f64 on two threads 1.12x
// over 20 (0.90x for vgg16's 56x56 3x3 layer in chunks of two rows, 1.57x for r50's 7x7 3x3);
// shapes.txt's three 1.07x. On Zen 5 and the Xeon, where L2 fills L1 at 64 bytes a cycle, 14
// layers had measured 1.02x (0.97-1.08x). The cap was measured where L2 does not feed the
// tiles (Zen 3's AVX2 tiles, below), and stays there: Zen 4's AVX2 tiles (two ymm FMAs a
// cycle, r3x32's 192 bytes a point in 6 cycles) ran 0.95x uncapped over 13 layers (0.78-1.02x,
// two threads, paired).
// Measured on the Xeon, two threads: vgg16's 4x56x56x256 3x3 filter gradient ran 745 GFLOP/s
// in chunks of 29 rows and 1113 capped (5 rows), unet's 2x64x64x256 745 -> 1159; with 64 or
// 128 input channels (2-4 row blocks of 32) the capped chunks' reloads cost more than L1
// saved (r50's 8x56x56x64 1290 -> 1008, vgg16's 4x112x112x128 1370 -> 1255). The other 16-bit
// tiles read widened or paired copies whose chunks were measured as they are.
bool grown_chunks_capped(const ConvProblem& p, const CpuPlan& plan) {
  if (ir::accumulator_dtype(p.dtype) == p.dtype) return !l2_feeds_the_tiles(p, plan);
  if (!plan.input_pairs_by_channel) return false;
  return p.filter_in >= kAmxCappedRowBlocks * modelled_tile(p, plan).rows;
}

// Where dy's pairs are padded (plan_reduction), AMX's column tiles stream them from L2 without
// crowding L1's sets, and where the f32 partial sums outgrow L2 the L1 cap above cost more in
// their reloads (a tile's 4 KiB per chunk, from L3) than it saved: vgg16's 4x56x56x256 3x3
// filter gradient ran 1.09-1.10 TFLOP/s in its capped chunks of 5 rows, 1.21-1.25 in 10-14,
// 0.92 in the 29 rows min_chunk_points asks for, whose pair of images left L2. So there the
// chunks grow towards those points while both images of a pair stay within L2's share (paired
// on two Xeon threads: vgg16 56x56x256 1.15x, unet 128x128 256->128 1.22x, unet 64x64x256
// 1.05x, deeplab's dilated 33x33x256 1.01-1.03x). With the partial sums in L2 the reloads are
// cheap and the L1 cap stays (r50's 28x28 1x1 512->128 lost 4% in chunks of 14 rows, not 10).
bool chunks_capped_by_l2(const ConvProblem& p, const CpuPlan& plan) {
  return grown_chunks_capped(p, plan) && plan.input_pairs_by_channel && plan.y_pixel_padding > 0;
}

// The largest divisor of n, oh or ow not above the thread count (exact chunks keep the tiles
// guard-free), preferring the later dims on ties.
bool pick_split(const ConvProblem& p, int threads, int* dim, std::int64_t* chunks) {
  const std::int64_t extents[3] = {p.n, p.oh, p.ow};
  *chunks = 1;
  for (int d = 0; d < 3; ++d) {
    for (std::int64_t s = std::min<std::int64_t>(threads, extents[d]); s > *chunks; --s) {
      if (extents[d] % s == 0) {
        *chunks = s;
        *dim = d;
        break;
      }
    }
  }
  return *chunks > 1;
}

}  // namespace

namespace {

// Bytes of dW in the accumulation type (the partial sums the tiles reload per chunk).
double accumulated_dw_bytes(const ConvProblem& p) {
  const auto acc_bytes = static_cast<double>(dtype_size(ir::accumulator_dtype(p.dtype)));
  return static_cast<double>(p.kh * p.kw * p.filter_in * p.oc) * acc_bytes;
}

}  // namespace

std::int64_t min_chunk_points(const ConvProblem& p, const CpuPlan& plan, bool grown_past_l1) {
  const CpuInfo& cpu = plan.cpu;
  if (cpu.vector_bytes == 0) return 1;
  const double dw_bytes = accumulated_dw_bytes(p);
  // Reloads from L1 hide behind the previous tile's FMAs (the core runs ahead that far). dW
  // in L2 is reloaded from there, beyond L2 revisited in L3, or in memory once it outgrows the
  // core's share of L3. L2 counts too: a 1x1 filter gradient of 256 -> 1024 channels on 14x14
  // images (each thread's 512 KB slice of dW in L2) ran 2-row chunks of 28 points at 57% of
  // the FMA peak, 7-row chunks at 73% (f32 332 -> 425 GFLOP/s on two Zen 5 threads; bf16 +10%).
  const bool in_l2 = dw_bytes <= kL2Share * static_cast<double>(cpu.l2_bytes);
  // Not for depthwise-like filters (one input channel per group): their lane-wise tiles pass
  // over the chunk's pixels once per tap, so the chunk must stay in L1 across the taps, and
  // the few accumulators of a tile reload from L2 cheaply (grown past L1, mv2_dw_28_c192's
  // filter gradient fell from 152 to 82 GFLOP/s).
  if (in_l2 && p.filter_in == 1 && p.groups > 1) return 1;
  const bool in_llc = dw_bytes <= static_cast<double>(cpu.llc_bytes);
  const double latency = in_l2    ? CpuInfo::kL2LatencyCycles
                         : in_llc ? CpuInfo::kL3LatencyCycles
                                  : CpuInfo::kMemoryLatencyCycles;
  const double bandwidth = in_l2    ? CpuInfo::kL2BytesPerCycle
                           : in_llc ? CpuInfo::kL3BytesPerCycle
                                    : CpuInfo::kMemoryBytesPerCycle;
  // A tile of A accumulator vectors waits one latency and moves 2A vectors per chunk, against
  // A FMAs per reduce point.
  const TileShape tile = modelled_tile(p, plan);
  const double accumulators = static_cast<double>(
      tile.rows * ((tile.cols + plan.tiles.lanes() - 1) / plan.tiles.lanes()));
  const double reload = latency + 2.0 * accumulators * cpu.vector_bytes / bandwidth;
  const double fma_cycles_per_point = plan.tiles.cycles_per_reduce_point(tile);
  // A chunk grown past L1 where L2 feeds the tiles (l2_feeds_the_tiles) streams a column
  // block's lines from L2 under the FMAs: only its reloads weigh against its size, so it takes
  // the share of dW beyond L2. Paired on Zen 4 against kReloadShare (the eight f32 filter
  // gradients of both suites whose chunks grow, mostly 1x1 layers on 56x56 and 28x28 images
  // from one row to two or two to four; 6-8 pairs each): two threads 1.02x in geometric mean
  // (1.01-1.05x, ResNet-50's 14x14 1024 -> 256 in 7 rows, not 4, 1.01x), one thread 1.01x
  // (0.99-1.02x); their f64 kernels 1.00x (0.98-1.02x).
  const bool only_reloads_weigh = grown_past_l1 && l2_feeds_the_tiles(p, plan);
  const double share = in_l2 && !only_reloads_weigh ? kReloadShare : kBeyondL2ReloadShare;
  return static_cast<std::int64_t>(std::ceil(reload / (share * fma_cycles_per_point)));
}

namespace {

// Whether f32 or f64 tiles read x or dy in place at a pixel stride that crowds a few of L1's
// sets (pixel_padding: the padded copies were not made, padded_copies_pay): such an operand's
// lines leave L1 before the next row block's tiles come back to them, however few points the
// chunk holds, so a chunk kept within L1's share saves no L2 reads and only reloads dW more
// often. Paired on Zen 4 (one-row chunks against the reloads' two; f32, 12 pairs, two threads):
// ResNet-50's 1x1 256 -> 512 at stride 2 on 56x56 images (x's pixels 2 KiB apart) 1.08-1.13x,
// 512 -> 128 on 28x28 1.02x (one thread 1.05x and 1.03x; f64 1.03x); shapes.txt's
// resnet_1x1_s2 1.09x. No other kernel of either suite changed on that host.
bool tiles_read_crowded_sets(const ConvProblem& p, const CpuPlan& plan) {
  if (p.format != DataFormat::kNHWC || p.depthwise || plan.batch_copies != BatchCopies::kNone ||
      ir::accumulator_dtype(p.dtype) != p.dtype) {
    return false;
  }
  // The tensors' pixel strides are the whole problem's, also where `p` is one slice of it.
  const std::int64_t eb = dtype_size(p.dtype);
  return pixel_padding(plan.problem.ic, eb, p.stride_w) > 0 ||
         pixel_padding(plan.problem.oc, eb, 1) > 0;
}

}  // namespace

std::int64_t reduction_chunk_rows(const ConvProblem& p, const CpuPlan& plan,
                                  std::int64_t tile_cols) {
  const CpuInfo& cpu = plan.cpu;
  if (tile_cols <= 1) {
    // Scalar-column tiles (NCHW, where both operands run along W) read whole rows: as many
    // as keep the chunk's x and dy rows within a share of L2.
    const double budget = kL2Share * static_cast<double>(cpu.l2_bytes);
    std::int64_t rows = std::max<std::int64_t>(p.oh, 1);
    while (rows > 1 && chunk_bytes(p, rows) > budget) --rows;
    return rows;
  }
  // Vector columns: with the column blocks outside the row blocks, the tiles of one column
  // block reuse that block's slice of the chunk's dy rows and the x lines of their pixels, so
  // as many rows as keep those within a share of L1: each tile then streams from L1, not L2.
  // But at least the points that keep reloading the accumulators per chunk cheap.
  const std::int64_t ow = std::max<std::int64_t>(p.ow, 1);
  const std::int64_t pixels = points_within_l1_share(p, cpu, tile_cols, kL1Share);
  const std::int64_t l1_rows = std::max<std::int64_t>(pixels / ow, 1);
  const std::int64_t wanted = min_chunk_points(p, plan);
  const bool dw_in_l2 =
      accumulated_dw_bytes(p) <= kL2Share * static_cast<double>(cpu.l2_bytes);
  const bool l1_chunk_will_do =
      dw_in_l2 && !tiles_read_crowded_sets(p, plan) &&
      static_cast<double>(l1_rows * ow) >=
          kReloadShare / kL1ChunkReloadShare * static_cast<double>(wanted);
  const std::int64_t grown_wanted = min_chunk_points(p, plan, /*grown_past_l1=*/true);
  std::int64_t rows = l1_chunk_will_do ? l1_rows : std::max(l1_rows, (grown_wanted + ow - 1) / ow);
  std::int64_t cap = std::max(l1_rows, grown_chunk_points(p, cpu, tile_cols) / ow);
  if (chunks_capped_by_l2(p, plan) && !dw_in_l2) {
    const std::int64_t l1_cap = cap;
    cap = std::max<std::int64_t>(p.oh, 1);
    while (cap > l1_cap &&
           2.0 * chunk_bytes(p, cap) > kL2Share * static_cast<double>(cpu.l2_bytes)) {
      --cap;
    }
  }
  if (grown_chunks_capped(p, plan) && rows > cap) {
    // Chunks of equal rows: a short last chunk would reload every tile for a few rows.
    const std::int64_t oh = std::max<std::int64_t>(p.oh, 1);
    const std::int64_t chunks = (oh + cap - 1) / cap;
    rows = (oh + chunks - 1) / chunks;
  }
  return std::clamp<std::int64_t>(rows, 1, std::max<std::int64_t>(p.oh, 1));
}

namespace {

// The fewest images of `per_thread` (a divisor of it) whose points reach min_chunk_points,
// but no more than keep a column block's slice of the chunk in L1 (grown_chunk_points).
std::int64_t images_per_chunk(const ConvProblem& p, const CpuPlan& plan, std::int64_t per_thread) {
  const std::int64_t points = std::max<std::int64_t>(p.oh * p.ow, 1);
  const std::int64_t wanted = min_chunk_points(p, plan);
  std::int64_t images = per_thread;
  for (std::int64_t g = 1; g < per_thread; ++g) {
    if (per_thread % g == 0 && g * points >= wanted) {
      images = g;
      break;
    }
  }
  if (!grown_chunks_capped(p, plan) || plan.cpu.vector_bytes == 0) return images;
  const std::int64_t cap = grown_chunk_points(p, plan.cpu, modelled_tile(p, plan).cols);
  while (images > 1 && images * points > cap) {
    do --images;
    while (per_thread % images != 0);
  }
  return images;
}

// Bytes of `images` images of x and dy as interleaved pair copies (and where x's pairs go by
// channel, the one pair of x staged on its way).
std::int64_t pair_copy_bytes(const ConvProblem& whole, const CpuPlan& plan, std::int64_t images) {
  const std::int64_t x_image = whole.ih * whole.iw * whole.ic;
  const std::int64_t staged = plan.input_pairs_by_channel ? 2 * x_image : 0;
  return (images * (x_image + whole.oh * whole.ow * whole.oc) + staged) * dtype_size(whole.dtype);
}

// Whether a bfloat16 filter gradient's image pairs are all copied before the tiles, which then
// reduce over every pair of the thread's images with dW in registers, instead of one pair per
// chunk. A chunk of one pair gives each tile oh*ow dot-product steps (each the work of two
// points); where those are fewer than min_chunk_points (dW outgrows L2, the images are small),
// every pair reloads and stores the f32 partial sums of all of dW. Measured on Zen 5, two
// threads: 3x3 from 512 channels to 512 on 8x7x7 images (9.4 MB of partial sums per pair,
// 0.8 MB of copies) 408 -> 1186 GFLOP/s, on 4x14x14 600 -> 1000-1080. The copies (of
// `whole`'s images, also for a slice of it) are bounded by the f32 size of dW, so scratch
// grows with the filter, not the batch; they need an even number of images per thread.
bool unblocked_pairs_pay(const ConvProblem& p, const ConvProblem& whole, const CpuPlan& plan) {
  const std::int64_t per_thread = p.n / std::max(plan.threads, 1);
  const std::int64_t dw_bytes = whole.kh * whole.kw * whole.filter_in * whole.oc *
                                dtype_size(ir::accumulator_dtype(whole.dtype));
  return per_thread >= 2 && per_thread % 2 == 0 && p.oh * p.ow < min_chunk_points(p, plan) &&
         pair_copy_bytes(whole, plan, per_thread) <= dw_bytes;
}

// Tiles that reduce over all of a thread's images (no chunks) read one operand's slice for a
// whole block of the other's: with the column blocks (output channels) outside the row blocks
// (input channels) every column block rereads all of x, the other way round every row block
// rereads all of dy. The bytes reread are the same either way (blocks of one operand times the
// other's size, both proportional to ic x oc), but the smaller operand is the one that stays in
// L2 between its passes, so that is the one to reread. A thread's slice of output channels
// holds half of dy beside all of x: a 3x3 bfloat16 filter gradient of 512 channels on two
// 32x32 images (2 MB of x's pairs, 1 MB of each slice's dy) ran 778 GFLOP/s rereading x from
// L3, 1091 rereading dy from L2 (AMX, two Xeon threads).
bool reread_out_backprop(const ConvProblem& p) {
  const std::int64_t x = p.n * p.ih * p.iw * p.ic;
  const std::int64_t dy = p.n * p.oh * p.ow * p.oc;
  return dy < x;
}

}  // namespace

// An L1 set holds the lines whose addresses agree modulo the way's span, which is 4 KiB on
// every x86 core (the page size a virtually indexed L1 is built around). A filter gradient's
// tiles read x and dy at consecutive reduce points a pixel (times the stride, for x) apart:
// 1 KiB for 256 float channels, so each column's lines fall in 4 of the 64 sets and a chunk
// of 56 points cannot stay in L1 for the next rows' tiles. Padding each pixel by a line moves
// the lines apart (dy of a 1x1 filter gradient from 256 to 1024 channels on 14x14 images, one
// Zen 3 thread: 46 GFLOP/s at 1024 channels, 65 at 1040). Pixels are padded until their reads
// reach at least kMinSetSpread distinct line positions: 16 sets of 8 ways keep 128 points.
// Where no padding of fewer lines than a way holds helps (a stride that is itself a multiple
// of the way's span), none is added.
std::int64_t pixel_padding(std::int64_t channels, std::int64_t bytes, std::int64_t step) {
  constexpr std::int64_t kWaySpan = 4096, kMinSetSpread = 16;
  const std::int64_t line = CpuInfo::kCacheLineBytes / bytes;
  const std::int64_t step_in_way = step % kWaySpan;  // the rest of the step changes no set
  auto spread = [&](std::int64_t elements) {
    return kWaySpan / std::gcd(step_in_way * (elements % kWaySpan) * bytes, kWaySpan);
  };
  for (std::int64_t pad = 0; pad < kWaySpan / CpuInfo::kCacheLineBytes; ++pad) {
    if (spread(channels + pad * line) >= kMinSetSpread) return pad * line;
  }
  return 0;
}

// Whether f32 and f64 images are copied with padded pixels (pixel_padding) at all. Each copy
// is a pass of its own over the operand: read from L3 or memory with the FMAs idle, written to
// L2 and read back. It pays where the tiles reread a chunk's lines many times: the copies of
// whole images stay in L2 across every chunk and column block, and a 3x3 filter's taps read
// each element nine times. Where an image outgrows the copies' budget (half the L2, as
// copy_budget_bytes) they are made per row chunk, each read by one chunk's tiles, and at a 1x1
// filter's one tap per element what the padding saves is that chunk's L1 misses: where L2
// feeds the tiles (l2_feeds_the_tiles) the copies go. Measured on the Xeon (f32, two threads,
// paired against the copies): r50's 56x56 1x1 filter gradients 64 -> 256 1.12x, 256 -> 64
// 1.14x, 256 -> 512 at stride 2 1.15x, 28x28 512 -> 128 1.06x, ConvNeXt's 56x56 96 -> 384
// 1.12x, three layers in no suite 1.06-1.18x; AVX2 code 0.97-1.10x. Zen 3 (32 bytes a cycle),
// where the padded copy of r50's 64 -> 256 dy had measured 1.23x against the tiles reading dy
// itself, keeps it.
// With whole images in the budget the copies stay everywhere (the Xeon's 14x14 layers
// 0.91-0.98x without them, 7x7 0.80-0.94x), as on 2x2 and 3x3 filters (unet 128x128 2x2/2
// up-convolution 0.83x without).
bool padded_copies_pay(const ConvProblem& p, const ConvProblem& whole, const CpuPlan& plan) {
  if (p.kh * p.kw > 1) return true;
  const std::int64_t eb = dtype_size(ir::accumulator_dtype(p.dtype));
  // A slice's copies hold its channels of each pixel (copy_batch_operands.cpp).
  const auto x_image = static_cast<double>(whole.ih * whole.iw * p.ic * eb);
  const auto dy_image = static_cast<double>(p.oh * p.ow * p.oc * eb);
  if (std::max(x_image, dy_image) <= kL2Share * static_cast<double>(plan.cpu.l2_bytes)) {
    return true;
  }
  return !l2_feeds_the_tiles(p, plan);
}

// Broadcasts per x element at which its widened copy pays: f16 resnet_3x3_s1 71 -> 51 ms on
// one AVX2 thread, bf16 54 -> 51; resnet_1x1's x, broadcast twice per element, stays.
bool widening_input_pays(const ConvProblem& p, std::int64_t tile_cols) {
  constexpr double kMinBroadcasts = 4.0;
  const double fmas_per_element = taps_per_pixel(p) * static_cast<double>(p.oc);
  return fmas_per_element >= kMinBroadcasts * static_cast<double>(tile_cols);
}

namespace {

// Taps per element of x (and of dy) at which a 16-bit depthwise filter gradient's widened
// copies pay. Its tiles multiply a vector of x by one of dy, lane by lane, so every FMA widens
// the two vectors it loads (on Intel's cores each widening's shuffle takes the port of one of
// the two FMA pipes); on f32 copies each element is widened once, and the copies cost a pass
// writing and rereading twice the images' bytes. Measured on the AMX Xeon, bfloat16, two
// threads, both builds alternating (networks.txt's depthwise layers): 5x5 (25 taps an
// element) 1.30-1.64x, 7x7 (49) 1.09-1.50x; 3x3 (9) 0.85-0.99x, 3x3/2 (2.25) 0.68x, 5x5/2
// (6.25) 0.98x.
bool depthwise_widening_pays(const ConvProblem& p) {
  constexpr double kMinTapsPerElement = 16;
  return taps_per_pixel(p) >= kMinTapsPerElement;
}

// How the threads share a filter gradient: slices of dW, or the reduction. Threads that share
// the reduction each keep partial sums of all of dW: zeroed, accumulated and added up at the
// end, about 2T+1 copies of dW through memory. Threads that own a slice of dW's channels each
// read all of the operand that is not sliced (x for output-channel slices, dy for input-channel
// ones): T-1 extra reads of it. Slices win where dW outweighs the activations (deep layers,
// few pixels and many channels), and wherever the batch leaves the reduction nothing to split.
// Output-channel slices keep whole vectors; returns whether slices were chosen.
//
// An output-channel slice owns a 1/T share of every row of dW's output channels, at the same
// offset in each. Where that share is narrower than a page, it sits in the same part of every
// page it touches, so the address bits inside the page that pick a cache set are partly fixed
// (those above come from the physical page): the thread's dW uses part of L2's sets, and where
// its slice needs more than its share of L2 it spills to L3 every chunk. Input-channel slices
// are whole [kh][kw] blocks of rows, spread over every set. Measured on the AMX Xeon, f32, two
// threads, both builds alternating, 3x3 layers: ResNet-50's 8x14x14 256 -> 256 302 -> 378
// GFLOP/s with input-channel slices, UNet's 2x64x64 256 -> 256 261 -> 322, VGG16's 4x14x14
// 512 -> 512 288 -> 324 (x and dy the same size, so both slices read as much); layers not in
// the suites 0.99-1.44x; AVX2 code 1.03-1.15x, f64 1.08-1.12x. A page-wide row halves the same
// way. Zen 4, two threads, both builds alternating: ResNet-50's 1x1 256 -> 1024 (f32, 4 KiB
// rows) 1.10-1.24x, AVX2 code 1.01x, with the threads splitting the reduction instead (input-
// channel slices would each read all of its large dy: 0.87-0.96x); f64's 512-channel 3x3
// layers 1.01-1.02x; outside the suites, f64's 7x7 3x3 768 -> 768 1.12x and f32's 14x14 1x1
// 384 -> 1536 (6 KiB rows) 1.02x. 8 KiB rows' halves are whole pages (1x1 2048 <- 512 the same
// either way). Rows whose size is not a power of two start their slices at more offsets of a
// page, yet their input-channel slices were faster too (Zen 4, f32, 3x3 layers of 192 to
// 768 channels: output-channel slices 0.67-1.00x). Only where the tiles accumulate into dW
// itself: 16-bit gradients add f32 partial sums up in a scratch (widened f16 ran within 2%
// either way), and the AMX tiles' per-thread copies of x by channel change with the slice too
// (3x3 layers 0.77-1.24x, unexplained).
constexpr std::int64_t kPageBytes = 4096;

bool choose_output_slices(const ConvProblem& p, CpuPlan& plan) {
  const std::int64_t threads = plan.threads;
  if (threads <= 1 || p.groups != 1 || p.depthwise) return false;
  const auto eb = static_cast<double>(dtype_size(p.dtype));
  const auto acc_bytes = static_cast<double>(dtype_size(ir::accumulator_dtype(p.dtype)));
  const double dw = accumulated_dw_bytes(p);
  const double x = static_cast<double>(p.n * p.ih * p.iw * p.ic) * eb;
  const double dy = static_cast<double>(p.n * p.oh * p.ow * p.oc) * eb;
  const double t = static_cast<double>(threads);
  const bool by_oc = p.oc % threads == 0 && (p.oc / threads) % plan.tiles.lanes() == 0;
  const bool by_ic = p.ic % threads == 0;
  if (!by_oc && !by_ic) return false;
  const double dw_row = static_cast<double>(p.oc) * acc_bytes;
  const bool oc_slices_share_sets = ir::accumulator_dtype(p.dtype) == p.dtype &&
                                    dw_row < t * static_cast<double>(kPageBytes) &&
                                    dw > kL2Share * static_cast<double>(plan.cpu.l2_bytes);
  const bool input_channels = !by_oc || (by_ic && (dy < x || oc_slices_share_sets));
  const double sliced = (t - 1) * (input_channels ? dy : x);
  const bool reduction_splits = p.n % threads == 0 || fewest_tap_rows(p) >= threads;
  if (reduction_splits && sliced >= (2 * t + 1) * dw) return false;
  plan.output_slices = threads;
  plan.slices_of_input_channels = input_channels;
  return true;
}

}  // namespace

ConvProblem output_slice_problem(const ConvProblem& problem, const CpuPlan& plan) {
  ConvProblem slice = problem;
  if (plan.slices_of_input_channels) {
    slice.ic = problem.ic / plan.output_slices;
    slice.filter_in = slice.ic;
  } else {
    slice.oc = problem.oc / plan.output_slices;
  }
  return slice;
}

namespace {

// The decisions below the threads' sharing, for `p` (the whole problem, or one output slice of
// `whole` on one thread: a slice's copies still hold whole images of x and dy).
void plan_reduction(const ConvProblem& p, const ConvProblem& whole, CpuPlan& plan) {
  const CpuInfo& cpu = plan.cpu;
  const int threads = plan.threads;
  const bool half = ir::accumulator_dtype(p.dtype) != p.dtype;
  // NCHW: dy copied channels-last once per call so the tiles' column vectors (output channels)
  // are contiguous. One output channel has nothing to put in a vector; fewer than the lanes
  // still gain from a masked vector, as NHWC does (small_odd, 7 channels on AVX2: 21.4 ->
  // 5.9 us, as NHWC).
  plan.channels_last_out_backprop = p.format == DataFormat::kNCHW && p.groups == 1 &&
                                    !p.depthwise && cpu.vector_registers > 0 && p.oc >= 2;
  // NHWC depthwise with a multiplier: vectors along the channels over a de-interleaved copy of
  // each image's dy, the multiplier's outputs as the tiles' rows, where the tiles would
  // otherwise take the multiplier's few lanes as their vectors (deinterleave_multiplier.cpp).
  // shapes.txt's dw_5x5_mult2 (5x5, 32 channels times 2, 4x32x32 images) on Zen 4, two
  // threads: 6.7 -> 45 GFLOP/s in float32 (TensorFlow 11.9, oneDNN 4.4), AVX2 code 41.
  plan.deinterleave_multiplier = p.format == DataFormat::kNHWC && !plan.channels_last_copies &&
                                 p.depthwise && p.groups > 1 && p.oc_per_group() > 1 &&
                                 cpu.vector_registers > 0;

  // NHWC: image pairs for vdpbf16ps; or 16-bit images widened to f32 once; or f32 and f64
  // images copied with padded pixels where the tensors' pixels crowd the L1's sets.
  if (p.format == DataFormat::kNHWC && !p.depthwise && cpu.vector_registers > 0) {
    const std::int64_t eb = dtype_size(ir::accumulator_dtype(p.dtype));
    plan.x_pixel_padding = pixel_padding(whole.ic, eb, p.stride_w);
    plan.y_pixel_padding = pixel_padding(whole.oc, eb, 1);
    if ((cpu.uses_bf16_dot() && p.dtype == DType::kBFloat16) || plan.input_pairs_by_channel) {
      plan.batch_copies = BatchCopies::kPairs;
      // The chunk rules below weigh reloads against the tiles' time per reduce point, which
      // vdpbf16ps halves (TileModel::bf16_dot); AMX's model is already in place.
      if (!plan.input_pairs_by_channel) plan.tiles = TileModel::bf16_dot(cpu);
    } else if (widens_to_f32(p.dtype, cpu)) {
      plan.batch_copies = BatchCopies::kWiden;
    } else if ((plan.x_pixel_padding > 0 || plan.y_pixel_padding > 0) &&
               padded_copies_pay(p, whole, plan)) {
      plan.batch_copies = BatchCopies::kRestride;
    }
    // AMX's pairs of dy are padded too: a column tile's 16 rows are 16 consecutive pixels of
    // dyq, 4*C bytes apart, which at 512 channels put all 16 in two L1 sets. A 3x3 filter
    // gradient of 512 channels on two 32x32 images (each thread's dy reread from L2) ran 1.5x
    // faster (paired, two Xeon threads; 1x1 and 3x3 layers of 512-2048 output channels
    // 1.05-1.13x, 128-256 channels within the noise). x's copy by channel has its own padding
    // (copy_batch_operands.cpp); vdpbf16ps' pairs (no AMX) are unmeasured and stay unpadded.
    const bool padded_pairs =
        plan.batch_copies == BatchCopies::kPairs && plan.input_pairs_by_channel;
    if (plan.batch_copies != BatchCopies::kWiden && plan.batch_copies != BatchCopies::kRestride) {
      plan.x_pixel_padding = 0;
      if (!padded_pairs) plan.y_pixel_padding = 0;
    }
  }
  // 16-bit depthwise (NHWC): x and dy widened to f32 once per image as well, where each
  // element is used by enough taps (depthwise_widening_pays). Not with a depth multiplier,
  // whose tiles run the multiplier's lanes (shapes.txt's dw_5x5_mult2: bfloat16 1.07x, half
  // 0.91x).
  if (p.format == DataFormat::kNHWC && p.depthwise && p.oc_per_group() == 1 && half &&
      !plan.channels_last_copies && cpu.vector_registers > 0 && depthwise_widening_pays(p)) {
    plan.batch_copies = BatchCopies::kWiden;
  }

  // The batch does not divide among the threads: each thread takes a share of every tile's
  // rows instead (while every tile has a row for each thread), into its own partial sums. So
  // also where image pairs would form over the batch but not over each thread's share of it
  // (UNet's batch of 2 on two threads: one image each, the f32 FMAs on widened copies).
  const bool pairs_span_threads = plan.batch_copies == BatchCopies::kPairs && p.n % 2 == 0 &&
                                  (p.n / threads) % 2 != 0;
  if (p.n % threads != 0 || (pairs_span_threads && fewest_tap_rows(p) >= threads)) {
    plan.columns_outside_rows = true;
    if (fewest_tap_rows(p) >= threads) {
      plan.reduction_blocking = ReductionBlocking::kRowSplit;
      plan.reduction_split = ReductionSplit::kRowThreads;
    }
  } else {
    // Everything fits in half the L2 already: blocking would only add parts. With the NCHW
    // per-call copy of dy, whole images are the chunks so the copy can follow the images; not
    // for half types, which that form would round into dW per image. The depthwise copies of
    // x and dy, and a depth multiplier's de-interleaved dy, likewise, for every type (their
    // tiles accumulate in f32 partial sums).
    const bool fits = static_cast<double>(p.n) * chunk_bytes(p, p.oh) <=
                      kL2Share * static_cast<double>(cpu.l2_bytes);
    const bool copies_follow_images = (plan.channels_last_out_backprop && !half) ||
                                      plan.channels_last_copies || plan.deinterleave_multiplier;
    // vdpbf16ps' pairs: unblocked tiles pair an even number of images only, so an odd number
    // per thread (one image) is blocked as well, into row chunks, which pair with each other
    // (copy_batch_operands.cpp), where the image makes four chunks or more: the borders' chunks
    // pair with zeros (at the f32 rate), so fewer leave too little paired to pay for the
    // blocking's partial sums.
    constexpr std::int64_t kMinPairedChunks = 4;
    const bool odd_images = plan.batch_copies == BatchCopies::kPairs &&
                            !plan.input_pairs_by_channel && (p.n / threads) % 2 != 0;
    const std::int64_t chunk_rows =
        odd_images ? reduction_chunk_rows(p, plan, modelled_tile(p, plan).cols) : 1;
    const bool rows_pair = odd_images && (p.oh + chunk_rows - 1) / chunk_rows >= kMinPairedChunks;
    if (!fits || copies_follow_images || rows_pair) {
      plan.reduction_blocking = ReductionBlocking::kBatchChunks;
      plan.whole_image_chunks = fits && !rows_pair;
      plan.columns_outside_rows = true;
      // Images too small to give the tiles the points a chunk needs: chunks of several images
      // (the per-image operand copies want one image per chunk), and one chunk of them all is
      // no blocking at all, its columns still outside its rows (x and dy outgrow L2, so the
      // operand the row blocks reread is one column block's dy). Each thread's images are a
      // whole number of chunks. (Padded copies take a chunk's images together.)
      const bool per_image_copies =
          plan.channels_last_out_backprop || plan.channels_last_copies ||
          plan.deinterleave_multiplier ||
          (plan.batch_copies != BatchCopies::kNone && plan.batch_copies != BatchCopies::kRestride);
      if (!per_image_copies) {
        plan.chunk_images = images_per_chunk(p, plan, p.n / threads);
        if (plan.chunk_images == p.n) {
          plan.reduction_blocking = ReductionBlocking::kNone;
          plan.chunk_images = 1;
          plan.rereads_out_backprop = reread_out_backprop(p);
          plan.columns_outside_rows = !plan.rereads_out_backprop;
        }
      } else if (plan.batch_copies == BatchCopies::kPairs &&
                 unblocked_pairs_pay(p, whole, plan)) {
        plan.reduction_blocking = ReductionBlocking::kNone;
        plan.whole_image_chunks = false;
        plan.rereads_out_backprop = reread_out_backprop(p);
        plan.columns_outside_rows = !plan.rereads_out_backprop;
        plan.copy_budget_bytes = pair_copy_bytes(whole, plan, p.n / threads);
      }
    }
    if (threads > 1 && plan.reduction_blocking == ReductionBlocking::kBatchChunks) {
      plan.reduction_split = ReductionSplit::kBatch;
    }
  }
  if (threads > 1 && plan.reduction_split == ReductionSplit::kNone &&
      pick_split(p, threads, &plan.split_dim, &plan.split_chunks)) {
    plan.reduction_split = ReductionSplit::kDims;
  }
  // One thread: a blocked 16-bit dW accumulates once per chunk, so it accumulates into one f32
  // partial and is rounded once, as SEMANTICS.md requires.
  plan.partial_sums_for_rounding =
      threads <= 1 && half && plan.reduction_blocking == ReductionBlocking::kBatchChunks;

  plan.copy_budget_bytes = std::max(plan.copy_budget_bytes, cpu.l2_bytes / 2);
}

}  // namespace

namespace {

// Whether a bfloat16 filter gradient runs its image pairs on AMX (CpuInfo::has_amx_bf16):
// the tiles' rows are input channels and their reduction's innermost loop runs along a row of
// x, so x is copied by channel, its columns at unit stride: at a column stride above 1 each
// residue's columns of a row together, which takes rows of kPairsByChannelBlock pixels; and
// channels enough for the copy's blocks. Elsewhere (few channels, narrow strided rows, groups,
// depthwise) the tiles widen to f32, as on any core whose vdpbf16ps is slower than its FMAs.
bool pairs_images_on_amx(const ConvProblem& p, const CpuInfo& cpu) {
  return cpu.has_amx_bf16 && cpu.vector_registers > 0 && p.dtype == DType::kBFloat16 &&
         p.format == DataFormat::kNHWC && !p.depthwise && p.groups == 1 &&
         p.ic >= kPairsByChannelBlock && (p.stride_w == 1 || p.iw >= kPairsByChannelBlock);
}

}  // namespace

void plan_filter_gradient(const ConvProblem& problem, CpuPlan& plan) {
  // From here on the schedule sees the problem in the layout its tiles run in (an NCHW
  // depthwise problem as NHWC, on per-image channels-last copies of x and dy).
  plan.channels_last_copies = wants_channels_last_copies(problem, plan.cpu);
  ConvProblem p = problem;
  if (plan.channels_last_copies) p.format = DataFormat::kNHWC;
  plan.input_pairs_by_channel = pairs_images_on_amx(p, plan.cpu);
  if (plan.input_pairs_by_channel) plan.tiles = TileModel::amx(plan.cpu);
  if (choose_output_slices(p, plan)) {
    // Everything else is decided for one slice on one thread.
    const int threads = plan.threads;
    plan.threads = 1;
    plan_reduction(output_slice_problem(p, plan), p, plan);
    plan.threads = threads;
  } else {
    plan_reduction(p, p, plan);
  }
  // NHWC depthwise without a multiplier: the filter's columns share dy (tkw). A 16-bit dW only
  // where the tiles add into f32 partial sums (split_reduction), which are rounded once, as
  // SEMANTICS.md requires: the later parts would otherwise add into a dW already rounded.
  // There the shared dy vector is also widened once for all the filter columns that read it.
  // Measured on Zen 4, two threads, bfloat16 (paired against the unshared taps): networks.txt's
  // depthwise filter gradients 1.15-1.35x (MobileNetV2's 3x3, EfficientNet's 5x5 on 28x28 and
  // 14x14 images), ConvNeXt's 7x7 on 56x56 images 2.46x.
  const bool partial_sums =
      plan.reduction_split != ReductionSplit::kNone || plan.partial_sums_for_rounding;
  plan.taps_share_out_backprop = p.depthwise && p.oc_per_group() == 1 &&
                                 p.format == DataFormat::kNHWC && plan.cpu.vector_registers > 0 &&
                                 (ir::accumulator_dtype(p.dtype) == p.dtype || partial_sums);
}

}  // namespace convjit::cpu
