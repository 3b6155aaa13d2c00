// The depthwise gradient kernels (one input channel per group, depth multiplier M = OC / C).
//   dgrad: a block owns channel_block channels (threadIdx.x, contiguous in NHWC) of
//          pixel_block input pixels; the channels' filter taps are staged in shared memory
//          once, then each thread gathers its input element over taps and multipliers.
//   wgrad: a block owns one tap, channel_block channels and multiplier_block multipliers;
//          pixel_block rows of threads split the N*OH*OW reduction, and a shared-memory tile
//          of their partial sums is added in row order (deterministic); split-K slices go to
//          the workspace and a second kernel.
#include "codegen/cuda/cuda_generators.hpp"

namespace convjit::codegen::cuda_gen {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

void emit_dgrad(CodeWriter& out, const CudaPlan& plan, CudaLaunch* launch) {
  const ConvProblem& p = plan.problem;
  const int cb = plan.channel_block, pb = plan.pixel_block;
  const std::int64_t mult = p.oc_per_group();
  const std::int64_t pixels = p.n * p.ih * p.iw;
  const std::int64_t taps = p.kh * p.kw;
  launch->symbol = plan.kernel_name;
  launch->block = {static_cast<std::uint32_t>(plan.threads), 1, 1};
  launch->grid = {static_cast<std::uint32_t>(ceil_div(pixels, pb)),
                  static_cast<std::uint32_t>(ceil_div(p.groups, cb)), 1};
  launch->shared_bytes = plan.shared_bytes();
  out.line(
      "// Depthwise input gradient: {} channels x {} pixels per block, the filter taps of "
      "the block's channels in shared memory.",
      cb, pb);
  out.open("CJ_KERNEL void CJ_LAUNCH_BOUNDS({}, 2) {}(cj_args args)", plan.threads, launch->symbol);
  emit_tensor_pointers(out, plan, "xwy");
  out.line("constexpr cj_index kChannels = {}, kMultiplier = {}, kPixels = {};", p.groups, mult,
           pixels);
  out.line("CJ_SHARED(acc_t, filter_tile, {});  // [kh][kw][channel in block][multiplier]",
           taps * cb * mult);
  out.line("const int tid = threadIdx.x;");
  out.line("const cj_index c0 = cj_index(blockIdx.y) * {};", cb);
  out.open("for (int e = tid; e < {}; e += {})", taps * cb * mult, plan.threads);
  out.line("const int m = e % {}, cl = (e / {}) % {}, tap = e / {};", mult, mult, cb, cb * mult);
  out.line("const cj_index c = c0 + cl;");
  out.line(
      "CJ_STS(filter_tile, e, c < kChannels ? to_acc(CJ_LDG(w, tap * kOutC + c * {} + m)) : "
      "acc_t(0));",
      mult);
  out.close();
  out.line("__syncthreads();");
  out.line("const int cl = tid % {};", cb);
  out.line("const cj_index c = c0 + cl;");
  out.line("const cj_index pixel = cj_index(blockIdx.x) * {} + tid / {};", pb, cb);
  out.line("if (c >= kChannels || pixel >= kPixels) return;");
  out.line(
      "const cj_index col = pixel % kInW, row = (pixel / kInW) % kInH, n = pixel / (kInW * kInH);");
  out.line("acc_t acc = 0;");
  out.open("for (cj_index kh = 0; kh < kKH; ++kh)");
  out.line("const cj_index th = row + kPadTop - kh * kDilationH;");
  out.line("if (th < 0 || th % kStrideH != 0 || th / kStrideH >= kOutH) continue;");
  out.open("for (cj_index kw = 0; kw < kKW; ++kw)");
  out.line("const cj_index tw = col + kPadLeft - kw * kDilationW;");
  out.line("if (tw < 0 || tw % kStrideW != 0 || tw / kStrideW >= kOutW) continue;");
  out.line("const cj_index dy_base = y_offset(n, th / kStrideH, tw / kStrideW, c * {});", mult);
  out.line("const int tap_base = ((kh * kKW + kw) * {} + cl) * {};", cb, mult);
  out.line("CJ_UNROLL");
  out.open("for (int m = 0; m < {}; ++m)", mult);
  out.line(
      "acc = cj_fma(to_acc(CJ_LDG(y, dy_base + m * {})), CJ_LDS(filter_tile, tap_base + m), acc);",
      p.strides(TensorRole::kY)[3]);
  out.close();
  out.close();
  out.close();
  out.line("CJ_STG(x, x_offset(n, row, col, c), from_acc(acc));");
  out.close();
}

void emit_wgrad(CodeWriter& out, const CudaPlan& plan, CudaLaunch* launch) {
  const ConvProblem& p = plan.problem;
  const int cb = plan.channel_block, rows = plan.pixel_block, mb = plan.multiplier_block;
  const std::int64_t mult = p.oc_per_group();
  const std::int64_t positions = p.n * p.oh * p.ow;
  const std::int64_t per_split = ceil_div(positions, plan.split_k);
  const std::int64_t m_chunks = ceil_div(mult, mb);
  launch->symbol = plan.kernel_name;
  launch->block = {static_cast<std::uint32_t>(plan.threads), 1, 1};
  launch->grid = {static_cast<std::uint32_t>(p.kh * p.kw),
                  static_cast<std::uint32_t>(ceil_div(p.groups, cb) * m_chunks),
                  static_cast<std::uint32_t>(plan.split_k)};
  launch->shared_bytes = plan.shared_bytes();
  out.line(
      "// Depthwise filter gradient: one tap x {} channels x {} multipliers per block; {} "
      "rows of threads split the {} output positions{}.",
      cb, mb, rows, positions, plan.split_k > 1 ? " of one split-K slice" : "");
  out.open("CJ_KERNEL void CJ_LAUNCH_BOUNDS({}, 2) {}(cj_args args)", plan.threads, launch->symbol);
  emit_tensor_pointers(out, plan, "xy");
  if (plan.split_k > 1) {
    out.line("acc_t* __restrict__ partial_out = static_cast<acc_t*>(args.workspace);");
  } else {
    out.line("elem_t* __restrict__ w = static_cast<elem_t*>(args.w);");
  }
  out.line("constexpr cj_index kChannels = {}, kMultiplier = {}, kPositions = {}, kPerSplit = {};",
           p.groups, mult, positions, per_split);
  out.line("CJ_SHARED(acc_t, partial, {});  // [row][channel in block][multiplier in block]",
           rows * cb * mb);
  out.line("const int tid = threadIdx.x, cl = tid % {}, thread_row = tid / {};", cb, cb);
  out.line("const cj_index kh = blockIdx.x / kKW, kw = blockIdx.x % kKW;");
  out.line("const cj_index c = cj_index(blockIdx.y / {}) * {} + cl;", m_chunks, cb);
  out.line("const cj_index m0 = cj_index(blockIdx.y % {}) * {};", m_chunks, mb);
  out.line("const cj_index begin = cj_index(blockIdx.z) * kPerSplit;");
  out.line("const cj_index end = begin + kPerSplit < kPositions ? begin + kPerSplit : kPositions;");
  out.line("acc_t acc[{}];", mb);
  out.line("CJ_UNROLL");
  out.line("for (int j = 0; j < {}; ++j) acc[j] = 0;", mb);
  out.open("if (c < kChannels)");
  out.open("for (cj_index q = begin + thread_row; q < end; q += {})", rows);
  out.line("const cj_index ow = q % kOutW, oh = (q / kOutW) % kOutH, n = q / (kOutW * kOutH);");
  out.line("const cj_index ih = oh * kStrideH - kPadTop + kh * kDilationH;");
  out.line("const cj_index iw = ow * kStrideW - kPadLeft + kw * kDilationW;");
  out.line("if (ih < 0 || ih >= kInH || iw < 0 || iw >= kInW) continue;");
  out.line("const acc_t xv = to_acc(CJ_LDG(x, x_offset(n, ih, iw, c)));");
  out.line("const cj_index dy_base = y_offset(n, oh, ow, c * kMultiplier + m0);");
  out.line("CJ_UNROLL");
  out.open("for (int j = 0; j < {}; ++j)", mb);
  if (mult % mb != 0) out.line("if (m0 + j >= kMultiplier) break;");
  out.line("acc[j] = cj_fma(xv, to_acc(CJ_LDG(y, dy_base + j * {})), acc[j]);",
           p.strides(TensorRole::kY)[3]);
  out.close();
  out.close();
  out.close();
  out.line("CJ_UNROLL");
  out.line("for (int j = 0; j < {}; ++j) CJ_STS(partial, (thread_row * {} + cl) * {} + j, acc[j]);",
           mb, cb, mb);
  out.line("__syncthreads();");
  out.line("if (thread_row != 0 || c >= kChannels) return;");
  out.line("CJ_UNROLL");
  out.open("for (int j = 0; j < {}; ++j)", mb);
  if (mult % mb != 0) out.line("if (m0 + j >= kMultiplier) break;");
  out.line("acc_t sum = 0;");
  out.line("CJ_NO_UNROLL");
  out.line("for (int r = 0; r < {}; ++r) sum += CJ_LDS(partial, (r * {} + cl) * {} + j);", rows, cb,
           mb);
  out.line("const cj_index offset = w_offset(kh, kw, 0, c * kMultiplier + m0 + j);");
  if (plan.split_k > 1) {
    out.line("CJ_STG(partial_out, cj_index(blockIdx.z) * kWElements + offset, sum);");
  } else {
    out.line("CJ_STG(w, offset, from_acc(sum));");
  }
  out.close();
  out.close();
}

}  // namespace

void emit_depthwise_kernel(CodeWriter& out, const CudaPlan& plan, CudaLaunch* launch) {
  if (plan.problem.direction == ConvDirection::kBackpropData) {
    emit_dgrad(out, plan, launch);
  } else {
    emit_wgrad(out, plan, launch);
  }
}

}  // namespace convjit::codegen::cuda_gen
