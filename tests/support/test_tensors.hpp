// Test tensors: seeded random data per dtype, error measures, tolerances scaled by reduction
// length and dtype, double-precision dot products, and bridges to the public API's tensor types.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "convjit/convjit.hpp"
#include "convjit/types.hpp"
#include "frontend/problem.hpp"

namespace convjit::testing {

/// Number of elements of `shape` (1 for rank 0).
std::int64_t element_count(const std::vector<std::int64_t>& shape);

/// An owned dense tensor for tests; unlike convjit::Tensor it needs nothing from the runtime.
class TestTensor {
 public:
  TestTensor() = default;
  /// Zero-filled.
  TestTensor(DType dtype, std::vector<std::int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t elements() const { return elements_; }
  void* data() { return storage_.data(); }
  const void* data() const { return storage_.data(); }

  /// Element `i` in row-major order, as double.
  double get(std::int64_t i) const;
  /// Stores `value` rounded once to the dtype.
  void set(std::int64_t i, double value);
  /// Sets every element to `value` (rounded to the dtype); NaN fills are useful to catch
  /// outputs a kernel forgot to write.
  void fill(double value);
  /// The elements as doubles, row-major.
  std::vector<double> to_doubles() const;

  /// A view for Kernel::run and the TensorFlow-shaped helpers. The data is writable.
  TensorView view() const;

 private:
  DType dtype_ = DType::kFloat32;
  std::vector<std::int64_t> shape_;
  std::int64_t elements_ = 0;
  std::vector<std::byte, CacheLineAllocator<std::byte>> storage_;
};

/// Uniform values in [-1, 1], exactly representable in `dtype` (half and bfloat16 use a grid of
/// multiples of 2^-7 so products and short sums stay exact in float). Same seed, same tensor.
TestTensor random_tensor(DType dtype, std::vector<std::int64_t> shape, std::uint64_t seed);

/// Copies a convjit::Tensor (a helper's result) into a TestTensor.
TestTensor from_tensor(const Tensor& tensor);
/// Copies a TestTensor into an owning convjit::Tensor.
Tensor to_tensor(const TestTensor& tensor);

/// Element `i` of any view, as double.
double view_get(const TensorView& view, std::int64_t i);

/// Sum of a[i] * b[i] in double. The views must have the same element count.
double dot(const TensorView& a, const TensorView& b);

/// max |got - want| over all elements (NaN if either holds a NaN where the other does not).
double max_abs_error(const TensorView& got, const TensorView& want);
/// max |got - want| / max(|want|, 1): relative where values are large, absolute near zero.
double max_rel_error(const TensorView& got, const TensorView& want);

/// Unit roundoff of `dtype` (half 2^-11, bfloat16 2^-8, float 2^-24, double 2^-53).
double unit_roundoff(DType dtype);
/// Unit roundoff of the type `dtype` accumulates in (half and bfloat16 accumulate in float).
double accumulate_roundoff(DType dtype);

/// |got - want| <= abs + rel * |want| per element.
struct Tolerance {
  double abs = 0.0;
  double rel = 0.0;
};

/// Tolerance for a result that sums `reduction_length` products of values in [-1, 1]: the
/// accumulation error grows with the length (in the accumulation type), plus one rounding of
/// the output to `dtype` on each side of the comparison.
Tolerance tolerance(DType dtype, std::int64_t reduction_length);

/// Products summed into one element of the problem's output (the larger of the per-element
/// counts, padding taps included): forward kh*kw*filter_in, backprop data kh*kw*oc_per_group,
/// backprop filter n*oh*ow.
std::int64_t reduction_length(const ConvProblem& problem);

/// Checks every element against `tol`; on failure names the worst element and the counts.
::testing::AssertionResult all_close(const TensorView& got, const TensorView& want, Tolerance tol);

/// Shape formatted as "[1,2,3]".
std::string shape_text(const std::vector<std::int64_t>& shape);

}  // namespace convjit::testing
