// The canonical one-line text form of descriptors and problems, and its parser.
#pragma once

#include <string>
#include <string_view>

#include "convjit/types.hpp"
#include "frontend/problem.hpp"
#include "support/status.hpp"

namespace convjit {

/// Canonical text of a descriptor, e.g.
///   Conv2DBackpropInput dtype=float32 data_format=NHWC input_sizes=[1,2,3,1]
///   filter=[2,2,1,1] out_backprop=[1,1,2,1] strides=[1,1,1,1] dilations=[1,1,1,1] padding=VALID
/// (one line). parse_descriptor_text(to_text(d)) == d for every descriptor. Also declared by
/// convjit.hpp: exported from libconvjit whichever declaration a unit sees first.
__attribute__((visibility("default"))) std::string to_text(const OpDescriptor& desc);
/// Named apart from the public `OpDescriptor parse_descriptor(std::string_view)` of convjit.hpp,
/// which throws: the two would otherwise be one symbol differing only in return type.
Expected<OpDescriptor> parse_descriptor_text(std::string_view text);

/// Canonical text of a resolved problem: every size, pad, stride, dilation, layout and dtype.
/// Two descriptors that resolve to the same problem have the same text (the cache key's core).
std::string to_text(const ConvProblem& problem);

/// Parses an op's TensorFlow name or Python name.
Expected<OpKind> parse_op_name(std::string_view name);
Expected<DType> parse_dtype(std::string_view name);
Expected<DataFormat> parse_data_format(std::string_view name);
Expected<Padding> parse_padding(std::string_view name);

}  // namespace convjit
