// Tensors for the kernel fuzzer: each one's last byte sits right before an inaccessible page, so
// a kernel that reads or writes one element past the end faults at once (the sanitizers do not
// see inside generated code), and element values are read and written as doubles in any dtype,
// Inf and NaN included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "convjit/convjit.hpp"

namespace convjit::fuzz {

/// A dense tensor in its own mapping: data pages, then one PROT_NONE page that the data ends
/// exactly at. The start is wherever that puts it, aligned only to the element size, as a
/// framework's view into a larger buffer can be. An empty tensor points at the guard page.
class GuardedTensor {
 public:
  GuardedTensor(DType dtype, std::vector<std::int64_t> shape);
  ~GuardedTensor();
  GuardedTensor(const GuardedTensor&) = delete;
  GuardedTensor& operator=(const GuardedTensor&) = delete;

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t elements() const { return elements_; }
  void* data() const { return data_; }
  TensorView view() const { return TensorView{dtype_, shape_, data_}; }

  /// Element `i` as double (half and bfloat16 widened exactly).
  double get(std::int64_t i) const;
  /// Stores `value` rounded to the dtype (round to nearest even; Inf and NaN kept).
  void set(std::int64_t i, double value);

 private:
  DType dtype_;
  std::vector<std::int64_t> shape_;
  std::int64_t elements_ = 0;
  std::size_t mapped_ = 0;
  void* base_ = nullptr;
  void* data_ = nullptr;
};

/// The same element conversions on plain memory (the reference's output).
double load_element(DType dtype, const void* data, std::int64_t i);
void store_element(DType dtype, void* data, std::int64_t i, double value);

}  // namespace convjit::fuzz
