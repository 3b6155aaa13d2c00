// A compiled convjit kernel as Python sees it (convjit.Kernel), over the C ABI's handle.
#pragma once

#include <convjit/convjit.h>

#include <array>
#include <convjit/types.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "arrays.hpp"

namespace convjit::python {

/// What compile() needs besides the descriptor.
struct CompileRequest {
  std::string op;  // TensorFlow or Python op name
  convjit_dtype dtype = CONVJIT_FLOAT32;
  std::string device = "cpu";
  std::string backend;  // empty: the device's best
  int num_threads = 0;
  std::vector<std::int64_t> input, filter, out_backprop, strides, dilations, explicit_paddings;
  std::string padding, data_format;
};

/// The op's two operands as Kernel.run takes them, and their TensorFlow input positions.
struct OperandNames {
  const char* a;
  const char* b;
  int a_index;
  int b_index;
};

class Kernel {
 public:
  /// Compiles (or fetches from convjit's caches); raises convjit.Error with TensorFlow's text.
  static std::shared_ptr<Kernel> compile(const CompileRequest& request);
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  /// Runs on two arrays; writes `out` when given (and returns it), else returns a new array of
  /// the first array's kind. The GIL is released while the kernel runs. `parallel_for` (may be
  /// null) runs a CPU kernel's parallel loops on a framework's thread pool, for this run only.
  nb::object run(nb::handle a, nb::handle b, nb::handle out,
                 convjit_parallel_for_fn parallel_for = nullptr) const;
  /// The same on arrays already imported.
  nb::object run_arrays(const Array& a, const Array& b, nb::handle out,
                        convjit_parallel_for_fn parallel_for = nullptr) const;

  const std::string& name() const { return name_; }
  const std::string& backend() const { return backend_; }
  const std::string& device() const { return device_; }
  const std::string& descriptor() const { return descriptor_; }
  const std::string& op() const { return op_; }
  convjit_dtype dtype() const { return dtype_; }
  std::size_t workspace_bytes() const { return convjit_kernel_workspace_bytes(handle_); }
  const std::array<std::int64_t, 4>& operand_shape(int i) const {
    return shapes_[static_cast<std::size_t>(i)];
  }
  const OperandNames& operands() const { return operands_; }

 private:
  Kernel() = default;
  /// Refuses an operand of another dtype, shape or device; `tf_index` is its position among
  /// TensorFlow's inputs (for TensorFlow's dtype message), -1 for `out`.
  void check_operand(const Array& array, int index, const char* name, int tf_index) const;

  convjit_kernel* handle_ = nullptr;
  std::string name_, backend_, device_, descriptor_, op_;
  convjit_dtype dtype_ = CONVJIT_FLOAT32;
  std::array<std::array<std::int64_t, 4>, 3> shapes_{};
  OperandNames operands_{};
};

/// Parses an op name (TensorFlow's or its Python name).
OpKind parse_op(const std::string& name);
OperandNames operand_names(OpKind op);

/// Raises convjit.Error for a failed C call: this thread's convjit_last_error() and the status.
[[noreturn]] void raise_status(convjit_status status);

}  // namespace convjit::python
