// `convjit run` flags and the descriptor they describe.
#include "tools/run_options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <limits>

#include "convjit/convjit.hpp"

namespace convjit::cli {
namespace {

constexpr std::array<FlagSpec, 23> kRunFlags{{
    {"op", "NAME",
     "TensorFlow op name (Conv2DBackpropInput) or Python name (conv2d_backprop_input)",
     FlagRole::kDescriptor},
    {"desc", "TEXT",
     "the whole op as one canonical descriptor line (instead of --op and attributes)",
     FlagRole::kDescriptor},
    {"input-sizes", "LIST", "input_sizes (backprop-input ops), or the input tensor's shape",
     FlagRole::kDescriptor},
    {"filter-sizes", "LIST", "filter_sizes (backprop-filter ops), or the filter tensor's shape",
     FlagRole::kDescriptor},
    {"strides", "LIST", "4 strides in data_format order (default 1,1,1,1)", FlagRole::kDescriptor},
    {"padding", "MODE", "SAME, VALID or EXPLICIT (required without --desc)", FlagRole::kDescriptor},
    {"explicit-paddings", "LIST", "8 pads, before/after per dimension in data_format order",
     FlagRole::kDescriptor},
    {"data-format", "FMT", "NHWC (default) or NCHW", FlagRole::kDescriptor},
    {"dilations", "LIST", "4 dilations in data_format order (default 1,1,1,1)",
     FlagRole::kDescriptor},
    {"dtype", "TYPE",
     "half, bfloat16, float32 or float64, or f16, bf16, f32, f64 (default: the .npy files' type, "
     "else float32)",
     FlagRole::kDescriptor},
    {"input", "FILE.npy", "the input tensor (its shape defines the input)", FlagRole::kRunOnly},
    {"filter", "FILE.npy", "the filter tensor, HWIO (its shape defines the filter)",
     FlagRole::kRunOnly},
    {"out-backprop", "FILE.npy",
     "the out_backprop tensor (default: random, shape by the output-size rule)",
     FlagRole::kRunOnly},
    {"output", "FILE.npy", "write the result (bfloat16 as float32, half as float16)",
     FlagRole::kRunOnly},
    {"check", "", "compare with convjit's naive reference; exit 1 beyond the tolerance",
     FlagRole::kRunOnly},
    {"tolerance", "X",
     "max abs error --check accepts (default: scaled by dtype and reduction length)",
     FlagRole::kRunOnly},
    {"repeats", "N", "timed runs after one warm-up; the median is reported (default 10)",
     FlagRole::kRunOnly},
    {"device", "NAME",
     "cpu (default), cuda, cuda:N or cuda-interpret (CUDA kernels run on the host)",
     FlagRole::kRunOnly},
    {"math", "MODE", "float32 math on devices that offer more: exact (default) or tf32"},
    {"backend", "NAME",
     "code generator, e.g. x86 or interpreter (default: $CONVJIT_BACKEND, else best)",
     FlagRole::kRunOnly},
    {"threads", "N", "threads per run (default: $CONVJIT_NUM_THREADS, else all cores)"},
    {"seed", "N", "seed of the random operands (default 1)", FlagRole::kRunOnly},
    {"help", "", "show this help"},
}};

constexpr std::array<OpKind, 7> kAllOps{
    OpKind::kConv2D,
    OpKind::kConv2DBackpropInput,
    OpKind::kConv2DBackpropInputV2,
    OpKind::kConv2DBackpropFilter,
    OpKind::kDepthwiseConv2dNative,
    OpKind::kDepthwiseConv2dNativeBackpropInput,
    OpKind::kDepthwiseConv2dNativeBackpropFilter,
};

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

Padding parse_padding_attr(std::string_view text) {
  if (text == "SAME") return Padding::kSame;
  if (text == "VALID") return Padding::kValid;
  if (text == "EXPLICIT") return Padding::kExplicit;
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("Value for attr 'padding' of \"{}\" is not in the list of allowed "
                          "values: \"SAME\", \"VALID\", \"EXPLICIT\"", text));
}

DataFormat parse_format_attr(std::string_view text) {
  if (text == "NHWC") return DataFormat::kNHWC;
  if (text == "NCHW") return DataFormat::kNCHW;
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("Value for attr 'data_format' of \"{}\" is not in the list of allowed "
                          "values: \"NHWC\", \"NCHW\"", text));
}

DType parse_dtype_attr(std::string_view text) {
  // TensorFlow's names, and the short ones `convjit bench --dtype` prints; both commands take
  // the same set.
  if (text == "half" || text == "float16" || text == "f16") return DType::kHalf;
  if (text == "bfloat16" || text == "bf16") return DType::kBFloat16;
  if (text == "float32" || text == "float" || text == "f32") return DType::kFloat32;
  if (text == "float64" || text == "double" || text == "f64") return DType::kFloat64;
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("Value for attr 'T' of {} is not in the list of allowed values: half, "
                          "bfloat16, float, double", text));
}

/// Positions of N, H, W, C in an activation shape of `format`.
struct Axes {
  int n, h, w, c;
};
Axes axes_of(DataFormat format) {
  return format == DataFormat::kNHWC ? Axes{0, 1, 2, 3} : Axes{0, 2, 3, 1};
}

std::vector<std::int64_t> activation_shape(DataFormat format, std::int64_t n, std::int64_t h,
                                           std::int64_t w, std::int64_t c) {
  if (format == DataFormat::kNHWC) return {n, h, w, c};
  return {n, c, h, w};
}

/// out_backprop's shape (or a forward op's output shape) from the input and filter shapes. When
/// the attributes or shapes are malformed, returns a 4-D placeholder so that validation, not
/// this tool, reports TensorFlow's error for the real mistake.
std::vector<std::int64_t> derive_output_shape(const OpDescriptor& d) {
  const Axes ax = axes_of(d.data_format);
  const bool input_ok = d.input.size() == 4;
  const bool filter_ok = d.filter.size() == 4;
  std::int64_t channels = filter_ok ? d.filter[3] : 1;
  if (filter_ok && is_depthwise(d.op) && __builtin_mul_overflow(d.filter[2], d.filter[3], &channels)) {
    channels = 1;  // absurd sizes: validation refuses them
  }
  const std::int64_t batch = input_ok ? d.input[static_cast<std::size_t>(ax.n)] : 1;
  std::vector<std::int64_t> placeholder = activation_shape(d.data_format, batch, 1, 1, channels);
  const bool explicit_ok = d.padding != Padding::kExplicit || d.explicit_paddings.size() == 8;
  if (!input_ok || !filter_ok || d.strides.size() != 4 || d.dilations.size() != 4 || !explicit_ok) {
    return placeholder;
  }
  std::array<std::int64_t, 2> out{};
  const std::array<int, 2> dims{ax.h, ax.w};
  for (int i = 0; i < 2; ++i) {
    const auto dim = static_cast<std::size_t>(dims[static_cast<std::size_t>(i)]);
    const std::int64_t before = d.padding == Padding::kExplicit ? d.explicit_paddings[2 * dim] : 0;
    const std::int64_t after = d.padding == Padding::kExplicit ? d.explicit_paddings[2 * dim + 1] : 0;
    const auto size = conv_output_size(d.input[dim], d.filter[static_cast<std::size_t>(i)],
                                       d.strides[dim], d.dilations[dim], d.padding, before, after);
    if (!size) return placeholder;
    // A negative size is TensorFlow's "Computed output size would be negative" error, which
    // validation reports; any non-negative stand-in lets it get there.
    out[static_cast<std::size_t>(i)] = *size < 0 ? 0 : *size;
  }
  return activation_shape(d.data_format, batch, out[0], out[1], channels);
}

/// Refuses operand flags the op has no use for, and pairs that would say the same thing twice.
void check_operand_flags(OpKind op, const RunOptions& o) {
  const std::string_view name = op_name(op);
  if (o.input_path && takes_input_sizes(op)) {
    throw UsageError(fmt::format("{} takes --input-sizes; the input tensor is not one of its "
                                 "operands (Conv2DBackpropInputV2 takes one)", name));
  }
  if (o.filter_path && takes_filter_sizes(op)) {
    throw UsageError(fmt::format("{} takes --filter-sizes; the filter tensor is not one of its "
                                 "operands", name));
  }
  const bool forward = op == OpKind::kConv2D || op == OpKind::kDepthwiseConv2dNative;
  if (o.out_backprop_path && forward) {
    throw UsageError(fmt::format("{} has no out_backprop operand", name));
  }
  if (!o.desc) {
    if (o.input_path && o.input_sizes) {
      throw UsageError("give --input FILE.npy or --input-sizes, not both");
    }
    if (o.filter_path && o.filter_sizes) {
      throw UsageError("give --filter FILE.npy or --filter-sizes, not both");
    }
  }
}

/// With --desc, a tensor file must have the shape the descriptor says.
void check_file_shape(const std::optional<std::vector<std::int64_t>>& file,
                      const std::vector<std::int64_t>& expected, std::string_view flag,
                      std::string_view field) {
  if (file && *file != expected) {
    throw UsageError(fmt::format("--{}: the file's shape {} differs from the descriptor's {}={}",
                                 flag, shape_text(*file), field, shape_text(expected)));
  }
}

OpDescriptor descriptor_from_text(const RunOptions& o, const OperandShapes& files) {
  static constexpr std::array<std::string_view, 9> kAttrFlags{
      "op", "input-sizes", "filter-sizes", "strides", "padding",
      "explicit-paddings", "data-format", "dilations", "dtype"};
  const std::array<bool, 9> given{o.op.has_value(),        o.input_sizes.has_value(),
                                  o.filter_sizes.has_value(), o.strides.has_value(),
                                  o.padding.has_value(),   o.explicit_paddings.has_value(),
                                  o.data_format.has_value(), o.dilations.has_value(),
                                  o.dtype.has_value()};
  for (std::size_t i = 0; i < kAttrFlags.size(); ++i) {
    if (given[i]) {
      throw UsageError(fmt::format("--desc gives the whole op; drop --{}", kAttrFlags[i]));
    }
  }
  OpDescriptor d;
  try {
    d = parse_descriptor(*o.desc);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--desc: {}", e.what()));
  }
  check_operand_flags(d.op, o);
  if (!takes_input_sizes(d.op)) check_file_shape(files.input, d.input, "input", "input");
  if (!takes_filter_sizes(d.op)) check_file_shape(files.filter, d.filter, "filter", "filter");
  check_file_shape(files.out_backprop, d.out_backprop, "out-backprop", "out_backprop");
  return d;
}

}  // namespace

std::span<const FlagSpec> run_flag_specs() { return kRunFlags; }

RunOptions parse_run_options(std::span<const std::string_view> args) {
  return run_options_from(parse_flags(args, kRunFlags));
}

RunOptions run_options_from(const ParsedFlags& flags) {
  RunOptions o;
  o.help = flags.has("help");
  o.desc = flags.get("desc");
  o.op = flags.get("op");
  const auto list = [&](std::string_view name) -> std::optional<std::vector<std::int64_t>> {
    if (auto v = flags.get(name)) return parse_int_list(*v, name);
    return std::nullopt;
  };
  o.input_sizes = list("input-sizes");
  o.filter_sizes = list("filter-sizes");
  o.strides = list("strides");
  o.explicit_paddings = list("explicit-paddings");
  o.dilations = list("dilations");
  o.padding = flags.get("padding");
  o.data_format = flags.get("data-format");
  o.dtype = flags.get("dtype");
  o.input_path = flags.get("input");
  o.filter_path = flags.get("filter");
  o.out_backprop_path = flags.get("out-backprop");
  o.output_path = flags.get("output");
  o.check = flags.has("check");
  if (auto v = flags.get("tolerance")) {
    o.tolerance = parse_double(*v, "tolerance");
    if (*o.tolerance < 0) throw UsageError("--tolerance must be >= 0");
  }
  if (auto v = flags.get("repeats")) {
    const std::int64_t n = parse_int(*v, "repeats");
    if (n < 1 || n > 1000000) throw UsageError("--repeats must be between 1 and 1000000");
    o.repeats = static_cast<int>(n);
  }
  if (auto v = flags.get("device")) {
    if (v->empty()) throw UsageError("--device needs a device name");
    o.device = *v;
  }
  if (auto v = flags.get("math")) {
    if (*v == "tf32") {
      o.math = MathMode::kTF32;
    } else if (*v != "exact") {
      throw UsageError("--math must be exact or tf32, not '" + std::string(*v) + "'");
    }
  }
  if (auto v = flags.get("backend")) {
    if (v->empty()) throw UsageError("--backend needs a backend name");
    o.backend = *v;
  }
  if (auto v = flags.get("threads")) {
    const std::int64_t n = parse_int(*v, "threads");
    if (n < 1 || n > 4096) throw UsageError("--threads must be between 1 and 4096");
    o.threads = static_cast<int>(n);
  }
  if (auto v = flags.get("seed")) {
    const std::int64_t n = parse_int(*v, "seed");
    if (n < 0) throw UsageError("--seed must be >= 0");
    o.seed = static_cast<std::uint64_t>(n);
  }
  return o;
}

OpKind parse_op(std::string_view name) {
  for (OpKind op : kAllOps) {
    if (name == op_name(op) || name == op_python_name(op)) return op;
  }
  std::string valid;
  for (OpKind op : kAllOps) valid += fmt::format("\n  {} ({})", op_name(op), op_python_name(op));
  throw UsageError(fmt::format("unknown op '{}'; the ops are:{}", name, valid));
}

std::optional<std::int64_t> conv_output_size(std::int64_t in, std::int64_t k, std::int64_t stride,
                                             std::int64_t dilation, Padding padding,
                                             std::int64_t pad_before, std::int64_t pad_after) {
  if (stride <= 0 || dilation < 1) return std::nullopt;
  // 128-bit arithmetic: the sizes are untrusted and may be absurd.
  const __int128 k_eff = (static_cast<__int128>(k) - 1) * dilation + 1;
  __int128 out = 0;
  switch (padding) {
    case Padding::kSame: out = (static_cast<__int128>(in) + stride - 1) / stride; break;
    case Padding::kValid: out = (static_cast<__int128>(in) - k_eff + stride) / stride; break;
    case Padding::kExplicit:
      out = (static_cast<__int128>(in) + pad_before + pad_after - k_eff + stride) / stride;
      break;
  }
  if (out > std::numeric_limits<std::int64_t>::max() || out < std::numeric_limits<std::int64_t>::min()) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(out);
}

OpDescriptor build_descriptor(const RunOptions& o, const OperandShapes& files) {
  if (o.desc) return descriptor_from_text(o, files);
  if (!o.op) throw UsageError("missing --op (e.g. --op Conv2DBackpropInput) or --desc");
  OpDescriptor d;
  d.op = parse_op(*o.op);
  check_operand_flags(d.op, o);
  const std::string_view name = op_name(d.op);
  if (!o.padding) throw UsageError(fmt::format("{} needs --padding (SAME, VALID or EXPLICIT)", name));
  d.padding = parse_padding_attr(*o.padding);
  d.data_format = o.data_format ? parse_format_attr(*o.data_format) : DataFormat::kNHWC;
  d.dtype = o.dtype ? parse_dtype_attr(*o.dtype) : files.file_dtype.value_or(DType::kFloat32);
  d.strides = o.strides.value_or(std::vector<std::int64_t>{1, 1, 1, 1});
  d.dilations = o.dilations.value_or(std::vector<std::int64_t>{1, 1, 1, 1});
  d.explicit_paddings = o.explicit_paddings.value_or(std::vector<std::int64_t>{});

  if (takes_input_sizes(d.op)) {
    if (!o.input_sizes) throw UsageError(fmt::format("{} needs --input-sizes", name));
    d.input = *o.input_sizes;
  } else if (files.input) {
    d.input = *files.input;
  } else if (o.input_sizes) {
    d.input = *o.input_sizes;
  } else {
    throw UsageError(fmt::format("{} needs the input's shape: give --input FILE.npy or "
                                 "--input-sizes", name));
  }
  if (takes_filter_sizes(d.op)) {
    if (!o.filter_sizes) throw UsageError(fmt::format("{} needs --filter-sizes", name));
    d.filter = *o.filter_sizes;
  } else if (files.filter) {
    d.filter = *files.filter;
  } else if (o.filter_sizes) {
    d.filter = *o.filter_sizes;
  } else {
    throw UsageError(fmt::format("{} needs the filter's shape: give --filter FILE.npy or "
                                 "--filter-sizes", name));
  }

  const bool forward = d.op == OpKind::kConv2D || d.op == OpKind::kDepthwiseConv2dNative;
  if (!forward) {
    if (files.out_backprop) {
      d.out_backprop = *files.out_backprop;
    } else if (takes_input_sizes(d.op) && d.input.size() == 2) {
      throw UsageError(fmt::format("{}: with 2 --input-sizes values the batch comes from "
                                   "out_backprop, so give --out-backprop FILE.npy", name));
    } else {
      d.out_backprop = derive_output_shape(d);
    }
  }
  return d;
}

}  // namespace convjit::cli
