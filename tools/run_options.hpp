// `convjit run`'s command line: its flags, and how they (plus the shapes of any .npy operands)
// become the OpDescriptor TensorFlow would have received.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "convjit/convjit.hpp"
#include "convjit/types.hpp"
#include "tools/cli_args.hpp"

namespace convjit::cli {

/// Every flag of `convjit run`, parsed but not yet checked against the op.
struct RunOptions {
  bool help = false;
  std::optional<std::string> desc;  // canonical descriptor text
  std::optional<std::string> op;
  std::optional<std::vector<std::int64_t>> input_sizes;
  std::optional<std::vector<std::int64_t>> filter_sizes;
  std::optional<std::vector<std::int64_t>> strides;
  std::optional<std::string> padding;
  std::optional<std::vector<std::int64_t>> explicit_paddings;
  std::optional<std::string> data_format;
  std::optional<std::vector<std::int64_t>> dilations;
  std::optional<std::string> dtype;

  std::optional<std::string> input_path;
  std::optional<std::string> filter_path;
  std::optional<std::string> out_backprop_path;
  std::optional<std::string> output_path;

  bool check = false;
  std::optional<double> tolerance;
  int repeats = 10;
  std::string device;  // empty: the CPU
  MathMode math = MathMode::kExact;
  std::string backend;
  int threads = 0;
  std::uint64_t seed = 1;
};

/// The flag table of `convjit run` (for parsing and help).
std::span<const FlagSpec> run_flag_specs();
/// Parses the words after `run`. Throws UsageError.
RunOptions parse_run_options(std::span<const std::string_view> args);
/// The options of flags already parsed over run_flag_specs() (a caller that also reads the
/// flags themselves, as `convjit compile` does). Throws UsageError.
RunOptions run_options_from(const ParsedFlags& flags);

/// Shapes of the operands given as .npy files (nullopt: not given).
struct OperandShapes {
  std::optional<std::vector<std::int64_t>> input;
  std::optional<std::vector<std::int64_t>> filter;
  std::optional<std::vector<std::int64_t>> out_backprop;
  /// The dtype of the first .npy file, used when neither --dtype nor --desc says.
  std::optional<DType> file_dtype;
};

/// Parses an op's TensorFlow name ("Conv2DBackpropInput") or Python name
/// ("conv2d_backprop_input"). Throws UsageError listing the valid names.
OpKind parse_op(std::string_view name);

/// Builds the descriptor from --desc or from the attribute flags and the operand shapes,
/// deriving out_backprop's shape from the output-size rule where no file gives it. Throws
/// UsageError when a needed flag is missing or flags contradict, and convjit::Error with
/// TensorFlow's text for an attribute value TensorFlow would refuse (e.g. padding "same").
/// Nothing else is validated here: compile() reports TensorFlow's errors.
OpDescriptor build_descriptor(const RunOptions& options, const OperandShapes& files);

/// Output size of one spatial dimension by TensorFlow's rule, or nullopt when the attributes
/// make it undefined (stride <= 0, dilation < 1); negative results are returned as they are.
std::optional<std::int64_t> conv_output_size(std::int64_t in, std::int64_t k, std::int64_t stride,
                                             std::int64_t dilation, Padding padding,
                                             std::int64_t pad_before, std::int64_t pad_after);

}  // namespace convjit::cli
