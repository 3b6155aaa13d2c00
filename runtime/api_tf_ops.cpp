// The TensorFlow-shaped helpers of convjit.hpp: each builds the OpDescriptor TensorFlow would
// see for its arguments, compiles it (cached), allocates the result and runs.
#include <vector>

#include "convjit/convjit.hpp"
#include "frontend/descriptor_text.hpp"
#include "runtime/api_error.hpp"

namespace convjit {
namespace {

template <typename T>
T value_or_throw(Expected<T> value) {
  if (!value.has_value()) runtime::throw_status(value.status());
  return std::move(value).value();
}

// The attributes every op shares.
OpDescriptor base_descriptor(OpKind op, DType dtype, const std::vector<std::int64_t>& strides,
                             std::string_view padding, const ConvAttrs& attrs) {
  OpDescriptor desc;
  desc.op = op;
  desc.dtype = dtype;
  desc.data_format = value_or_throw(parse_data_format(attrs.data_format));
  desc.padding = value_or_throw(parse_padding(padding));
  desc.strides.assign(strides.begin(), strides.end());
  desc.dilations = attrs.dilations;
  desc.explicit_paddings = attrs.explicit_paddings;
  return desc;
}

// Compiles `desc`, allocates its result and runs it on (a, b).
Tensor compile_and_run(const OpDescriptor& desc, const TensorView& a, const TensorView& b) {
  const Kernel kernel = compile(desc);
  Tensor out(desc.dtype, kernel.operand_shape(2));
  kernel.run(a, b, out.view());
  return out;
}

Tensor backprop_input(OpKind op, const std::vector<std::int64_t>& input_sizes,
                      const TensorView& filter, const TensorView& out_backprop,
                      const std::vector<std::int64_t>& strides, std::string_view padding,
                      const ConvAttrs& attrs) {
  OpDescriptor desc = base_descriptor(op, filter.dtype, strides, padding, attrs);
  desc.input.assign(input_sizes.begin(), input_sizes.end());
  desc.filter = filter.shape;
  desc.out_backprop = out_backprop.shape;
  return compile_and_run(desc, filter, out_backprop);
}

Tensor backprop_filter(OpKind op, const TensorView& input,
                       const std::vector<std::int64_t>& filter_sizes, const TensorView& out_backprop,
                       const std::vector<std::int64_t>& strides, std::string_view padding,
                       const ConvAttrs& attrs) {
  OpDescriptor desc = base_descriptor(op, input.dtype, strides, padding, attrs);
  desc.input = input.shape;
  desc.filter.assign(filter_sizes.begin(), filter_sizes.end());
  desc.out_backprop = out_backprop.shape;
  return compile_and_run(desc, input, out_backprop);
}

Tensor forward(OpKind op, const TensorView& input, const TensorView& filter,
               const std::vector<std::int64_t>& strides, std::string_view padding,
               const ConvAttrs& attrs) {
  OpDescriptor desc = base_descriptor(op, input.dtype, strides, padding, attrs);
  desc.input = input.shape;
  desc.filter = filter.shape;
  return compile_and_run(desc, input, filter);
}

}  // namespace

Tensor conv2d_backprop_input(const std::vector<std::int64_t>& input_sizes, const TensorView& filter,
                             const TensorView& out_backprop, const std::vector<std::int64_t>& strides,
                             std::string_view padding, const ConvAttrs& attrs) {
  return backprop_input(OpKind::kConv2DBackpropInput, input_sizes, filter, out_backprop, strides,
                        padding, attrs);
}

Tensor conv2d_backprop_filter(const TensorView& input, const std::vector<std::int64_t>& filter_sizes,
                              const TensorView& out_backprop, const std::vector<std::int64_t>& strides,
                              std::string_view padding, const ConvAttrs& attrs) {
  return backprop_filter(OpKind::kConv2DBackpropFilter, input, filter_sizes, out_backprop, strides,
                         padding, attrs);
}

Tensor depthwise_conv2d_native_backprop_input(const std::vector<std::int64_t>& input_sizes,
                                              const TensorView& filter,
                                              const TensorView& out_backprop,
                                              const std::vector<std::int64_t>& strides,
                                              std::string_view padding, const ConvAttrs& attrs) {
  return backprop_input(OpKind::kDepthwiseConv2dNativeBackpropInput, input_sizes, filter,
                        out_backprop, strides, padding, attrs);
}

Tensor depthwise_conv2d_native_backprop_filter(const TensorView& input,
                                               const std::vector<std::int64_t>& filter_sizes,
                                               const TensorView& out_backprop,
                                               const std::vector<std::int64_t>& strides,
                                               std::string_view padding, const ConvAttrs& attrs) {
  return backprop_filter(OpKind::kDepthwiseConv2dNativeBackpropFilter, input, filter_sizes,
                         out_backprop, strides, padding, attrs);
}

Tensor conv2d(const TensorView& input, const TensorView& filter,
              const std::vector<std::int64_t>& strides, std::string_view padding,
              const ConvAttrs& attrs) {
  return forward(OpKind::kConv2D, input, filter, strides, padding, attrs);
}

Tensor depthwise_conv2d_native(const TensorView& input, const TensorView& filter,
                               const std::vector<std::int64_t>& strides, std::string_view padding,
                               const ConvAttrs& attrs) {
  return forward(OpKind::kDepthwiseConv2dNative, input, filter, strides, padding, attrs);
}

}  // namespace convjit
