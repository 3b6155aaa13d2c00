// Error measures and tolerances for `convjit run --check`.
#include "tools/result_check.hpp"


#include <algorithm>
#include <cmath>
#include <limits>

#include "convjit/numeric.hpp"
#include "tools/tensor_data.hpp"

namespace convjit::cli {
namespace {

/// Spacing of the output dtype relative to a value (one rounding step, ulp at 1).
double output_ulp(DType dtype) {
  switch (dtype) {
    case DType::kHalf: return std::ldexp(1.0, -10);
    case DType::kBFloat16: return std::ldexp(1.0, -7);
    case DType::kFloat32: return std::ldexp(1.0, -23);
    case DType::kFloat64: return std::ldexp(1.0, -52);
  }
  return 0;
}

/// Unit roundoff of the accumulator: half types accumulate in float32 (SEMANTICS.md).
double accumulator_eps(DType dtype) {
  return dtype == DType::kFloat64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
}

std::int64_t product(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::int64_t reduction_length(const OpDescriptor& desc, const Tensor& a, const Tensor& b) {
  const bool depthwise = is_depthwise(desc.op);
  switch (desc.op) {
    case OpKind::kConv2D:
    case OpKind::kDepthwiseConv2dNative: {
      const auto& f = b.shape();  // filter HWIO
      if (f.size() != 4) return 1;
      return f[0] * f[1] * (depthwise ? 1 : f[2]);
    }
    case OpKind::kConv2DBackpropInput:
    case OpKind::kConv2DBackpropInputV2:
    case OpKind::kDepthwiseConv2dNativeBackpropInput: {
      const auto& f = a.shape();
      if (f.size() != 4) return 1;
      return f[0] * f[1] * f[3];
    }
    case OpKind::kConv2DBackpropFilter:
    case OpKind::kDepthwiseConv2dNativeBackpropFilter: {
      const auto& dy = b.shape();  // N*OH*OW = elements / channels
      if (dy.size() != 4) return 1;
      const std::int64_t channels = desc.data_format == DataFormat::kNHWC ? dy[3] : dy[1];
      return channels > 0 ? product(dy) / channels : 0;
    }
  }
  return 1;
}

double default_tolerance(DType dtype, std::int64_t reduction, double max_abs_a, double max_abs_b,
                         double max_abs_reference) {
  const double k = static_cast<double>(std::max<std::int64_t>(reduction, 1));
  return output_ulp(dtype) * max_abs_reference +
         8.0 * accumulator_eps(dtype) * k * max_abs_a * max_abs_b;
}

double max_abs(const Tensor& t) {
  double m = 0;
  const std::int64_t n = t.elements();
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = std::fabs(load_as_double(t.dtype(), t.data(), i));
    if (std::isnan(v)) return std::numeric_limits<double>::infinity();
    m = std::max(m, v);
  }
  return m;
}

CheckResult compare_results(const OpDescriptor& desc, const Tensor& a, const Tensor& b,
                            const Tensor& result, const Tensor& reference, double tolerance) {
  CheckResult r;
  const std::int64_t n = reference.elements();
  if (result.elements() != n || result.dtype() != reference.dtype()) {
    r.max_abs_error = std::numeric_limits<double>::infinity();
    r.max_rel_error = r.max_abs_error;
    return r;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const double got = load_as_double(result.dtype(), result.data(), i);
    const double want = load_as_double(reference.dtype(), reference.data(), i);
    double err = 0;
    if (std::isnan(got) || std::isnan(want)) {
      err = std::isnan(got) && std::isnan(want) ? 0 : std::numeric_limits<double>::infinity();
    } else if (got != want) {  // equal infinities are no error
      err = std::fabs(got - want);
    }
    r.max_abs_error = std::max(r.max_abs_error, err);
    if (!std::isnan(want)) r.max_abs_reference = std::max(r.max_abs_reference, std::fabs(want));
  }
  r.max_rel_error = r.max_abs_reference > 0 ? r.max_abs_error / r.max_abs_reference : r.max_abs_error;
  r.tolerance = tolerance >= 0 ? tolerance
                               : default_tolerance(desc.dtype, reduction_length(desc, a, b),
                                                   max_abs(a), max_abs(b), r.max_abs_reference);
  r.passed = r.max_abs_error <= r.tolerance;
  return r;
}

}  // namespace convjit::cli
