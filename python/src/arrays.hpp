// Arrays from Python for convjit's C ABI: anything with __dlpack__ or the buffer protocol
// (NumPy, PyTorch, JAX, TensorFlow, CuPy; ml_dtypes.bfloat16 NumPy arrays too), checked for
// dtype, layout and device, and results made as the caller's kind of array.
#pragma once

#include <convjit/convjit.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <array>
#include <cstdint>
#include <string>

namespace convjit::python {

namespace nb = nanobind;

/// The library an array came from; results are returned as the same kind.
enum class Framework { kNumpy, kTorch, kJax, kTensorflow, kCupy, kOther };

/// Where an array's memory lives: "cpu" or "cuda:N" (the compile option's spelling).
struct Device {
  int type = nb::device::cpu::value;
  int id = 0;
  bool is_cuda() const { return type == nb::device::cuda::value; }
  std::string name() const;
  bool operator==(const Device& other) const {
    return is_cuda() == other.is_cuda() && (!is_cuda() || id == other.id);
  }
};

/// One imported array: a dense row-major 4-D tensor as convjit_run reads it.
struct Array {
  nb::object source;         // the caller's object (an `out` array is returned as it is)
  nb::ndarray<nb::ro> view;  // keeps the import (and its memory) alive
  convjit_dtype dtype = CONVJIT_FLOAT32;
  Device device;
  Framework framework = Framework::kOther;
  std::array<std::int64_t, 4> shape{};
  std::size_t bytes = 0;

  void* data() const { return const_cast<void*>(view.data()); }
  convjit_tensor tensor() const;
};

/// Imports `object` (argument `name` of `op`, for messages). Refuses, with convjit.Error, what
/// convjit cannot read in place: another dtype, a rank other than 4, strides that are not
/// row-major, memory on a device other than the CPU or a CUDA GPU, a read-only `out`.
Array import_array(nb::handle object, const char* name, const std::string& op, bool writable);

/// A new array of `framework`'s kind (NumPy for kOther) for a result on `device`.
struct Output {
  nb::object object;
  void* data = nullptr;
};
Output make_output(Framework framework, convjit_dtype dtype,
                   const std::array<std::int64_t, 4>& shape, const Device& device);

/// The framework's current CUDA stream for `device` (torch, CuPy); nullptr (the default
/// stream) for the others.
void* current_stream(Framework framework, const Device& device);

/// "float16", "bfloat16", "float32", "float64".
const char* dtype_name(convjit_dtype dtype);
/// TensorFlow's spelling in its messages: "half", "bfloat16", "float", "double".
const char* tf_dtype_name(convjit_dtype dtype);
/// Parses "float16"/"half", "bfloat16", "float32"/"float", "float64"/"double", or a dtype
/// object of NumPy, ml_dtypes, PyTorch, JAX or TensorFlow.
convjit_dtype parse_dtype(nb::handle dtype);

/// Raises convjit.Error (a ValueError) with `message`; its `status` attribute names the C ABI's
/// status ("INVALID_ARGUMENT", "UNIMPLEMENTED", ...).
[[noreturn]] void raise_error(const std::string& message, const char* status = "INVALID_ARGUMENT");
/// The convjit.Error type, set once at import.
void set_error_type(nb::handle type);

}  // namespace convjit::python
