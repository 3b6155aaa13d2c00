// Public descriptor types: the user's view of one TensorFlow conv op instance.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

// libconvjit is compiled with hidden visibility; what this header declares is its exported API.
#pragma GCC visibility push(default)

namespace convjit {

/// Element type of every tensor of an op. half and bfloat16 are stored as 16-bit words.
enum class DType : std::uint8_t { kHalf, kBFloat16, kFloat32, kFloat64 };

/// Activation layout (filters are always HWIO whatever the data format).
enum class DataFormat : std::uint8_t { kNHWC, kNCHW };

/// TensorFlow's padding attribute.
enum class Padding : std::uint8_t { kSame, kValid, kExplicit };

/// The TensorFlow ops convjit implements.
enum class OpKind : std::uint8_t {
  kConv2D,
  kConv2DBackpropInput,
  kConv2DBackpropInputV2,
  kConv2DBackpropFilter,
  kDepthwiseConv2dNative,
  kDepthwiseConv2dNativeBackpropInput,
  kDepthwiseConv2dNativeBackpropFilter,
};

/// One op instance exactly as TensorFlow receives it: attributes plus the shapes (or, for the
/// `*_sizes` arguments, the values) of its operands. Nothing here is validated; `validate`
/// in the front end turns it into a resolved problem or a TensorFlow error.
struct OpDescriptor {
  OpKind op = OpKind::kConv2DBackpropInput;
  DType dtype = DType::kFloat32;
  DataFormat data_format = DataFormat::kNHWC;

  /// Conv2DBackpropInput / DepthwiseConv2dNativeBackpropInput: the values of `input_sizes`
  /// (4 in data_format order, or 2 spatial). Every other op: the shape of the `input` tensor.
  std::vector<std::int64_t> input;
  /// Conv2DBackpropFilter / DepthwiseConv2dNativeBackpropFilter: the values of `filter_sizes`.
  /// Every other op: the shape of the `filter` tensor.
  std::vector<std::int64_t> filter;
  /// Shape of `out_backprop` (backprop ops only; empty and unused for the forward ops).
  std::vector<std::int64_t> out_backprop;
  /// Rank of the `input_sizes` / `filter_sizes` tensor itself; TensorFlow requires 1.
  int sizes_rank = 1;

  std::vector<std::int64_t> strides{1, 1, 1, 1};
  std::vector<std::int64_t> dilations{1, 1, 1, 1};
  Padding padding = Padding::kValid;
  std::vector<std::int64_t> explicit_paddings;
  /// Accepted for TensorFlow compatibility; a hint for backend choice only.
  bool use_cudnn_on_gpu = true;

};

/// Field-by-field equality.
bool operator==(const OpDescriptor& a, const OpDescriptor& b);
inline bool operator!=(const OpDescriptor& a, const OpDescriptor& b) { return !(a == b); }

/// TensorFlow's op name, e.g. "Conv2DBackpropInput".
std::string_view op_name(OpKind op);
/// TensorFlow's Python name, e.g. "conv2d_backprop_input".
std::string_view op_python_name(OpKind op);
/// "half", "bfloat16", "float32", "float64".
std::string_view dtype_name(DType dtype);
/// Bytes per element.
int dtype_size(DType dtype);
std::string_view data_format_name(DataFormat format);
std::string_view padding_name(Padding padding);

/// True for the ops whose shape argument is a `*_sizes` value vector rather than a tensor.
bool takes_input_sizes(OpKind op);
bool takes_filter_sizes(OpKind op);
bool is_depthwise(OpKind op);

}  // namespace convjit

#pragma GCC visibility pop
