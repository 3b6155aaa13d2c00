#include "kernel.hpp"

#include <cstring>
#include <string_view>

namespace convjit::python {
namespace {

constexpr OpKind kAllOps[] = {OpKind::kConv2D,
                              OpKind::kConv2DBackpropInput,
                              OpKind::kConv2DBackpropInputV2,
                              OpKind::kConv2DBackpropFilter,
                              OpKind::kDepthwiseConv2dNative,
                              OpKind::kDepthwiseConv2dNativeBackpropInput,
                              OpKind::kDepthwiseConv2dNativeBackpropFilter};

std::string shape_text(const std::array<std::int64_t, 4>& shape) {
  return "(" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + ", " +
         std::to_string(shape[2]) + ", " + std::to_string(shape[3]) + ")";
}

const std::int64_t* data_or_null(const std::vector<std::int64_t>& v) {
  return v.empty() ? nullptr : v.data();
}

}  // namespace

void raise_status(convjit_status status) {
  raise_error(convjit_last_error(), convjit_status_name(status));
}

OpKind parse_op(const std::string& name) {
  for (OpKind op : kAllOps) {
    if (op_name(op) == name || op_python_name(op) == name) return op;
  }
  std::string known;
  for (OpKind op : kAllOps) known += (known.empty() ? "" : ", ") + std::string(op_python_name(op));
  raise_error("unknown op '" + name + "'; convjit compiles " + known +
              " (or their TensorFlow names, e.g. Conv2DBackpropInput)");
}

OperandNames operand_names(OpKind op) {
  if (takes_input_sizes(op)) return {"filter", "out_backprop", 1, 2};
  if (takes_filter_sizes(op)) return {"input", "out_backprop", 0, 2};
  return {"input", "filter", 0, 1};
}

std::shared_ptr<Kernel> Kernel::compile(const CompileRequest& r) {
  const OpKind op = parse_op(r.op);
  convjit_op_desc desc;
  std::memset(&desc, 0, sizeof desc);
  desc.op = r.op.c_str();
  desc.dtype = r.dtype;
  desc.data_format = r.data_format.c_str();
  desc.padding = r.padding.c_str();
  auto set = [](const std::vector<std::int64_t>& v, const std::int64_t** data, std::int32_t* len) {
    *data = data_or_null(v);
    *len = static_cast<std::int32_t>(v.size());
  };
  set(r.input, &desc.input, &desc.input_len);
  set(r.filter, &desc.filter, &desc.filter_len);
  set(r.out_backprop, &desc.out_backprop, &desc.out_backprop_len);
  set(r.strides, &desc.strides, &desc.strides_len);
  set(r.dilations, &desc.dilations, &desc.dilations_len);
  set(r.explicit_paddings, &desc.explicit_paddings, &desc.explicit_paddings_len);
  convjit_compile_options options;
  std::memset(&options, 0, sizeof options);
  options.device = r.device.c_str();
  options.backend = r.backend.empty() ? nullptr : r.backend.c_str();
  options.num_threads = r.num_threads;

  convjit_kernel* handle = nullptr;
  convjit_status status;
  {
    nb::gil_scoped_release release;  // compiling takes milliseconds: let other threads run
    status = convjit_compile_with_options(&desc, &options, &handle);
  }
  if (status != CONVJIT_OK) raise_status(status);
  std::shared_ptr<Kernel> kernel(new Kernel());
  kernel->handle_ = handle;
  kernel->name_ = convjit_kernel_name(handle);
  kernel->backend_ = convjit_kernel_backend(handle);
  kernel->device_ = convjit_kernel_device(handle);
  kernel->descriptor_ = convjit_kernel_descriptor(handle);
  kernel->op_ = std::string(op_name(op));
  kernel->dtype_ = r.dtype;
  kernel->operands_ = operand_names(op);
  for (int i = 0; i < 3; ++i) {
    std::int64_t shape[CONVJIT_MAX_RANK] = {};
    if (convjit_kernel_operand_shape(handle, i, shape) != 4)
      raise_error("kernel has no 4-D operand", "INTERNAL");
    std::memcpy(kernel->shapes_[static_cast<std::size_t>(i)].data(), shape,
                4 * sizeof(std::int64_t));
  }
  return kernel;
}

Kernel::~Kernel() { convjit_destroy(handle_); }

void Kernel::check_operand(const Array& array, int index, const char* name, int tf_index) const {
  if (array.dtype != dtype_ && tf_index < 0) {
    raise_error(op_ + ": " + name + " is a " + dtype_name(array.dtype) +
                " array but the result is " + dtype_name(dtype_));
  }
  if (array.dtype != dtype_) {
    raise_error("cannot compute " + op_ + " as input #" + std::to_string(tf_index) +
                "(zero-based) was expected to be a " + tf_dtype_name(dtype_) + " tensor but is a " +
                tf_dtype_name(array.dtype) + " tensor");
  }
  if (array.shape != shapes_[static_cast<std::size_t>(index)]) {
    raise_error(op_ + ": " + name + " has shape " + shape_text(array.shape) +
                " but this kernel expects " + shape_text(shapes_[static_cast<std::size_t>(index)]));
  }
  if (array.device.name() != device_ && !(device_ == "cuda-interpret" && !array.device.is_cuda())) {
    raise_error(op_ + ": " + name + " is on " + array.device.name() +
                " but the kernel was compiled for " + device_);
  }
}

nb::object Kernel::run(nb::handle a, nb::handle b, nb::handle out,
                       convjit_parallel_for_fn parallel_for) const {
  const Array first = import_array(a, operands_.a, op_, false);
  const Array second = import_array(b, operands_.b, op_, false);
  return run_arrays(first, second, out, parallel_for);
}

nb::object Kernel::run_arrays(const Array& a, const Array& b, nb::handle out,
                              convjit_parallel_for_fn parallel_for) const {
  check_operand(a, 0, operands_.a, operands_.a_index);
  check_operand(b, 1, operands_.b, operands_.b_index);
  nb::object result;
  void* out_data = nullptr;
  if (!out.is_none()) {
    const Array target = import_array(out, "out", op_, true);
    check_operand(target, 2, "out", -1);
    auto overlaps = [&](const Array& input) {
      const auto* lo = static_cast<const char*>(target.data());
      const auto* in = static_cast<const char*>(input.data());
      return lo < in + input.bytes && in < lo + target.bytes;
    };
    if (target.bytes > 0 && (overlaps(a) || overlaps(b))) {
      raise_error(op_ + ": out shares memory with " + (overlaps(a) ? operands_.a : operands_.b) +
                  "; the result needs an array of its own");
    }
    result = target.source;
    out_data = target.data();
  } else {
    Output output = make_output(a.framework, dtype_, shapes_[2], a.device);
    result = std::move(output.object);
    out_data = output.data;
  }
  convjit_tensor ta = a.tensor(), tb = b.tensor(), tout{};
  tout.dtype = dtype_;
  tout.rank = 4;
  for (int i = 0; i < 4; ++i) tout.shape[i] = shapes_[2][static_cast<std::size_t>(i)];
  tout.data = out_data;
  convjit_run_context context{};
  context.stream = current_stream(a.framework, a.device);
  convjit_status status;
  {
    nb::gil_scoped_release release;
    status = convjit_run_with_parallel_for(handle_, &ta, &tb, &tout, &context, parallel_for,
                                           nullptr);
  }
  if (status != CONVJIT_OK) raise_status(status);
  return result;
}

}  // namespace convjit::python
