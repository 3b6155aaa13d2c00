// plan_cpu: the one place the CPU schedule's decisions are made. The op family's rules live in
// plan_data_gradient.cpp and plan_filter_gradient.cpp; what every op shares is here.
#include "codegen/cpu/cpu_plan.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "codegen/cpu/plan_rules.hpp"

namespace convjit::cpu {
namespace {

// A conservative serial speed for the estimate: small problems run far below peak, and they
// are the ones the decision is about.
constexpr double kSerialFlopsPerSecond = 20e9;
// Waking the pool's threads and joining them, per parallel loop (measured: a few µs).
constexpr double kDispatchSeconds = 5e-6;
// Parallel loops a split kernel typically dispatches (the work, then the partial-sum reduce).
constexpr double kDispatchesPerRun = 2;

}  // namespace

int useful_threads(const ConvProblem& problem, int max_threads) {
  const int threads = std::max(1, max_threads);
  if (threads == 1 || problem.is_empty()) return 1;
  const double serial = static_cast<double>(problem.flops()) / kSerialFlopsPerSecond;
  const double saved = serial * (1.0 - 1.0 / threads);
  return saved > kDispatchesPerRun * kDispatchSeconds ? threads : 1;
}

bool widens_to_f32(DType dtype, const CpuInfo& cpu) {
  return dtype == DType::kHalf || (dtype == DType::kBFloat16 && !cpu.uses_bf16_dot());
}

bool pairs_output_channels(const ConvProblem& problem, const CpuInfo& cpu) {
  return cpu.pairs_bf16_data_gradient() && problem.dtype == DType::kBFloat16 &&
         problem.oc_per_group() % 2 == 0;
}

TileModel paired_bf16_tiles(const CpuInfo& cpu) {
  return cpu.has_amx_bf16 ? TileModel::amx(cpu) : TileModel::bf16_dot(cpu);
}

bool output_outgrows_llc(const ConvProblem& problem, const CpuInfo& cpu) {
  return problem.elements(problem.output_role()) * dtype_size(problem.dtype) > cpu.llc_bytes;
}

std::string CpuPlan::describe() const {
  std::string out = fmt::format("cpu={} threads={}", cpu.name(), threads);
  auto flag = [&](bool on, const char* name) {
    if (on) out += fmt::format(" {}", name);
  };
  flag(pixels_as_one_row, "pixels_as_one_row");
  flag(channels_last_copies, "channels_last_copies");
  flag(position_vectors, "position_vectors");
  flag(transposed_out_backprop, "transposed_out_backprop");
  flag(channels_first_out_backprop_copy, "channels_first_out_backprop_copy");
  flag(repeated_columns, "repeated_columns");
  flag(planes_per_group, "planes_per_group");
  if (residues_h > 1 || residues_w > 1) out += fmt::format(" residues={}x{}", residues_h, residues_w);
  flag(pad_out_backprop_copies, "pad_out_backprop_copies");
  if (pack_filter) out += fmt::format(" pack_filter={}", dtype_name(packed_filter_dtype));
  if (channel_block > 0) {
    out += fmt::format(" channel_block={}{}{}", channel_block,
                       channel_blocks_around_rows ? "/rows" : "/image",
                       channel_blocks_inside_pixels ? "/inside_pixels"
                       : channel_blocks_around_batch ? "/around_batch"
                                                     : "");
  }
  flag(deinterleave_multiplier, "deinterleave_multiplier");
  flag(widen_depthwise_operands, "widen_depthwise_operands");
  flag(pair_output_channels, "pair_output_channels");
  flag(whole_width_rows, "whole_width_rows");
  flag(privatize_batch_copies, "privatize_batch_copies");
  flag(border_columns_as_rows, "border_columns_as_rows");
  flag(channels_last_out_backprop, "channels_last_out_backprop");
  flag(taps_share_out_backprop, "taps_share_out_backprop");
  static constexpr const char* kBlocking[] = {"none", "batch_chunks", "row_split"};
  static constexpr const char* kSplit[] = {"none", "row_threads", "batch", "dims"};
  static constexpr const char* kCopies[] = {"none", "pairs", "widen", "restride"};
  if (reduction_blocking != ReductionBlocking::kNone) {
    out += fmt::format(" reduction_blocking={}{}", kBlocking[static_cast<int>(reduction_blocking)],
                       whole_image_chunks ? "/whole_images" : "");
    if (chunk_images > 1) out += fmt::format("/images={}", chunk_images);
  }
  flag(columns_outside_rows, "columns_outside_rows");
  flag(rereads_out_backprop, "rereads_out_backprop");
  if (reduction_split != ReductionSplit::kNone) {
    out += fmt::format(" reduction_split={}", kSplit[static_cast<int>(reduction_split)]);
    if (reduction_split == ReductionSplit::kDims) {
      out += fmt::format("/dim{}x{}", split_dim, split_chunks);
    }
  }
  if (output_slices > 1) {
    out += fmt::format(" output_slices={}x{}", slices_of_input_channels ? "ic" : "oc", output_slices);
  }
  flag(partial_sums_for_rounding, "partial_sums_for_rounding");
  flag(input_pairs_by_channel, "input_pairs_by_channel");
  if (batch_copies != BatchCopies::kNone) {
    out += fmt::format(" batch_copies={}", kCopies[static_cast<int>(batch_copies)]);
    if (x_pixel_padding > 0 || y_pixel_padding > 0) {
      out += fmt::format("/pixel_padding={},{}", x_pixel_padding, y_pixel_padding);
    }
  }
  flag(whole_line_output_tiles, "whole_line_output_tiles");
  flag(stream_output, "stream_output");
  flag(prefetch_streamed_rows, "prefetch_streamed_rows");
  return out;
}

// NCHW: where the NHWC tiles' channel vectors fill, the whole NHWC schedule (register tiles
// over pixels x channel vectors, packed and channel-blocked filter) is faster than NCHW's
// W-vector tiles even counting two copies. Those take vectors along W with rows over a few
// channels, each walking a window of every channel of the operand it reduces over, which
// outgrows L1. Measured on Zen 5, two threads, f32:
// - input gradients (vectors over input channels, reducing over output channels; both must
//   fill vectors) ran at about a third of the NHWC speed. A 1x1 filter at stride 1 is the
//   exception: one matrix product per image over contiguous H*W positions whose dy window is a
//   single vector, so its W-vector tiles stay in L1 and the copies would only add
//   (8x256x56x56 from 64 channels: 21.9 ms with the copies, 12.6 without, NHWC 11.8).
// - the forward op (vectors over output channels) ran at a sixth to a fortieth: 8x64x56x56
//   3x3 to 64, 80 -> 470 GFLOP/s with the copies; 1x1 64->256 131 -> 320; 1x1 stride 2
//   256->128 10 -> 257; the 3-channel 7x7 stride-2 stem 28 -> 423. With fewer output channels
//   than a vector (8 or 4) the W-vector tiles stay ahead (111 vs 76, 60 vs 53 GFLOP/s), as do
//   grouped convolutions (4 groups of 16: 155 vs 61).
// - the depthwise filter gradient reduces each channel's (kh, kw) over whole planes: NCHW's
//   tiles were one element wide (2.5-5 GFLOP/s; 8x144x56x56 3x3 12.8 ms against NHWC's 0.70),
//   where NHWC's are vectors over the channels. Both x and dy are copied, image by image.
bool wants_channels_last_copies(const ConvProblem& p, const CpuInfo& cpu) {
  const std::int64_t lanes = cpu.lanes(dtype_size(ir::accumulator_dtype(p.dtype)));
  if (p.format != DataFormat::kNCHW || cpu.vector_registers == 0) return false;
  if (p.depthwise) return p.direction == ConvDirection::kBackpropFilter;
  if (p.groups != 1 || p.oc < lanes) return false;
  if (p.direction == ConvDirection::kForward) return true;
  if (p.direction != ConvDirection::kBackpropData || p.ic < lanes) return false;
  return !(p.kh == 1 && p.kw == 1 && p.stride_h == 1 && p.stride_w == 1);
}

// A 1x1 filter at stride 1 with no padding maps pixel (h, w) of x to pixel (h, w) of y: per
// image one matrix product over its H*W pixels, which the row-by-row tiles cut at every row
// end. Not the filter gradient, whose reduction is blocked in chunks of whole output rows.
bool pixels_form_one_row(const ConvProblem& p) {
  return p.direction != ConvDirection::kBackpropFilter && p.kh == 1 && p.kw == 1 &&
         p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 && p.pad_bottom == 0 &&
         p.pad_left == 0 && p.pad_right == 0 && p.ih == p.oh && p.iw == p.ow && p.ih > 1;
}

namespace {

// Share of the tiles' cycles one row of pixels must save for the pixels to be scheduled as
// one row. Short rows lose to their tails: on 7x7 images a row of 7 pixels took 2-row tiles
// and a 1-row tail, each streaming the filter block; as one row of 49 the tiles take 3 rows
// (Zen 3, two threads, input gradients: 8x7x7 2048 -> 512 channels 127 -> 177 GFLOP/s,
// 512 -> 2048 111 -> 169, 960 -> 320 125 -> 158). Long rows lose little to their tails and
// keep their rows: a row of 56 pixels is what channel blocks around each row keep in cache
// across the blocks, and as one row of 3136 they lost that (56x56 from 96 to 384 channels
// 153 -> 137 GFLOP/s).
constexpr double kOneRowSavedShare = 0.05;

// Whether scheduling each image's pixels as one row saves the tiles that share of their
// cycles: pixels are the tiles' rows with channel vectors (NHWC), their columns otherwise.
bool one_row_pays(const ConvProblem& p, const TileModel& model) {
  // A group's channels: the tiles' vector (input channels of the data gradient, output
  // channels of the forward op) and the reduction over the other side.
  const bool data = p.direction == ConvDirection::kBackpropData;
  const std::int64_t channels = data ? p.filter_in : p.oc_per_group();
  const std::int64_t reduce = data ? p.oc_per_group() : p.filter_in;
  const std::int64_t h = p.ih, w = p.iw;
  auto cycles = [&](std::int64_t rows, std::int64_t width) {
    return static_cast<double>(rows) *
           (p.format == DataFormat::kNHWC
                ? model.best_cycles(TileForm::kOuterProduct, width, channels, reduce)
                : model.best_cycles(TileForm::kOuterProduct, channels, width, reduce));
  };
  return cycles(1, h * w) < (1.0 - kOneRowSavedShare) * cycles(h, w);
}

}  // namespace

ConvProblem one_row_problem(const ConvProblem& problem) {
  ConvProblem p = problem;
  p.iw = p.ow = problem.ih * problem.iw;
  p.ih = p.oh = 1;
  return p;
}

CpuPlan plan_cpu(const ConvProblem& problem, const CpuInfo& cpu, int max_threads) {
  CpuPlan plan;
  plan.problem = problem;
  plan.cpu = cpu;
  plan.threads = useful_threads(problem, max_threads);
  plan.tiles = TileModel::of(cpu, problem.dtype);
  if (problem.is_empty()) return plan;  // a zero fill: nothing to decide
  // Every decision below is made for the problem as the schedule will see it.
  // Weighed with the tiles that would run the row: the paired ones where a bfloat16 data
  // gradient's tiles pair (plan_data_gradient); AMX's 16-row blocks lose most to short rows.
  const bool paired_rows = problem.direction == ConvDirection::kBackpropData &&
                           !problem.depthwise && pairs_output_channels(problem, cpu);
  plan.pixels_as_one_row = pixels_form_one_row(problem) &&
                           one_row_pays(problem, paired_rows ? paired_bf16_tiles(cpu) : plan.tiles);
  const ConvProblem p = plan.pixels_as_one_row ? one_row_problem(problem) : problem;
  switch (p.direction) {
    case ConvDirection::kBackpropData: plan_data_gradient(p, plan); break;
    case ConvDirection::kBackpropFilter: plan_filter_gradient(p, plan); break;
    case ConvDirection::kForward: {
      // The forward op's tiles are the data gradient's (pixels x channel vectors, the filter
      // already contiguous along them in HWIO): NCHW goes through channels-last copies of x
      // and y, made per image in each thread's slot, and the border columns tile as rows, on
      // the same rules.
      plan.channels_last_copies = wants_channels_last_copies(p, cpu);
      const bool nhwc = p.format == DataFormat::kNHWC || plan.channels_last_copies;
      plan.border_columns_as_rows = nhwc && cpu.vector_registers > 0 && !p.depthwise;
      plan.privatize_batch_copies = plan.channels_last_copies && p.n >= plan.threads;
      break;
    }
  }
  plan.whole_line_output_tiles = cpu.vector_bytes > 0 && output_outgrows_llc(problem, cpu);
  // A filter gradient's tiles write dW plainly only when its reduction is neither blocked (the
  // tiles then accumulate) nor split (they then write partial sums, read back at the end).
  const bool plain_output = problem.direction != ConvDirection::kBackpropFilter ||
                            (plan.reduction_blocking == ReductionBlocking::kNone &&
                             plan.reduction_split == ReductionSplit::kNone);
  plan.stream_output = plan.whole_line_output_tiles && plain_output;
  plan.prefetch_streamed_rows = cpu.vector_bytes > 0;
  return plan;
}

}  // namespace convjit::cpu
