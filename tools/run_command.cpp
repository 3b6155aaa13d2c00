// `convjit run`: flags -> descriptor -> compile -> operands -> timed runs -> check -> output.
#include "tools/run_command.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <vector>

#include "convjit/convjit.hpp"
#include "tools/npy.hpp"
#include "tools/result_check.hpp"
#include "tools/run_options.hpp"
#include "tools/tensor_data.hpp"

namespace convjit::cli {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ","));
}

std::string_view kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "InvalidArgument";
    case ErrorKind::kUnimplemented: return "Unimplemented";
    case ErrorKind::kResourceExhausted: return "ResourceExhausted";
    case ErrorKind::kInternal: return "Internal";
    case ErrorKind::kNotFound: return "NotFound";
    case ErrorKind::kUnavailable: return "Unavailable";
  }
  return "Error";
}

DType dtype_of_file(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::kFloat16: return DType::kHalf;
    case NpyDType::kFloat32: return DType::kFloat32;
    case NpyDType::kFloat64: return DType::kFloat64;
  }
  return DType::kFloat32;
}

/// The .npy operands the command line names, loaded once.
struct LoadedFiles {
  std::optional<NpyArray> input, filter, out_backprop;
  OperandShapes shapes;
};

LoadedFiles load_files(const RunOptions& o) {
  LoadedFiles files;
  const auto load = [&](const std::optional<std::string>& path, std::optional<NpyArray>& array,
                        std::optional<std::vector<std::int64_t>>& shape) {
    if (!path) return;
    array = read_npy(*path);
    shape = array->shape;
    if (!files.shapes.file_dtype) files.shapes.file_dtype = dtype_of_file(array->dtype);
  };
  load(o.input_path, files.input, files.shapes.input);
  load(o.filter_path, files.filter, files.shapes.filter);
  load(o.out_backprop_path, files.out_backprop, files.shapes.out_backprop);
  return files;
}

/// Which .npy file feeds operand a and b of Kernel::run for this op.
std::pair<const std::optional<NpyArray>*, const std::optional<NpyArray>*> operand_files(
    OpKind op, const LoadedFiles& f) {
  switch (op) {
    case OpKind::kConv2D:
    case OpKind::kDepthwiseConv2dNative: return {&f.input, &f.filter};
    case OpKind::kConv2DBackpropInput:
    case OpKind::kConv2DBackpropInputV2:
    case OpKind::kDepthwiseConv2dNativeBackpropInput: return {&f.filter, &f.out_backprop};
    case OpKind::kConv2DBackpropFilter:
    case OpKind::kDepthwiseConv2dNativeBackpropFilter: return {&f.input, &f.out_backprop};
  }
  return {&f.input, &f.filter};
}

Tensor make_operand(const std::optional<NpyArray>& file, const Kernel& kernel, DType dtype,
                    int index, std::uint64_t seed) {
  if (file) return tensor_from_npy(*file, dtype);
  Tensor t(dtype, kernel.operand_shape(index));
  fill_random(t, seed);
  return t;
}

std::string format_ms(double ms) {
  if (ms >= 100) return fmt::format("{:.1f} ms", ms);
  if (ms >= 1) return fmt::format("{:.3f} ms", ms);
  return fmt::format("{:.1f} us", ms * 1000);
}

/// The body of `convjit run`; throws UsageError, NpyError or convjit::Error.
int run_checked(const RunOptions& o, std::ostream& out, std::ostream& err) {
  LoadedFiles files = load_files(o);
  const OpDescriptor desc = build_descriptor(o, files.shapes);

  CompileOptions options;
  options.device = o.device;
  options.math_mode = o.math;
  options.backend = o.backend;
  options.num_threads = o.threads;
  const Kernel kernel = compile(desc, options);

  const auto [file_a, file_b] = operand_files(desc.op, files);
  const Tensor a = make_operand(*file_a, kernel, desc.dtype, 0, o.seed);
  const Tensor b = make_operand(*file_b, kernel, desc.dtype, 1, o.seed + 1);
  Tensor result(desc.dtype, kernel.operand_shape(2));

  // A GPU kernel runs on device copies of the operands; each timed run waits for the device.
  const bool on_gpu = kernel.device().rfind("cuda:", 0) == 0;
  DeviceBuffer device_a, device_b, device_out;
  TensorView view_a = a.view(), view_b = b.view(), view_out = result.view();
  if (on_gpu) {
    device_a = DeviceBuffer(kernel.device(), a.bytes());
    device_b = DeviceBuffer(kernel.device(), b.bytes());
    device_out = DeviceBuffer(kernel.device(), result.bytes());
    device_a.copy_from_host(a.data(), a.bytes());
    device_b.copy_from_host(b.data(), b.bytes());
    view_a.data = device_a.data();
    view_b.data = device_b.data();
    view_out.data = device_out.data();
  }
  const auto run_once = [&] {
    kernel.run(view_a, view_b, view_out);
    if (on_gpu) synchronize(kernel.device());
  };
  run_once();  // warm-up: first-touch pages, caches, pool
  std::vector<double> times_ms;
  times_ms.reserve(static_cast<std::size_t>(o.repeats));
  for (int i = 0; i < o.repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run_once();
    const auto stop = std::chrono::steady_clock::now();
    times_ms.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  if (on_gpu) device_out.copy_to_host(result.data(), result.bytes());
  std::sort(times_ms.begin(), times_ms.end());
  const std::size_t mid = times_ms.size() / 2;
  const double median_ms =
      times_ms.size() % 2 == 1 ? times_ms[mid] : (times_ms[mid - 1] + times_ms[mid]) / 2;

  fmt::print(out, "descriptor  {}\n", kernel.descriptor());
  fmt::print(out, "backend     {}{}\n", kernel.backend(),
             kernel.device() == "cuda-interpret" ? " (interpreted)" : "");
  if (kernel.device() != "cpu") fmt::print(out, "device      {}\n", kernel.device());
  fmt::print(out, "kernel      {}\n", kernel.name());
  fmt::print(out, "shapes      a={} b={} out={}\n", shape_text(a.shape()), shape_text(b.shape()),
             shape_text(result.shape()));
  fmt::print(out, "threads     {}\n", o.threads > 0 ? fmt::to_string(o.threads) : "default");
  fmt::print(out, "scratch     {:.1f} KiB per run\n", static_cast<double>(kernel.scratch_bytes()) / 1024);
  fmt::print(out, "compile     {} (cache: {})\n", format_ms(kernel.compile_ms()),
             kernel.cache_source());
  fmt::print(out, "run         {} median of {} (min {}, max {})\n", format_ms(median_ms),
             o.repeats, format_ms(times_ms.front()), format_ms(times_ms.back()));
  const double gflops = median_ms > 0 ? kernel.flops() / (median_ms * 1e6) : 0.0;
  fmt::print(out, "GFLOP/s     {:.2f} ({:.4g} GFLOP per run)\n", gflops, kernel.flops() / 1e9);

  int status = kExitOk;
  if (o.check) {
    Tensor reference(desc.dtype, kernel.operand_shape(2));
    run_reference(desc, a.view(), b.view(), reference.view());
    double tolerance = o.tolerance.value_or(-1.0);
    if (!o.tolerance && o.math == MathMode::kTF32 && desc.dtype == DType::kFloat32) {
      // TF32 rounds each input to 10 mantissa bits: a product is off by up to 2^-10 of its size.
      auto max_abs = [](const Tensor& t) {
        double m = 0;
        for (std::int64_t i = 0; i < t.elements(); ++i) m = std::max(m, std::fabs(double(t.data_as<float>()[i])));
        return m;
      };
      const double k = static_cast<double>(std::max<std::int64_t>(reduction_length(desc, a, b), 1));
      tolerance = std::ldexp(1.0, -10) * k * max_abs(a) * max_abs(b) +
                  std::ldexp(1.0, -23) * max_abs(reference);
    }
    const CheckResult check = compare_results(desc, a, b, result, reference, tolerance);
    fmt::print(out, "check       max abs error {:.3g}, max rel error {:.3g} (max |ref| {:.3g}), "
               "tolerance {:.3g}: {}\n", check.max_abs_error, check.max_rel_error,
               check.max_abs_reference, check.tolerance, check.passed ? "PASS" : "FAIL");
    if (!check.passed) {
      fmt::print(err, "convjit run: check failed: max abs error {:.6g} exceeds the tolerance {:.6g}\n",
                 check.max_abs_error, check.tolerance);
      status = kExitFailure;
    }
  }
  if (o.output_path) {
    write_npy(*o.output_path, npy_from_tensor(result));
    fmt::print(out, "output      {} ({} {})\n", *o.output_path,
               npy_dtype_name(npy_dtype_for(desc.dtype)), shape_text(result.shape()));
  }
  out.flush();
  return status;
}

}  // namespace

void print_run_help(std::ostream& out) {
  fmt::print(out,
             "usage: convjit run --op NAME [attributes] [tensors] [options]\n"
             "       convjit run --desc \"<canonical descriptor>\" [tensors] [options]\n"
             "\n"
             "Compiles one TensorFlow conv op instance, runs it --repeats times after a warm-up\n"
             "and prints the canonical descriptor, backend, kernel name, compile time, median\n"
             "run time and GFLOP/s. Operands not given as .npy files are random in [-1, 1),\n"
             "shaped by --input-sizes / --filter-sizes; out_backprop's shape follows TensorFlow's\n"
             "output-size rule (SAME: ceil(in/stride), VALID: (in - k_eff + stride)/stride,\n"
             "EXPLICIT: with the pads).\n"
             "\n"
             "flags:\n{}"
             "\n"
             "Lists are comma separated, with or without brackets: --strides 1,2,2,1 or [1,2,2,1].\n"
             "\n"
             "exit status: 0 ok; 1 the op refused its input (TensorFlow's message is printed),\n"
             "a file could not be read or written, or --check failed; 2 a usage error.\n"
             "\n"
             "example:\n"
             "  convjit run --op Conv2DBackpropInput --input-sizes 8,28,28,128 \\\n"
             "      --filter-sizes 3,3,128,128 --strides 1,1,1,1 --padding SAME --check\n",
             format_flag_help(run_flag_specs()));
}

int run_command(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  try {
    if (std::find(args.begin(), args.end(), std::string_view("-h")) != args.end()) {
      print_run_help(out);
      return kExitOk;
    }
    const RunOptions options = parse_run_options(args);
    if (options.help) {
      print_run_help(out);
      return kExitOk;
    }
    return run_checked(options, out, err);
  } catch (const UsageError& e) {
    fmt::print(err, "convjit run: {}\nRun 'convjit run --help' for the flags.\n", e.what());
    return kExitUsage;
  } catch (const NpyError& e) {
    fmt::print(err, "convjit run: {}\n", e.what());
    return kExitFailure;
  } catch (const Error& e) {
    fmt::print(err, "convjit run: {}: {}\n", kind_name(e.kind()), e.what());
    return kExitFailure;
  } catch (const std::bad_alloc&) {
    fmt::print(err, "convjit run: out of memory\n");
    return kExitFailure;
  } catch (const std::exception& e) {
    fmt::print(err, "convjit run: {}\n", e.what());
    return kExitFailure;
  }
}

}  // namespace convjit::cli
