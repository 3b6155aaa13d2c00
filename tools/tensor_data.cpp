// Conversions between .npy arrays and op tensors, and reproducible random operands.
#include "tools/tensor_data.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "convjit/numeric.hpp"
namespace convjit::cli {

NpyDType npy_dtype_for(DType dtype) {
  switch (dtype) {
    case DType::kHalf: return NpyDType::kFloat16;
    case DType::kFloat64: return NpyDType::kFloat64;
    case DType::kBFloat16:
    case DType::kFloat32: return NpyDType::kFloat32;
  }
  return NpyDType::kFloat32;
}

namespace {

DType dtype_of(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::kFloat16: return DType::kHalf;
    case NpyDType::kFloat32: return DType::kFloat32;
    case NpyDType::kFloat64: return DType::kFloat64;
  }
  return DType::kFloat32;
}

}  // namespace

Tensor tensor_from_npy(const NpyArray& array, DType dtype) {
  Tensor tensor(dtype, array.shape);
  const DType source = dtype_of(array.dtype);
  const std::int64_t n = array.elements();
  if (source == dtype) {
    if (!array.data.empty()) std::memcpy(tensor.data(), array.data.data(), array.data.size());
    return tensor;
  }
  // float64 -> float16/bfloat16 goes through float; the second rounding can differ from a direct
  // one only in a tie, which random and real data practically never hit.
  for (std::int64_t i = 0; i < n; ++i) {
    store_from_double(dtype, tensor.data(), i, load_as_double(source, array.data.data(), i));
  }
  return tensor;
}

NpyArray npy_from_tensor(const Tensor& tensor) {
  NpyArray array;
  array.dtype = npy_dtype_for(tensor.dtype());
  array.shape = tensor.shape();
  const std::int64_t n = tensor.elements();
  array.data.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(npy_dtype_size(array.dtype)));
  const DType target = dtype_of(array.dtype);
  if (target == tensor.dtype()) {
    if (n > 0) std::memcpy(array.data.data(), tensor.data(), array.data.size());
    return array;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    store_from_double(target, array.data.data(), i, load_as_double(tensor.dtype(), tensor.data(), i));
  }
  return array;
}

void fill_random(Tensor& tensor, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const std::int64_t n = tensor.elements();
  for (std::int64_t i = 0; i < n; ++i) store_from_double(tensor.dtype(), tensor.data(), i, dist(engine));
}

}  // namespace convjit::cli
