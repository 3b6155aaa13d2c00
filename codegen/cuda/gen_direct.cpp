// The direct kernels: one thread per output element (grid-stride), the whole reduction in a
// loop. They compute every op, attribute and dtype, and are the plan's fallback.
#include "codegen/cuda/cuda_generators.hpp"

namespace convjit::codegen::cuda_gen {
namespace {

/// Splits the flat output index `e` (memory order) into named coordinates.
void emit_activation_coords(CodeWriter& out, DataFormat format, std::string_view h,
                            std::string_view w, std::string_view c) {
  if (format == DataFormat::kNCHW) {
    out.line("const cj_index col = e % {};", w);
    out.line("cj_index rest = e / {};", w);
    out.line("const cj_index row = rest % {};", h);
    out.line("rest /= {};", h);
    out.line("const cj_index c = rest % {};", c);
    out.line("const cj_index n = rest / {};", c);
  } else {
    out.line("const cj_index c = e % {};", c);
    out.line("cj_index rest = e / {};", c);
    out.line("const cj_index col = rest % {};", w);
    out.line("rest /= {};", w);
    out.line("const cj_index row = rest % {};", h);
    out.line("const cj_index n = rest / {};", h);
  }
}

}  // namespace

void emit_direct_kernel(CodeWriter& out, const CudaPlan& plan, CudaLaunch* launch) {
  const ConvProblem& p = plan.problem;
  const TensorRole role = p.output_role();
  const std::int64_t count = p.elements(role);
  launch->symbol = plan.kernel_name;
  launch->block = {static_cast<std::uint32_t>(plan.threads), 1, 1};
  launch->grid = {grid_stride_blocks(count, plan.threads), 1, 1};

  out.line("// One thread per {} element (grid-stride loop), the reduction in registers.",
           role_name(role));
  out.open("CJ_KERNEL void CJ_LAUNCH_BOUNDS({}, 2) {}(cj_args args)", plan.threads, launch->symbol);
  emit_tensor_pointers(out, plan, "xwy");
  out.open(
      "for (cj_index e = cj_index(blockIdx.x) * {} + threadIdx.x; e < {}; e += cj_index(gridDim.x) "
      "* {})",
      plan.threads, count, plan.threads);
  out.line("acc_t acc = 0;");
  switch (p.direction) {
    case ConvDirection::kForward:
      emit_activation_coords(out, p.format, "kOutH", "kOutW", "kOutC");
      out.line("const cj_index group = c / kOutCPerGroup;");
      out.open("for (cj_index kh = 0; kh < kKH; ++kh)");
      out.line("const cj_index ih = row * kStrideH - kPadTop + kh * kDilationH;");
      out.line("if (ih < 0 || ih >= kInH) continue;");
      out.open("for (cj_index kw = 0; kw < kKW; ++kw)");
      out.line("const cj_index iw = col * kStrideW - kPadLeft + kw * kDilationW;");
      out.line("if (iw < 0 || iw >= kInW) continue;");
      out.open("for (cj_index i = 0; i < kFilterIn; ++i)");
      out.line("acc = cj_fma(to_acc(CJ_LDG(x, x_offset(n, ih, iw, group * kFilterIn + i))),");
      out.line("             to_acc(CJ_LDG(w, w_offset(kh, kw, i, c))), acc);");
      out.close();
      out.close();
      out.close();
      out.line("CJ_STG(y, e, from_acc(acc));");
      break;
    case ConvDirection::kBackpropData:
      emit_activation_coords(out, p.format, "kInH", "kInW", "kInC");
      out.line("const cj_index group = c / kFilterIn, i = c % kFilterIn;");
      out.line(
          "// The taps whose output position is whole: (row + pad - kh * dilation) % stride == 0.");
      out.open("for (cj_index kh = 0; kh < kKH; ++kh)");
      out.line("const cj_index th = row + kPadTop - kh * kDilationH;");
      out.line("if (th < 0 || th % kStrideH != 0 || th / kStrideH >= kOutH) continue;");
      out.line("const cj_index oh = th / kStrideH;");
      out.open("for (cj_index kw = 0; kw < kKW; ++kw)");
      out.line("const cj_index tw = col + kPadLeft - kw * kDilationW;");
      out.line("if (tw < 0 || tw % kStrideW != 0 || tw / kStrideW >= kOutW) continue;");
      out.line("const cj_index ow = tw / kStrideW;");
      out.open("for (cj_index o = 0; o < kOutCPerGroup; ++o)");
      out.line("const cj_index oc = group * kOutCPerGroup + o;");
      out.line("acc = cj_fma(to_acc(CJ_LDG(y, y_offset(n, oh, ow, oc))),");
      out.line("             to_acc(CJ_LDG(w, w_offset(kh, kw, i, oc))), acc);");
      out.close();
      out.close();
      out.close();
      out.line("CJ_STG(x, e, from_acc(acc));");
      break;
    case ConvDirection::kBackpropFilter:
      out.line("const cj_index o = e % kOutC;");
      out.line("cj_index rest = e / kOutC;");
      out.line("const cj_index i = rest % kFilterIn;");
      out.line("rest /= kFilterIn;");
      out.line("const cj_index kw = rest % kKW;");
      out.line("const cj_index kh = rest / kKW;");
      out.line("const cj_index c = (o / kOutCPerGroup) * kFilterIn + i;");
      out.open("for (cj_index n = 0; n < kBatch; ++n)");
      out.open("for (cj_index oh = 0; oh < kOutH; ++oh)");
      out.line("const cj_index ih = oh * kStrideH - kPadTop + kh * kDilationH;");
      out.line("if (ih < 0 || ih >= kInH) continue;");
      out.open("for (cj_index ow = 0; ow < kOutW; ++ow)");
      out.line("const cj_index iw = ow * kStrideW - kPadLeft + kw * kDilationW;");
      out.line("if (iw < 0 || iw >= kInW) continue;");
      out.line("acc = cj_fma(to_acc(CJ_LDG(x, x_offset(n, ih, iw, c))),");
      out.line("             to_acc(CJ_LDG(y, y_offset(n, oh, ow, o))), acc);");
      out.close();
      out.close();
      out.close();
      out.line("CJ_STG(w, e, from_acc(acc));");
      break;
  }
  out.close();
  out.close();
}

}  // namespace convjit::codegen::cuda_gen
