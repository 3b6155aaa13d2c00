// What the framework adapters' native parts share: a kernel handle that owns itself, the op
// descriptor built from TensorFlow's attributes, and a small table of compiled kernels keyed by
// the operand shapes (one op instance of a framework sees few shapes, usually one).
//
// Header-only and C++17, built with each framework's own compiler flags; it uses convjit's
// C ABI only (convjit.h), so no C++ type crosses from libconvjit into a framework's code.
#pragma once

#include <convjit/convjit.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace convjit_adapter {

/// The six ops, in TensorFlow's spelling (the C ABI's `op` field).
enum class Op { kConv2D, kConv2DBackpropInput, kConv2DBackpropFilter, kDepthwise,
                kDepthwiseBackpropInput, kDepthwiseBackpropFilter };

inline const char* op_name(Op op) {
  switch (op) {
    case Op::kConv2D: return "Conv2D";
    case Op::kConv2DBackpropInput: return "Conv2DBackpropInput";
    case Op::kConv2DBackpropFilter: return "Conv2DBackpropFilter";
    case Op::kDepthwise: return "DepthwiseConv2dNative";
    case Op::kDepthwiseBackpropInput: return "DepthwiseConv2dNativeBackpropInput";
    case Op::kDepthwiseBackpropFilter: return "DepthwiseConv2dNativeBackpropFilter";
  }
  return "";
}

/// The op named `name` (TensorFlow's spelling); false for another name.
inline bool parse_op(const std::string& name, Op* op) {
  for (Op candidate : {Op::kConv2D, Op::kConv2DBackpropInput, Op::kConv2DBackpropFilter,
                       Op::kDepthwise, Op::kDepthwiseBackpropInput, Op::kDepthwiseBackpropFilter}) {
    if (name == op_name(candidate)) {
      *op = candidate;
      return true;
    }
  }
  return false;
}

/// Input-gradient ops take `input_sizes` (values) before filter and out_backprop.
inline bool takes_input_sizes(Op op) {
  return op == Op::kConv2DBackpropInput || op == Op::kDepthwiseBackpropInput;
}
/// Filter-gradient ops take `filter_sizes` (values) between input and out_backprop.
inline bool takes_filter_sizes(Op op) {
  return op == Op::kConv2DBackpropFilter || op == Op::kDepthwiseBackpropFilter;
}

/// A compiled kernel; destroyed with its last reference.
using KernelPtr = std::shared_ptr<convjit_kernel>;

/// TensorFlow's attributes of one op instance.
struct Attrs {
  Op op = Op::kConv2D;
  std::string padding;
  std::string data_format = "NHWC";
  std::vector<std::int64_t> strides;
  std::vector<std::int64_t> dilations{1, 1, 1, 1};
  std::vector<std::int64_t> explicit_paddings;
};

/// The failure of a convjit call: its status and this thread's message.
struct Failure {
  convjit_status status = CONVJIT_OK;
  std::string message;
  bool ok() const { return status == CONVJIT_OK; }
};

inline Failure last_failure(convjit_status status) {
  return Failure{status, convjit_last_error()};
}

/// The C ABI descriptor of `attrs` for operands `a` and `b` (shapes in TensorFlow's argument
/// order) and the `sizes` values of the backprop ops; it points into its arguments.
inline convjit_op_desc make_desc(const Attrs& attrs, convjit_dtype dtype,
                                 const std::vector<std::int64_t>& sizes,
                                 const std::vector<std::int64_t>& a,
                                 const std::vector<std::int64_t>& b) {
  convjit_op_desc desc;
  std::memset(&desc, 0, sizeof desc);
  desc.op = op_name(attrs.op);
  desc.dtype = dtype;
  desc.padding = attrs.padding.c_str();
  desc.data_format = attrs.data_format.c_str();
  auto set = [](const std::vector<std::int64_t>& v, const std::int64_t** data, std::int32_t* len) {
    *data = v.empty() ? nullptr : v.data();
    *len = static_cast<std::int32_t>(v.size());
  };
  if (takes_input_sizes(attrs.op)) {
    set(sizes, &desc.input, &desc.input_len);
    set(a, &desc.filter, &desc.filter_len);
    set(b, &desc.out_backprop, &desc.out_backprop_len);
  } else if (takes_filter_sizes(attrs.op)) {
    set(a, &desc.input, &desc.input_len);
    set(sizes, &desc.filter, &desc.filter_len);
    set(b, &desc.out_backprop, &desc.out_backprop_len);
  } else {
    set(a, &desc.input, &desc.input_len);
    set(b, &desc.filter, &desc.filter_len);
  }
  set(attrs.strides, &desc.strides, &desc.strides_len);
  set(attrs.dilations, &desc.dilations, &desc.dilations_len);
  set(attrs.explicit_paddings, &desc.explicit_paddings, &desc.explicit_paddings_len);
  return desc;
}

/// Validates the op instance as convjit_compile would and gives its result's shape.
inline Failure infer_output_shape(const Attrs& attrs, convjit_dtype dtype,
                                  const std::vector<std::int64_t>& sizes,
                                  const std::vector<std::int64_t>& a,
                                  const std::vector<std::int64_t>& b,
                                  std::array<std::int64_t, 4>* shape) {
  const convjit_op_desc desc = make_desc(attrs, dtype, sizes, a, b);
  std::int64_t out[CONVJIT_MAX_RANK] = {};
  const convjit_status status = convjit_infer_output_shape(&desc, out);
  if (status != CONVJIT_OK) return last_failure(status);
  for (int i = 0; i < 4; ++i) (*shape)[static_cast<std::size_t>(i)] = out[i];
  return {};
}

/// Compiles `attrs` for operands `a` and `b` and the `sizes` values (as make_desc). `device`
/// is "cpu" or "cuda:N"; `num_threads` the CPU threads the framework's pool has (the plan
/// splits the work for that many).
inline Failure compile(const Attrs& attrs, convjit_dtype dtype, const std::vector<std::int64_t>& sizes,
                       const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b,
                       const std::string& device, int num_threads, KernelPtr* out) {
  const convjit_op_desc desc = make_desc(attrs, dtype, sizes, a, b);
  convjit_compile_options options;
  std::memset(&options, 0, sizeof options);
  options.device = device.c_str();
  options.num_threads = num_threads < 0 ? 0 : num_threads;
  convjit_kernel* handle = nullptr;
  const convjit_status status = convjit_compile_with_options(&desc, &options, &handle);
  if (status != CONVJIT_OK) return last_failure(status);
  *out = KernelPtr(handle, convjit_destroy);
  return {};
}

/// The result's shape of a compiled kernel.
inline std::array<std::int64_t, 4> output_shape(const convjit_kernel* kernel) {
  std::int64_t shape[CONVJIT_MAX_RANK] = {};
  convjit_kernel_operand_shape(kernel, 2, shape);
  return {shape[0], shape[1], shape[2], shape[3]};
}

/// Kernels of one op instance by operand shapes, device and thread count. A framework builds
/// one op instance per graph node (or per attribute set in eager mode), so the table stays
/// small; past kCapacity it starts again (convjit's own caches still hold the code).
class KernelTable {
 public:
  struct Key {
    std::vector<std::int64_t> values;  // sizes, a, b, dtype, device ordinal, threads
    bool operator==(const Key& other) const { return values == other.values; }
  };

  /// The kernel for `key`, compiled by `make` on a miss (outside the lock: compiling takes
  /// milliseconds and other threads may run kernels meanwhile).
  template <typename Make>
  Failure get(const Key& key, Make&& make, KernelPtr* out) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& entry : entries_) {
        if (entry.first == key) {
          *out = entry.second;
          return {};
        }
      }
    }
    KernelPtr kernel;
    Failure failure = make(&kernel);
    if (!failure.ok()) return failure;
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_.size() >= kCapacity) entries_.clear();
    entries_.emplace_back(key, kernel);
    *out = std::move(kernel);
    return {};
  }

 private:
  static constexpr std::size_t kCapacity = 64;
  std::mutex mutex_;
  std::vector<std::pair<Key, KernelPtr>> entries_;
};

/// A convjit_tensor over a framework's dense row-major buffer.
inline convjit_tensor make_tensor(convjit_dtype dtype, const std::int64_t* dims, int rank,
                                  const void* data) {
  convjit_tensor t;
  std::memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.rank = rank;
  for (int i = 0; i < rank && i < CONVJIT_MAX_RANK; ++i) t.shape[i] = dims[i];
  t.data = const_cast<void*>(data);
  return t;
}

}  // namespace convjit_adapter
