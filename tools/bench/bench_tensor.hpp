// The benchmark's tensors: bytes on a cache line in any convjit dtype, filled with values every
// implementation reads the same (multiples of 2^-7 in [-1, 1] for the 16-bit types).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "convjit/convjit.hpp"

namespace convjit::bench {

class BenchTensor {
 public:
  BenchTensor(DType dtype, std::vector<std::int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t elements() const { return elements_; }
  void* data() { return bytes_.data(); }
  TensorView view() { return TensorView{dtype_, shape_, bytes_.data()}; }

  double get(std::int64_t i) const;
  void fill_random(std::mt19937& rng);

 private:
  DType dtype_;
  std::vector<std::int64_t> shape_;
  std::int64_t elements_ = 0;
  std::vector<std::byte, CacheLineAllocator<std::byte>> bytes_;  // as a framework aligns tensors
};

/// Largest |got - want| over the tensors, relative to the largest |want|.
double relative_error(const BenchTensor& got, const BenchTensor& want);

}  // namespace convjit::bench
