// The naive reference, written straight from SEMANTICS.md's formulas with direct loops. It shares
// nothing with the IR or the backends except ConvProblem's resolved sizes and element strides, so
// a bug in lowering cannot hide in the oracle too. Backprop data is written as the adjoint
// scatter (each out_backprop element times each tap added into the input position it came from),
// the opposite form to the gather the IR uses.
#include "reference/naive.hpp"

#include <array>
#include <cstdint>
#include <vector>

#include "convjit/numeric.hpp"

namespace convjit {
namespace {

using Strides = std::array<std::int64_t, 4>;

/// Element offset of logical index (a, b, c, d) under `strides` ({n,h,w,c} or {kh,kw,i,o}).
std::int64_t offset(const Strides& s, std::int64_t a, std::int64_t b, std::int64_t c,
                    std::int64_t d) {
  return a * s[0] + b * s[1] + c * s[2] + d * s[3];
}

/// The input position a tap reads, or -1 when it falls in the padding.
std::int64_t input_pos(std::int64_t out, std::int64_t stride, std::int64_t pad, std::int64_t k,
                       std::int64_t dilation, std::int64_t extent) {
  const std::int64_t pos = out * stride - pad + k * dilation;
  return (pos >= 0 && pos < extent) ? pos : -1;
}

struct Views {
  const ConvProblem& p;
  Strides xs, ws, ys;
  DType dt;
  const OperandPointers& ops;

  double x(std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t c) const {
    return load_as_double(dt, ops.x, offset(xs, n, h, w, c));
  }
  double f(std::int64_t kh, std::int64_t kw, std::int64_t i, std::int64_t o) const {
    return load_as_double(dt, ops.w, offset(ws, kh, kw, i, o));
  }
  double y(std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t c) const {
    return load_as_double(dt, ops.y, offset(ys, n, h, w, c));
  }
};

/// y[n,oh,ow,oc] = sum over kh, kw, i of x[n, oh*sh - pt + kh*dh, ow*sw - pl + kw*dw, g*fi + i]
/// * f[kh,kw,i,oc], where g is oc's group.
void forward(const Views& v) {
  const ConvProblem& p = v.p;
  const std::int64_t ocpg = p.oc_per_group();
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t oh = 0; oh < p.oh; ++oh) {
      for (std::int64_t ow = 0; ow < p.ow; ++ow) {
        for (std::int64_t oc = 0; oc < p.oc; ++oc) {
          const std::int64_t g = oc / ocpg;
          double sum = 0.0;
          for (std::int64_t kh = 0; kh < p.kh; ++kh) {
            const std::int64_t ih = input_pos(oh, p.stride_h, p.pad_top, kh, p.dilation_h, p.ih);
            if (ih < 0) continue;
            for (std::int64_t kw = 0; kw < p.kw; ++kw) {
              const std::int64_t iw = input_pos(ow, p.stride_w, p.pad_left, kw, p.dilation_w, p.iw);
              if (iw < 0) continue;
              for (std::int64_t i = 0; i < p.filter_in; ++i) {
                sum += v.x(n, ih, iw, g * p.filter_in + i) * v.f(kh, kw, i, oc);
              }
            }
          }
          store_from_double(p.dtype, v.ops.y, offset(v.ys, n, oh, ow, oc), sum);
        }
      }
    }
  }
}

/// The adjoint of forward() with respect to x: every dy * f product is added into the input
/// position it came from; products that came from padding are dropped.
void backprop_data(const Views& v) {
  const ConvProblem& p = v.p;
  const std::int64_t ocpg = p.oc_per_group();
  // X is dense, so its element offsets are a permutation of [0, elements): accumulate by offset.
  std::vector<double> acc(static_cast<std::size_t>(p.elements(TensorRole::kX)), 0.0);
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t oh = 0; oh < p.oh; ++oh) {
      for (std::int64_t ow = 0; ow < p.ow; ++ow) {
        for (std::int64_t oc = 0; oc < p.oc; ++oc) {
          const double dy = v.y(n, oh, ow, oc);
          const std::int64_t g = oc / ocpg;
          for (std::int64_t kh = 0; kh < p.kh; ++kh) {
            const std::int64_t ih = input_pos(oh, p.stride_h, p.pad_top, kh, p.dilation_h, p.ih);
            if (ih < 0) continue;
            for (std::int64_t kw = 0; kw < p.kw; ++kw) {
              const std::int64_t iw = input_pos(ow, p.stride_w, p.pad_left, kw, p.dilation_w, p.iw);
              if (iw < 0) continue;
              for (std::int64_t i = 0; i < p.filter_in; ++i) {
                acc[static_cast<std::size_t>(offset(v.xs, n, ih, iw, g * p.filter_in + i))] +=
                    dy * v.f(kh, kw, i, oc);
              }
            }
          }
        }
      }
    }
  }
  for (std::size_t e = 0; e < acc.size(); ++e) {
    store_from_double(p.dtype, v.ops.x, static_cast<std::int64_t>(e), acc[e]);
  }
}

/// df[kh,kw,i,oc] = sum over n, oh, ow of x[n, ih, iw, g*fi + i] * dy[n,oh,ow,oc].
void backprop_filter(const Views& v) {
  const ConvProblem& p = v.p;
  const std::int64_t ocpg = p.oc_per_group();
  for (std::int64_t kh = 0; kh < p.kh; ++kh) {
    for (std::int64_t kw = 0; kw < p.kw; ++kw) {
      for (std::int64_t i = 0; i < p.filter_in; ++i) {
        for (std::int64_t oc = 0; oc < p.oc; ++oc) {
          const std::int64_t c = (oc / ocpg) * p.filter_in + i;
          double sum = 0.0;
          for (std::int64_t n = 0; n < p.n; ++n) {
            for (std::int64_t oh = 0; oh < p.oh; ++oh) {
              const std::int64_t ih = input_pos(oh, p.stride_h, p.pad_top, kh, p.dilation_h, p.ih);
              if (ih < 0) continue;
              for (std::int64_t ow = 0; ow < p.ow; ++ow) {
                const std::int64_t iw =
                    input_pos(ow, p.stride_w, p.pad_left, kw, p.dilation_w, p.iw);
                if (iw < 0) continue;
                sum += v.x(n, ih, iw, c) * v.y(n, oh, ow, oc);
              }
            }
          }
          store_from_double(p.dtype, v.ops.w, offset(v.ws, kh, kw, i, oc), sum);
        }
      }
    }
  }
}

}  // namespace

void run_reference(const ConvProblem& problem, const OperandPointers& operands) {
  const TensorRole out_role = problem.output_role();
  if (problem.is_empty()) {
    // TensorFlow returns zeros for empty operands; the output itself may also be empty.
    void* out = operands.get(out_role);
    const std::int64_t count = problem.elements(out_role);
    for (std::int64_t e = 0; e < count; ++e) store_from_double(problem.dtype, out, e, 0.0);
    return;
  }
  const Views views{problem,
                    problem.strides(TensorRole::kX),
                    problem.strides(TensorRole::kW),
                    problem.strides(TensorRole::kY),
                    problem.dtype,
                    operands};
  switch (problem.direction) {
    case ConvDirection::kForward:
      forward(views);
      return;
    case ConvDirection::kBackpropData:
      backprop_data(views);
      return;
    case ConvDirection::kBackpropFilter:
      backprop_filter(views);
      return;
  }
}

}  // namespace convjit
