// Each op as implicit GEMMs: the operand gathers (element-offset functions) of the forward,
// input-gradient (one GEMM per stride-residue class) and filter-gradient GEMMs. The FFMA and
// tensor-core kernel emitters share them.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/cuda/cuda_gemm_shape.hpp"
#include "codegen/cuda/cuda_generators.hpp"

namespace convjit::codegen::cuda_gen {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

GemmSpec forward_spec(const CudaPlan& plan) {
  const ConvProblem& p = plan.problem;
  GemmSpec s;
  s.symbol = plan.kernel_name;
  s.tag = "fwd";
  s.comment = "y[m = (n, oh, ow), n = oc in group] = sum over k = (kh, kw, i) of x * w";
  s.m = p.n * p.oh * p.ow;
  s.n = p.oc_per_group();
  s.k = p.kh * p.kw * p.filter_in;
  s.a = 'x';
  s.b = 'w';
  s.c = 'y';
  s.a_offset = {
      "const cj_index ow = m % kOutW, oh = (m / kOutW) % kOutH, n = m / (kOutW * kOutH);",
      "const cj_index i = k % kFilterIn, kw = (k / kFilterIn) % kKW, kh = k / (kFilterIn * kKW);",
      "const cj_index ih = oh * kStrideH - kPadTop + kh * kDilationH;",
      "const cj_index iw = ow * kStrideW - kPadLeft + kw * kDilationW;",
      "if (ih < 0 || ih >= kInH || iw < 0 || iw >= kInW) return -1;",
      "return x_offset(n, ih, iw, group * kFilterIn + i);"};
  // k = (kh, kw, i) is w's own HWIO order, so the row offset is k * kOutC.
  s.b_offset = {"return k * kOutC + group * kOutCPerGroup + col;"};
  s.c_offset = {"const cj_index ow = m % kOutW, oh = (m / kOutW) % kOutH, n = m / (kOutW * kOutH);",
                "return y_offset(n, oh, ow, group * kOutCPerGroup + col);"};
  s.k_per_split = s.k;
  return s;
}

GemmSpec residue_spec(const CudaPlan& plan, const ResidueClass& rc) {
  const ConvProblem& p = plan.problem;
  const ResidueAxis& h = rc.h;
  const ResidueAxis& w = rc.w;
  GemmSpec s;
  const bool single = p.stride_h == 1 && p.stride_w == 1;
  s.tag = single ? std::string("dgrad") : fmt::format("class_h{}w{}", h.residue, w.residue);
  s.symbol = single ? plan.kernel_name : plan.kernel_name + "_" + s.tag;
  s.comment = fmt::format(
      "input rows {} + {}*j (j < {}) with taps kh = {} + {}*t (t < {}); columns {} + {}*j "
      "(j < {}) with taps kw = {} + {}*t (t < {})",
      h.first, p.stride_h, h.count, h.tap0, h.tap_step, h.taps, w.first, p.stride_w, w.count,
      w.tap0, w.tap_step, w.taps);
  s.m = rc.m(p);
  s.n = p.filter_in;
  s.k = rc.k(p);
  s.a = 'y';
  s.b = 'w';
  s.c = 'x';
  // m = (n, jh, jw); k = (th, tw, o) with o fastest.
  const std::string m_split = fmt::format(
      "const cj_index jw = m % {0}, jh = (m / {0}) % {1}, n = m / ({0} * {1});", w.count, h.count);
  const std::string k_split = fmt::format(
      "const cj_index o = k % kOutCPerGroup, tw = (k / kOutCPerGroup) % {0}, th = k / "
      "(kOutCPerGroup * {0});",
      std::max<std::int64_t>(w.taps, 1));
  s.a_offset = {m_split,
                k_split,
                fmt::format("const cj_index oh = jh + ({}) - th * {};", h.out0, h.out_step),
                fmt::format("const cj_index ow = jw + ({}) - tw * {};", w.out0, w.out_step),
                "if (oh < 0 || oh >= kOutH || ow < 0 || ow >= kOutW) return -1;",
                "return y_offset(n, oh, ow, group * kOutCPerGroup + o);"};
  s.b_offset = {k_split, fmt::format("return w_offset({} + th * {}, {} + tw * {}, col, group * "
                                     "kOutCPerGroup + o);",
                                     h.tap0, h.tap_step, w.tap0, w.tap_step)};
  s.c_offset = {m_split, fmt::format("return x_offset(n, {} + jh * {}, {} + jw * {}, group * "
                                     "kFilterIn + col);",
                                     h.first, p.stride_h, w.first, p.stride_w)};
  s.k_per_split = s.k;
  return s;
}

GemmSpec filter_spec(const CudaPlan& plan) {
  const ConvProblem& p = plan.problem;
  GemmSpec s;
  s.symbol = plan.kernel_name;
  s.tag = "wgrad";
  s.comment = "w[m = (kh, kw, i), n = oc in group] = sum over k = (n, oh, ow) of x * dy";
  s.m = p.kh * p.kw * p.filter_in;
  s.n = p.oc_per_group();
  s.k = p.n * p.oh * p.ow;
  s.a = 'x';
  s.b = 'y';
  s.c = 'w';
  const std::string k_split =
      "const cj_index ow = k % kOutW, oh = (k / kOutW) % kOutH, n = k / (kOutW * kOutH);";
  s.a_offset = {
      "const cj_index i = m % kFilterIn, kw = (m / kFilterIn) % kKW, kh = m / (kFilterIn * kKW);",
      k_split,
      "const cj_index ih = oh * kStrideH - kPadTop + kh * kDilationH;",
      "const cj_index iw = ow * kStrideW - kPadLeft + kw * kDilationW;",
      "if (ih < 0 || ih >= kInH || iw < 0 || iw >= kInW) return -1;",
      "return x_offset(n, ih, iw, group * kFilterIn + i);"};
  s.b_offset = {k_split, "return y_offset(n, oh, ow, group * kOutCPerGroup + col);"};
  // m = (kh, kw, i) is w's HWIO order without o.
  s.c_offset = {"return m * kOutC + group * kOutCPerGroup + col;"};
  s.split_k = plan.split_k;
  s.k_per_split = ceil_div(s.k, plan.split_k);
  return s;
}

}  // namespace

std::vector<GemmSpec> gemm_specs(const CudaPlan& plan) {
  switch (plan.problem.direction) {
    case ConvDirection::kForward:
      return {forward_spec(plan)};
    case ConvDirection::kBackpropData: {
      std::vector<GemmSpec> specs;
      for (const ResidueClass& rc : residue_classes(plan.problem)) {
        specs.push_back(residue_spec(plan, rc));
      }
      return specs;
    }
    case ConvDirection::kBackpropFilter:
      return {filter_spec(plan)};
  }
  return {};
}

void emit_residue_dispatch_kernel(CodeWriter& out, const CudaPlan& plan,
                                  const std::vector<GemmSpec>& specs,
                                  const std::vector<CudaLaunch>& classes, const GemmCtaForm& form,
                                  CudaLaunch* launch) {
  // Every class has the same N (the input channels) and CTA: only the M tiles differ.
  std::uint32_t blocks = 0;
  for (const CudaLaunch& c : classes) blocks += c.grid[0];
  launch->symbol = plan.kernel_name;
  launch->block = classes.front().block;
  launch->grid = {blocks, classes.front().grid[1], 1};
  launch->shared_bytes = plan.shared_bytes();
  out.line("// The {} residue classes in one launch: each block runs one class's CTA, the classes'",
           specs.size());
  out.line("// M tiles one after another along x (no launch gaps, no tail per class), the classes");
  out.line("// with the most taps (the longest CTAs) first so that the short ones fill the end.");
  out.open("CJ_KERNEL void CJ_LAUNCH_BOUNDS({}, 2) {}(cj_args args)", launch->block[0],
           launch->symbol);
  out.line("CJ_SHARED({}, a_tile, {});", form.shared_type, form.a_elements);
  out.line("CJ_SHARED({}, b_tile, {});", form.shared_type, form.b_elements);
  out.line("const cj_index block = blockIdx.x;");
  std::vector<std::size_t> order(specs.size());
  for (std::size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return specs[a].k > specs[b].k; });
  std::uint32_t start = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t c = order[i];
    const std::uint32_t end = start + classes[c].grid[0];
    const std::string call = fmt::format("{}_cta(args, block - {}, a_tile, b_tile);",
                                         specs[c].symbol, start);
    if (i + 1 < order.size()) {
      out.line("if (block < {}) {{ {} return; }}", end, call);
    } else {
      out.line("{}", call);
    }
    start = end;
  }
  out.close();
  out.blank();
}

void emit_gemm_offsets(CodeWriter& out, const GemmSpec& spec) {
  out.line("// {}: {}", spec.tag, spec.comment);
  out.line("// GEMM M = {}, N = {}, K = {} per group; offsets of -1 read a zero.", spec.m, spec.n,
           spec.k);
  auto function = [&](std::string_view name, std::string_view args,
                      const std::vector<std::string>& body) {
    out.open("CJ_DEVICE cj_index {}_{}(cj_index group, {})", spec.tag, name, args);
    for (const std::string& l : body) out.line("{}", l);
    out.close();
  };
  function("a_offset", "cj_index m, cj_index k", spec.a_offset);
  function("b_offset", "cj_index k, cj_index col", spec.b_offset);
  function("c_offset", "cj_index m, cj_index col", spec.c_offset);
  out.blank();
}

}  // namespace convjit::codegen::cuda_gen
