// The CPU plan's filter-gradient decisions: how the reduction over (n, oh, ow) is blocked for
// the caches, how the threads share it (and where their partial sums live), and which copies
// of its operands the tiles read.
#include <algorithm>

#include "codegen/cpu/plan_rules.hpp"

namespace convjit::cpu {
namespace {

// Share of L2 one chunk's x and dy rows may fill for the problem to count as fitting unblocked.
constexpr double kL2Share = 0.5;
// Share of L1 a chunk's working set for one column block may fill: its dy slice and a line of
// x per pixel. Measured on the benchmark suite: chunks of a half or a quarter of L1 ran
// 10-25% slower than a fifth (the tiles' dW lines and the next tap's x rows need the rest).
constexpr double kL1Share = 0.2;
// Reduce points per accumulator lane a chunk gives each tile when the partial sums outgrow L2:
// every chunk loads and stores all of them, from L3 then, and one-row chunks left the tiles
// waiting on those loads. Measured on Zen 1 (ymm, f32, 8 lanes: 128 points), 1 thread:
// resnet_3x3_s1_c128 from 1 to 5 rows 50.5-50.9 -> 46.9-47.4 ms, c256 from 2 to 7 rows 50.3-50.5
// -> 47.6-48.1 ms, resnet_3x3_s2 from 1 to 5 rows 52.6-54.7 -> 49.2-51.3 ms; a filter that
// stays in L2 (c64) ran the same at 1, 3 and 6 rows.
constexpr std::int64_t kMinPointsPerLane = 16;

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
  // Unless the partial sums outgrow L2: then enough rows that reloading the accumulators per
  // chunk costs little.
  const std::int64_t per_pixel = tile_cols * dtype_size(p.dtype) + CpuInfo::kCacheLineBytes;
  const auto pixels =
      static_cast<std::int64_t>(kL1Share * static_cast<double>(cpu.l1_bytes)) / per_pixel;
  std::int64_t rows = pixels / std::max<std::int64_t>(p.ow, 1);
  const std::int64_t acc_bytes = dtype_size(ir::accumulator_dtype(p.dtype));
  const double partial_bytes = static_cast<double>(p.kh * p.kw * p.filter_in * p.oc * acc_bytes);
  if (partial_bytes > kL2Share * static_cast<double>(cpu.l2_bytes)) {
    const std::int64_t points = kMinPointsPerLane * cpu.lanes(static_cast<int>(acc_bytes));
    rows = std::max(rows, (points + std::max<std::int64_t>(p.ow, 1) - 1) /
                              std::max<std::int64_t>(p.ow, 1));
  }
  return std::clamp<std::int64_t>(rows, 1, std::max<std::int64_t>(p.oh, 1));
}

// Broadcasts per x element at which its widened copy pays: f16 resnet_3x3_s1 71 -> 51 ms on
// one AVX2 thread, bf16 54 -> 51; resnet_1x1's x, broadcast twice per element, stays.
bool widening_input_pays(const ConvProblem& p, std::int64_t tile_cols) {
  constexpr double kMinBroadcasts = 4.0;
  const double fmas_per_element = static_cast<double>(p.kh * p.kw * p.oc * p.oh * p.ow) /
                                  static_cast<double>(std::max<std::int64_t>(p.ih * p.iw, 1));
  return fmas_per_element >= kMinBroadcasts * static_cast<double>(tile_cols);
}

void plan_filter_gradient(const ConvProblem& p, CpuPlan& plan) {
  const CpuInfo& cpu = plan.cpu;
  const int threads = plan.threads;
  const bool half = ir::accumulator_dtype(p.dtype) != p.dtype;
  // NCHW: dy copied channels-last once per call so the tiles' column vectors (output channels)
  // are contiguous. One output channel has nothing to put in a vector; fewer than the lanes
  // still gain from a masked vector, as NHWC does (small_odd, 7 channels on AVX2: 21.4 ->
  // 5.9 us, as NHWC).
  plan.channels_last_out_backprop = p.format == DataFormat::kNCHW && p.groups == 1 &&
                                    !p.depthwise && cpu.vector_registers > 0 && p.oc >= 2;

  // The batch does not divide among the threads: each thread takes a share of every tile's
  // rows instead (while every tile has a row for each thread), into its own partial sums.
  if (p.n % threads != 0) {
    plan.columns_outside_rows = true;
    if (fewest_tap_rows(p) >= threads) {
      plan.reduction_blocking = ReductionBlocking::kRowSplit;
      plan.reduction_split = ReductionSplit::kRowThreads;
    }
  } else {
    // Everything fits in half the L2 already: blocking would only add parts. With the NCHW
    // per-call copy of dy, whole images are the chunks so the copy can follow the images; not
    // for half types, which that form would round into dW per image.
    const bool fits = static_cast<double>(p.n) * chunk_bytes(p, p.oh) <=
                      kL2Share * static_cast<double>(cpu.l2_bytes);
    if (!fits || (plan.channels_last_out_backprop && !half)) {
      plan.reduction_blocking = ReductionBlocking::kBatchChunks;
      plan.whole_image_chunks = fits;
      plan.columns_outside_rows = true;
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

  // 16-bit NHWC: image pairs for vdpbf16ps, or each image widened to f32 once.
  if (p.format == DataFormat::kNHWC && !p.depthwise) {
    if (cpu.has_avx512_bf16 && p.dtype == DType::kBFloat16) {
      plan.batch_copies = BatchCopies::kPairs;
    } else if (cpu.vector_registers > 0 && widens_to_f32(p.dtype, cpu)) {
      plan.batch_copies = BatchCopies::kWiden;
    }
  }
  plan.copy_budget_bytes = cpu.l2_bytes / 2;
}

}  // namespace convjit::cpu
