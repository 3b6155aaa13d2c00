// ConvProblem's derived facts: user-visible shapes, element strides, sizes and FLOPs.
#include "frontend/problem.hpp"

namespace convjit {

TensorRole ConvProblem::output_role() const {
  switch (direction) {
    case ConvDirection::kForward: return TensorRole::kY;
    case ConvDirection::kBackpropData: return TensorRole::kX;
    case ConvDirection::kBackpropFilter: return TensorRole::kW;
  }
  return TensorRole::kY;
}

std::array<std::int64_t, 4> ConvProblem::shape(TensorRole role) const {
  if (role == TensorRole::kW) {
    // Depthwise users pass [KH,KW,C,M]; the same bytes are HWIO [KH,KW,1,C*M].
    if (depthwise) return {kh, kw, groups, oc_per_group()};
    return {kh, kw, filter_in, oc};
  }
  const bool is_x = role == TensorRole::kX;
  const std::int64_t h = is_x ? ih : oh;
  const std::int64_t w = is_x ? iw : ow;
  const std::int64_t c = is_x ? ic : oc;
  if (format == DataFormat::kNCHW) return {n, c, h, w};
  return {n, h, w, c};
}

namespace {

// a * b, where validation guarantees that a tensor's element count fits in int64: exact for a
// non-empty tensor (every partial product of its dims fits), and 0 on overflow, which only an
// empty tensor's other dims can cause (an input of [1, 2^62, 2, 0] is valid and holds nothing).
std::int64_t dim_product(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? 0 : product;
}

}  // namespace

std::array<std::int64_t, 4> ConvProblem::strides(TensorRole role) const {
  if (role == TensorRole::kW) {
    const std::int64_t io = dim_product(filter_in, oc);
    return {dim_product(kw, io), io, oc, 1};
  }
  const bool is_x = role == TensorRole::kX;
  const std::int64_t h = is_x ? ih : oh;
  const std::int64_t w = is_x ? iw : ow;
  const std::int64_t c = is_x ? ic : oc;
  // Logical order {n, h, w, c} whatever the memory order.
  if (format == DataFormat::kNCHW) {
    const std::int64_t hw = dim_product(h, w);
    return {dim_product(c, hw), w, 1, hw};
  }
  const std::int64_t wc = dim_product(w, c);
  return {dim_product(h, wc), wc, c, 1};
}

std::int64_t ConvProblem::elements(TensorRole role) const {
  const auto s = shape(role);
  if (s[0] == 0 || s[1] == 0 || s[2] == 0 || s[3] == 0) return 0;
  // Validation guarantees a non-empty tensor's element count fits in int64.
  return s[0] * s[1] * s[2] * s[3];
}

double ConvProblem::flops() const {
  return 2.0 * static_cast<double>(n) * static_cast<double>(oh) * static_cast<double>(ow) *
         static_cast<double>(oc) * static_cast<double>(kh) * static_cast<double>(kw) *
         static_cast<double>(filter_in);
}

bool ConvProblem::is_empty() const {
  return elements(TensorRole::kX) == 0 || elements(TensorRole::kW) == 0 ||
         elements(TensorRole::kY) == 0;
}

std::string_view direction_name(ConvDirection d) {
  switch (d) {
    case ConvDirection::kForward: return "forward";
    case ConvDirection::kBackpropData: return "backprop_data";
    case ConvDirection::kBackpropFilter: return "backprop_filter";
  }
  return "unknown_direction";
}

std::string_view role_name(TensorRole r) {
  switch (r) {
    case TensorRole::kX: return "x";
    case TensorRole::kW: return "w";
    case TensorRole::kY: return "y";
  }
  return "unknown_role";
}

}  // namespace convjit
