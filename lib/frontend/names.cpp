// Names of the public enums as TensorFlow spells them, and the per-op facts every stage asks.
#include "convjit/types.hpp"

namespace convjit {

std::string_view op_name(OpKind op) {
  switch (op) {
    case OpKind::kConv2D: return "Conv2D";
    case OpKind::kConv2DBackpropInput: return "Conv2DBackpropInput";
    case OpKind::kConv2DBackpropInputV2: return "Conv2DBackpropInputV2";
    case OpKind::kConv2DBackpropFilter: return "Conv2DBackpropFilter";
    case OpKind::kDepthwiseConv2dNative: return "DepthwiseConv2dNative";
    case OpKind::kDepthwiseConv2dNativeBackpropInput: return "DepthwiseConv2dNativeBackpropInput";
    case OpKind::kDepthwiseConv2dNativeBackpropFilter: return "DepthwiseConv2dNativeBackpropFilter";
  }
  return "UnknownOp";
}

std::string_view op_python_name(OpKind op) {
  switch (op) {
    case OpKind::kConv2D: return "conv2d";
    case OpKind::kConv2DBackpropInput: return "conv2d_backprop_input";
    case OpKind::kConv2DBackpropInputV2: return "conv2d_backprop_input_v2";
    case OpKind::kConv2DBackpropFilter: return "conv2d_backprop_filter";
    case OpKind::kDepthwiseConv2dNative: return "depthwise_conv2d_native";
    case OpKind::kDepthwiseConv2dNativeBackpropInput: return "depthwise_conv2d_native_backprop_input";
    case OpKind::kDepthwiseConv2dNativeBackpropFilter:
      return "depthwise_conv2d_native_backprop_filter";
  }
  return "unknown_op";
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kHalf: return "half";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
  }
  return "unknown_dtype";
}

int dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kHalf:
    case DType::kBFloat16: return 2;
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
  }
  return 0;
}

std::string_view data_format_name(DataFormat format) {
  switch (format) {
    case DataFormat::kNHWC: return "NHWC";
    case DataFormat::kNCHW: return "NCHW";
  }
  return "unknown_format";
}

std::string_view padding_name(Padding padding) {
  switch (padding) {
    case Padding::kSame: return "SAME";
    case Padding::kValid: return "VALID";
    case Padding::kExplicit: return "EXPLICIT";
  }
  return "unknown_padding";
}

bool takes_input_sizes(OpKind op) {
  return op == OpKind::kConv2DBackpropInput || op == OpKind::kDepthwiseConv2dNativeBackpropInput;
}

bool takes_filter_sizes(OpKind op) {
  return op == OpKind::kConv2DBackpropFilter || op == OpKind::kDepthwiseConv2dNativeBackpropFilter;
}

bool is_depthwise(OpKind op) {
  return op == OpKind::kDepthwiseConv2dNative || op == OpKind::kDepthwiseConv2dNativeBackpropInput ||
         op == OpKind::kDepthwiseConv2dNativeBackpropFilter;
}

}  // namespace convjit

namespace convjit {

bool operator==(const OpDescriptor& a, const OpDescriptor& b) {
  return a.op == b.op && a.dtype == b.dtype && a.data_format == b.data_format &&
         a.input == b.input && a.filter == b.filter && a.out_backprop == b.out_backprop &&
         a.sizes_rank == b.sizes_rank && a.strides == b.strides && a.dilations == b.dilations &&
         a.padding == b.padding && a.explicit_paddings == b.explicit_paddings &&
         a.use_cudnn_on_gpu == b.use_cudnn_on_gpu;
}

}  // namespace convjit
