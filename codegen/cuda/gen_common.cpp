// What every generated kernel shares: the description comment, types, problem constants,
// element-offset functions and dtype conversions.
#include <algorithm>

#include "codegen/cuda/cuda_generators.hpp"
#include "frontend/descriptor_text.hpp"

namespace convjit::codegen::cuda_gen {

std::string elem_type(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
      return "cj_half";
    case DType::kBFloat16:
      return "cj_bf16";
    case DType::kFloat32:
      return "float";
    case DType::kFloat64:
      return "double";
  }
  return "float";
}

std::string acc_type(DType dtype) { return dtype == DType::kFloat64 ? "double" : "float"; }

bool wide_index(const CudaPlan& plan) {
  const ConvProblem& p = plan.problem;
  // A margin of 2x keeps grid-stride increments and tile ends inside 31 bits too.
  constexpr std::int64_t kLimit = std::int64_t{1} << 30;
  const std::int64_t split_workspace = p.elements(TensorRole::kW) * std::max(1, plan.split_k);
  return p.elements(TensorRole::kX) >= kLimit || p.elements(TensorRole::kY) >= kLimit ||
         split_workspace >= kLimit;
}

std::uint32_t grid_stride_blocks(std::int64_t count, int threads) {
  const std::int64_t blocks = (count + threads - 1) / threads;
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(blocks, 1, std::int64_t{1} << 20));
}

namespace {

void emit_conversions(CodeWriter& out, DType dtype) {
  switch (dtype) {
    case DType::kHalf:
      out.line("CJ_DEVICE acc_t to_acc(elem_t v) {{ return cj_half_to_float(v); }}");
      out.line("CJ_DEVICE elem_t from_acc(acc_t v) {{ return cj_float_to_half(v); }}");
      break;
    case DType::kBFloat16:
      out.line("CJ_DEVICE acc_t to_acc(elem_t v) {{ return cj_bf16_to_float(v); }}");
      out.line("CJ_DEVICE elem_t from_acc(acc_t v) {{ return cj_float_to_bf16(v); }}");
      break;
    case DType::kFloat32:
    case DType::kFloat64:
      out.line("CJ_DEVICE acc_t to_acc(elem_t v) {{ return v; }}");
      out.line("CJ_DEVICE elem_t from_acc(acc_t v) {{ return v; }}");
      break;
  }
}

}  // namespace

void emit_common(CodeWriter& out, const CudaPlan& plan) {
  const ConvProblem& p = plan.problem;
  out.line("// convjit CUDA kernel {}", plan.kernel_name);
  out.line("// problem: {}", to_text(p));
  out.line("// plan:    {}", plan.describe());
  out.line("// Generated for this problem only: every size and stride is a constant.");
  out.blank();
  out.line("typedef {} elem_t;  // the tensors' element type", elem_type(p.dtype));
  out.line("typedef {} acc_t;  // the accumulation type", acc_type(p.dtype));
  out.line("typedef {} cj_index;  // element offsets", wide_index(plan) ? "long long" : "int");
  out.blank();
  out.line("constexpr cj_index kBatch = {};", p.n);
  out.line("constexpr cj_index kInH = {}, kInW = {}, kInC = {};  // x", p.ih, p.iw, p.ic);
  out.line("constexpr cj_index kKH = {}, kKW = {}, kFilterIn = {}, kOutC = {};  // w (HWIO)", p.kh,
           p.kw, p.filter_in, p.oc);
  out.line("constexpr cj_index kGroups = {}, kOutCPerGroup = {};", p.groups, p.oc_per_group());
  out.line("constexpr cj_index kOutH = {}, kOutW = {};  // y", p.oh, p.ow);
  out.line("constexpr cj_index kStrideH = {}, kStrideW = {};", p.stride_h, p.stride_w);
  out.line("constexpr cj_index kDilationH = {}, kDilationW = {};", p.dilation_h, p.dilation_w);
  out.line("constexpr cj_index kPadTop = {}, kPadLeft = {};", p.pad_top, p.pad_left);
  out.line("constexpr cj_index kXElements = {}, kWElements = {}, kYElements = {};",
           p.elements(TensorRole::kX), p.elements(TensorRole::kW), p.elements(TensorRole::kY));
  const auto xs = p.strides(TensorRole::kX);
  const auto ys = p.strides(TensorRole::kY);
  const auto ws = p.strides(TensorRole::kW);
  out.blank();
  out.line("// Element offsets: x and y by (n, row, col, channel) in {} memory order, w by",
           p.format == DataFormat::kNCHW ? "NCHW" : "NHWC");
  out.line("// (kh, kw, i, o) in HWIO order.");
  out.line("CJ_DEVICE cj_index x_offset(cj_index n, cj_index row, cj_index col, cj_index c) {{");
  out.line("  return n * {} + row * {} + col * {} + c * {};", xs[0], xs[1], xs[2], xs[3]);
  out.line("}}");
  out.line("CJ_DEVICE cj_index y_offset(cj_index n, cj_index row, cj_index col, cj_index c) {{");
  out.line("  return n * {} + row * {} + col * {} + c * {};", ys[0], ys[1], ys[2], ys[3]);
  out.line("}}");
  out.line("CJ_DEVICE cj_index w_offset(cj_index kh, cj_index kw, cj_index i, cj_index o) {{");
  out.line("  return kh * {} + kw * {} + i * {} + o;", ws[0], ws[1], ws[2]);
  out.line("}}");
  out.blank();
  emit_conversions(out, p.dtype);
  out.blank();
}

void emit_tensor_pointers(CodeWriter& out, const CudaPlan& plan, std::string_view roles) {
  const TensorRole output = plan.problem.output_role();
  for (char r : roles) {
    const TensorRole role = r == 'x' ? TensorRole::kX : r == 'w' ? TensorRole::kW : TensorRole::kY;
    const bool is_output = role == output;
    out.line("{}elem_t* __restrict__ {} = static_cast<{}elem_t*>(args.{});",
             is_output ? "" : "const ", r, is_output ? "" : "const ", r);
  }
}

void emit_zero_fill_kernel(CodeWriter& out, const CudaPlan& plan, CudaLaunch* launch) {
  const ConvProblem& p = plan.problem;
  const TensorRole role = p.output_role();
  const char r = role == TensorRole::kX ? 'x' : role == TensorRole::kW ? 'w' : 'y';
  const std::int64_t count = p.elements(role);
  launch->symbol = plan.kernel_name;
  launch->block = {static_cast<std::uint32_t>(plan.threads), 1, 1};
  launch->grid = {grid_stride_blocks(count, plan.threads), 1, 1};
  out.line("// An operand is empty: the {} output is all zeros.", role_name(role));
  out.open("CJ_KERNEL void CJ_LAUNCH_BOUNDS({}, 2) {}(cj_args args)", plan.threads, launch->symbol);
  out.line("elem_t* __restrict__ {} = static_cast<elem_t*>(args.{});", r, r);
  out.line("const elem_t zero = from_acc(acc_t(0));");
  out.open(
      "for (cj_index e = cj_index(blockIdx.x) * {} + threadIdx.x; e < {}; e += cj_index(gridDim.x) "
      "* {})",
      plan.threads, count, plan.threads);
  out.line("CJ_STG({}, e, zero);", r);
  out.close();
  out.close();
}

void emit_split_reduce_kernel(CodeWriter& out, const CudaPlan& plan, CudaLaunch* launch) {
  const std::int64_t count = plan.problem.elements(TensorRole::kW);
  constexpr int kThreads = 256;
  launch->symbol = plan.kernel_name + "_reduce";
  launch->block = {kThreads, 1, 1};
  launch->grid = {grid_stride_blocks(count, kThreads), 1, 1};
  out.line("// The split-K slices of the filter gradient, summed in slice order (deterministic).");
  out.open("CJ_KERNEL void CJ_LAUNCH_BOUNDS({}, 2) {}(cj_args args)", kThreads, launch->symbol);
  out.line("const acc_t* __restrict__ workspace = static_cast<const acc_t*>(args.workspace);");
  out.line("elem_t* __restrict__ w = static_cast<elem_t*>(args.w);");
  out.open(
      "for (cj_index e = cj_index(blockIdx.x) * {} + threadIdx.x; e < kWElements; e += "
      "cj_index(gridDim.x) * {})",
      kThreads, kThreads);
  out.line("acc_t sum = CJ_LDG(workspace, e);");
  out.line("CJ_UNROLL");
  out.line(
      "for (int slice = 1; slice < {}; ++slice) sum += CJ_LDG(workspace, slice * kWElements + e);",
      plan.split_k);
  out.line("CJ_STG(w, e, from_acc(sum));");
  out.close();
  out.close();
}

}  // namespace convjit::codegen::cuda_gen
