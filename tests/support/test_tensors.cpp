#include "support/test_tensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "convjit/numeric.hpp"

namespace convjit::testing {

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (std::int64_t d : shape) count *= d;
  return count;
}

TestTensor::TestTensor(DType dtype, std::vector<std::int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)), elements_(element_count(shape_)) {
  storage_.resize(static_cast<std::size_t>(elements_) *
                  static_cast<std::size_t>(dtype_size(dtype_)));
}

double TestTensor::get(std::int64_t i) const { return load_as_double(dtype_, storage_.data(), i); }

void TestTensor::set(std::int64_t i, double value) {
  store_from_double(dtype_, storage_.data(), i, value);
}

void TestTensor::fill(double value) {
  for (std::int64_t i = 0; i < elements_; ++i) set(i, value);
}

std::vector<double> TestTensor::to_doubles() const {
  std::vector<double> out(static_cast<std::size_t>(elements_));
  for (std::int64_t i = 0; i < elements_; ++i) out[static_cast<std::size_t>(i)] = get(i);
  return out;
}

TensorView TestTensor::view() const {
  // Views are how outputs are passed too, so they carry a writable pointer.
  return TensorView{dtype_, shape_, const_cast<std::byte*>(storage_.data())};
}

TestTensor random_tensor(DType dtype, std::vector<std::int64_t> shape, std::uint64_t seed) {
  TestTensor t(dtype, std::move(shape));
  std::mt19937_64 rng(seed);
  const bool narrow = dtype == DType::kHalf || dtype == DType::kBFloat16;
  std::uniform_int_distribution<int> grid(-128, 128);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (std::int64_t i = 0; i < t.elements(); ++i) {
    // A 2^-7 grid has at most 8 significant bits: exact in bfloat16 and half alike.
    const double v = narrow ? grid(rng) / 128.0 : uniform(rng);
    t.set(i, v);  // float32 rounds the double once; the stored value is what the test uses
  }
  return t;
}

TestTensor from_tensor(const Tensor& tensor) {
  TestTensor t(tensor.dtype(), tensor.shape());
  if (tensor.bytes() > 0) std::memcpy(t.data(), tensor.data(), tensor.bytes());
  return t;
}

Tensor to_tensor(const TestTensor& tensor) {
  Tensor t(tensor.dtype(), tensor.shape());
  if (t.bytes() > 0) std::memcpy(t.data(), tensor.data(), t.bytes());
  return t;
}

double view_get(const TensorView& view, std::int64_t i) {
  return load_as_double(view.dtype, view.data, i);
}

double dot(const TensorView& a, const TensorView& b) {
  const std::int64_t count = element_count(a.shape);
  EXPECT_EQ(count, element_count(b.shape)) << "dot of differently sized tensors";
  double sum = 0.0;
  for (std::int64_t i = 0; i < count; ++i) sum += view_get(a, i) * view_get(b, i);
  return sum;
}

namespace {

/// Per-element error; NaN when exactly one side is NaN, so a missed write shows up.
double element_error(double got, double want) {
  if (std::isnan(got) && std::isnan(want)) return 0.0;
  if (std::isnan(got) || std::isnan(want)) return std::numeric_limits<double>::quiet_NaN();
  if (got == want) return 0.0;  // equal infinities
  return std::fabs(got - want);
}

template <typename Measure>
double max_error(const TensorView& got, const TensorView& want, Measure measure) {
  const std::int64_t count = element_count(want.shape);
  EXPECT_EQ(count, element_count(got.shape)) << "compared tensors differ in size";
  double worst = 0.0;
  for (std::int64_t i = 0; i < count; ++i) {
    const double w = view_get(want, i);
    const double e = measure(element_error(view_get(got, i), w), w);
    if (std::isnan(e)) return e;
    worst = std::max(worst, e);
  }
  return worst;
}

}  // namespace

double max_abs_error(const TensorView& got, const TensorView& want) {
  return max_error(got, want, [](double e, double) { return e; });
}

double max_rel_error(const TensorView& got, const TensorView& want) {
  return max_error(got, want, [](double e, double w) { return e / std::max(std::fabs(w), 1.0); });
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
      return 0x1p-11;
    case DType::kBFloat16:
      return 0x1p-8;
    case DType::kFloat32:
      return 0x1p-24;
    case DType::kFloat64:
      return 0x1p-53;
  }
  return 0.0;
}

double accumulate_roundoff(DType dtype) {
  return dtype == DType::kFloat64 ? unit_roundoff(DType::kFloat64) : unit_roundoff(DType::kFloat32);
}

Tolerance tolerance(DType dtype, std::int64_t reduction_length) {
  // Terms are bounded by 1, so a recursive sum of L of them is off by at most about L^2 * u in
  // the worst case and ~sqrt(L) * L * u typically; L * L * u with a floor keeps the bound safe
  // for any summation order a backend picks while still catching a single wrong term (>= 2^-14
  // for half/bfloat16 grids, ~1e-3 for random float data at these sizes).
  const double length = static_cast<double>(std::max<std::int64_t>(reduction_length, 1));
  const double acc = accumulate_roundoff(dtype);
  Tolerance tol;
  tol.abs = 4.0 * acc * length * std::max(1.0, std::sqrt(length)) + 2.0 * acc;
  // Both sides round the final sum once to the dtype; they may land one ulp apart.
  tol.rel = 2.0 * unit_roundoff(dtype);
  return tol;
}

std::int64_t reduction_length(const ConvProblem& p) {
  switch (p.direction) {
    case ConvDirection::kForward:
      return p.kh * p.kw * p.filter_in;
    case ConvDirection::kBackpropData:
      return p.kh * p.kw * p.oc_per_group();
    case ConvDirection::kBackpropFilter:
      return p.n * p.oh * p.ow;
  }
  return 1;
}

::testing::AssertionResult all_close(const TensorView& got, const TensorView& want, Tolerance tol) {
  if (got.shape != want.shape) {
    return ::testing::AssertionFailure()
           << "shape " << shape_text(got.shape) << " != expected " << shape_text(want.shape);
  }
  const std::int64_t count = element_count(want.shape);
  std::int64_t bad = 0;
  std::int64_t worst_index = -1;
  double worst_excess = 0.0;
  for (std::int64_t i = 0; i < count; ++i) {
    const double w = view_get(want, i);
    const double e = element_error(view_get(got, i), w);
    const double limit = tol.abs + tol.rel * std::fabs(w);
    if (std::isnan(e) || e > limit) {
      ++bad;
      const double excess = std::isnan(e) ? std::numeric_limits<double>::infinity() : e / limit;
      if (worst_index < 0 || excess > worst_excess) {
        worst_index = i;
        worst_excess = excess;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fmt::format(
             "{} of {} elements out of tolerance (abs {:.3g}, rel {:.3g}); worst at "
             "flat index {}: got {:.9g}, want {:.9g}",
             bad, count, tol.abs, tol.rel, worst_index, view_get(got, worst_index),
             view_get(want, worst_index));
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

}  // namespace convjit::testing
