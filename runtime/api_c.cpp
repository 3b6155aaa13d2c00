// The C ABI of convjit.h. Every entry point catches everything: no exception crosses the ABI.
// Errors become a status code plus this thread's last-error message.
#include "convjit/convjit.h"

#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "frontend/descriptor_text.hpp"
#include "frontend/validate.hpp"
#include "runtime/api_c_error.hpp"
#include "runtime/compile.hpp"
#include "runtime/kernel.hpp"
#include "runtime/thread_pool.hpp"

struct convjit_kernel {
  std::shared_ptr<const convjit::detail::KernelImpl> impl;
};

namespace {

using convjit::Status;
using convjit::StatusCode;

// More values than any attribute or shape of these ops can have: a longer array is a caller
// bug (or an uninitialised length) and is refused before anything is read.
constexpr std::int32_t kMaxArrayLength = 64;

thread_local std::string t_last_error;

convjit_status to_c(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return CONVJIT_OK;
    case StatusCode::kInvalidArgument: return CONVJIT_INVALID_ARGUMENT;
    case StatusCode::kUnimplemented: return CONVJIT_UNIMPLEMENTED;
    case StatusCode::kResourceExhausted: return CONVJIT_RESOURCE_EXHAUSTED;
    case StatusCode::kInternal: return CONVJIT_INTERNAL;
    case StatusCode::kNotFound: return CONVJIT_NOT_FOUND;
    case StatusCode::kUnavailable: return CONVJIT_UNAVAILABLE;
  }
  return CONVJIT_INTERNAL;
}

convjit_status fail(convjit_status code, std::string message) {
  try {
    t_last_error = std::move(message);
  } catch (...) {
    // Out of memory for the message itself: the code still says what happened.
  }
  return code;
}

convjit_status report(const Status& status) {
  if (status.is_ok()) return CONVJIT_OK;
  return fail(to_c(status.code()), status.message());
}

// Runs `body` (returning a Status) with every exception turned into a status code.
template <typename Body>
convjit_status guarded(const char* function, Body&& body) {
  try {
    return report(body());
  } catch (const std::bad_alloc&) {
    return fail(CONVJIT_RESOURCE_EXHAUSTED, fmt::format("{}: out of memory", function));
  } catch (const std::exception& e) {
    return fail(CONVJIT_INTERNAL,
                fmt::format("internal error in convjit (please report): {}: {}", function, e.what()));
  } catch (...) {
    return fail(CONVJIT_INTERNAL,
                fmt::format("internal error in convjit (please report): {}: unknown exception",
                            function));
  }
}

Status read_array(const char* field, const std::int64_t* data, std::int32_t length,
                  std::vector<std::int64_t>* out) {
  if (length < 0 || length > kMaxArrayLength) {
    return convjit::invalid_argument(fmt::format(
        "convjit_op_desc.{}_len must be in [0, {}], but got {}", field, kMaxArrayLength, length));
  }
  if (length > 0 && data == nullptr) {
    return convjit::invalid_argument(
        fmt::format("convjit_op_desc.{} is NULL but {}_len is {}", field, field, length));
  }
  out->assign(data, data + length);
  return Status::ok();
}

// A C caller may store any integer in an enum field. Loading it as the enum type is undefined
// for values outside the enumerators, so the field's raw bits are read instead.
long long raw_dtype(const convjit_dtype& field) {
  std::underlying_type_t<convjit_dtype> raw;
  static_assert(sizeof raw == sizeof field);
  std::memcpy(&raw, &field, sizeof raw);
  return static_cast<long long>(raw);
}

Status check_dtype(const char* what, long long dtype) {
  if (dtype < CONVJIT_HALF || dtype > CONVJIT_FLOAT64) {
    return convjit::invalid_argument(fmt::format("{}: unknown dtype {}", what, dtype));
  }
  return Status::ok();
}

Status to_descriptor(const convjit_op_desc& c, convjit::OpDescriptor* desc) {
  if (c.op == nullptr) return convjit::invalid_argument("convjit_op_desc.op is NULL");
  convjit::Expected<convjit::OpKind> op = convjit::parse_op_name(c.op);
  if (!op.has_value()) return op.status();
  desc->op = op.value();
  const long long dtype = raw_dtype(c.dtype);
  CONVJIT_RETURN_IF_ERROR(check_dtype("convjit_op_desc.dtype", dtype));
  desc->dtype = static_cast<convjit::DType>(dtype);
  desc->data_format = convjit::DataFormat::kNHWC;
  if (c.data_format != nullptr) {
    convjit::Expected<convjit::DataFormat> format = convjit::parse_data_format(c.data_format);
    if (!format.has_value()) return format.status();
    desc->data_format = format.value();
  }
  if (c.padding == nullptr) return convjit::invalid_argument("convjit_op_desc.padding is NULL");
  convjit::Expected<convjit::Padding> padding = convjit::parse_padding(c.padding);
  if (!padding.has_value()) return padding.status();
  desc->padding = padding.value();
  CONVJIT_RETURN_IF_ERROR(read_array("input", c.input, c.input_len, &desc->input));
  CONVJIT_RETURN_IF_ERROR(read_array("filter", c.filter, c.filter_len, &desc->filter));
  CONVJIT_RETURN_IF_ERROR(
      read_array("out_backprop", c.out_backprop, c.out_backprop_len, &desc->out_backprop));
  CONVJIT_RETURN_IF_ERROR(read_array("strides", c.strides, c.strides_len, &desc->strides));
  if (c.dilations == nullptr && c.dilations_len == 0) {
    desc->dilations = {1, 1, 1, 1};
  } else {
    CONVJIT_RETURN_IF_ERROR(
        read_array("dilations", c.dilations, c.dilations_len, &desc->dilations));
  }
  CONVJIT_RETURN_IF_ERROR(read_array("explicit_paddings", c.explicit_paddings,
                                     c.explicit_paddings_len, &desc->explicit_paddings));
  desc->sizes_rank = 1;
  return Status::ok();
}

Status to_operand(const char* name, const convjit_tensor* t, convjit::runtime::OperandArg* arg) {
  if (t == nullptr) return convjit::invalid_argument(fmt::format("convjit_run: {} is NULL", name));
  const long long dtype = raw_dtype(t->dtype);
  CONVJIT_RETURN_IF_ERROR(check_dtype(fmt::format("convjit_run: {}", name).c_str(), dtype));
  if (t->rank < 0 || t->rank > CONVJIT_MAX_RANK) {
    return convjit::invalid_argument(fmt::format("convjit_run: {}.rank must be in [0, {}], but got {}",
                                                 name, CONVJIT_MAX_RANK, t->rank));
  }
  arg->dtype = static_cast<convjit::DType>(dtype);
  arg->shape = std::span<const std::int64_t>(t->shape, static_cast<std::size_t>(t->rank));
  arg->data = t->data;
  return Status::ok();
}

Status to_options(const convjit_compile_options* c, convjit::CompileOptions* options) {
  if (c == nullptr) return Status::ok();
  if (c->device != nullptr) options->device = c->device;
  if (c->backend != nullptr) options->backend = c->backend;
  if (c->num_threads < 0) {
    return convjit::invalid_argument(fmt::format(
        "convjit_compile_options.num_threads must be >= 0, but got {}", c->num_threads));
  }
  options->num_threads = c->num_threads;
  if (c->math_mode != CONVJIT_MATH_EXACT && c->math_mode != CONVJIT_MATH_TF32) {
    return convjit::invalid_argument(
        fmt::format("convjit_compile_options.math_mode: unknown mode {}", c->math_mode));
  }
  options->math_mode =
      c->math_mode == CONVJIT_MATH_TF32 ? convjit::MathMode::kTF32 : convjit::MathMode::kExact;
  options->deterministic = c->nondeterministic == 0;
  options->always_compile = c->always_compile != 0;
  return Status::ok();
}

Status compile_to_handle(const convjit::OpDescriptor& desc, convjit_kernel** out,
                         const convjit::CompileOptions& options = {}) {
  auto kernel = convjit::runtime::compile_kernel(desc, options);
  if (!kernel.has_value()) return kernel.status();
  *out = new convjit_kernel{std::move(kernel).value()};
  return Status::ok();
}

// A C parallel loop as the runtime's ParallelFor.
convjit::ParallelFor to_parallel_for(convjit_parallel_for_fn fn, void* ctx) {
  return [fn, ctx](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
    // Bodies come from lib/ and codegen/, which never throw, so nothing unwinds through the
    // framework's C frames.
    auto trampoline = [](void* body_ctx, int64_t begin, int64_t end) {
      (*static_cast<const std::function<void(std::int64_t, std::int64_t)>*>(body_ctx))(begin, end);
    };
    fn(ctx, n, trampoline, const_cast<void*>(static_cast<const void*>(&body)));
  };
}

const char* kernel_string(const convjit_kernel* kernel, const char* function,
                          const std::string& (convjit::detail::KernelImpl::*field)() const) {
  if (kernel == nullptr) {
    fail(CONVJIT_INVALID_ARGUMENT, fmt::format("{}: kernel is NULL", function));
    return "";
  }
  return (kernel->impl.get()->*field)().c_str();
}

}  // namespace

namespace convjit::runtime {

convjit_status c_api_fail(convjit_status code, std::string message) {
  return fail(code, std::move(message));
}

}  // namespace convjit::runtime

extern "C" {

convjit_status convjit_compile(const convjit_op_desc* desc, convjit_kernel** out) {
  return guarded("convjit_compile", [&]() -> Status {
    if (out == nullptr) return convjit::invalid_argument("convjit_compile: out is NULL");
    *out = nullptr;
    if (desc == nullptr) return convjit::invalid_argument("convjit_compile: desc is NULL");
    convjit::OpDescriptor descriptor;
    CONVJIT_RETURN_IF_ERROR(to_descriptor(*desc, &descriptor));
    return compile_to_handle(descriptor, out);
  });
}

convjit_status convjit_compile_with_options(const convjit_op_desc* desc,
                                            const convjit_compile_options* options,
                                            convjit_kernel** out) {
  return guarded("convjit_compile_with_options", [&]() -> Status {
    if (out == nullptr) return convjit::invalid_argument("convjit_compile_with_options: out is NULL");
    *out = nullptr;
    if (desc == nullptr) {
      return convjit::invalid_argument("convjit_compile_with_options: desc is NULL");
    }
    convjit::OpDescriptor descriptor;
    CONVJIT_RETURN_IF_ERROR(to_descriptor(*desc, &descriptor));
    convjit::CompileOptions compile_options;
    CONVJIT_RETURN_IF_ERROR(to_options(options, &compile_options));
    return compile_to_handle(descriptor, out, compile_options);
  });
}

convjit_status convjit_compile_text(const char* descriptor_text, convjit_kernel** out) {
  return guarded("convjit_compile_text", [&]() -> Status {
    if (out == nullptr) return convjit::invalid_argument("convjit_compile_text: out is NULL");
    *out = nullptr;
    if (descriptor_text == nullptr) {
      return convjit::invalid_argument("convjit_compile_text: descriptor_text is NULL");
    }
    convjit::Expected<convjit::OpDescriptor> desc = convjit::parse_descriptor_text(descriptor_text);
    if (!desc.has_value()) return desc.status();
    return compile_to_handle(desc.value(), out);
  });
}

convjit_status convjit_run(const convjit_kernel* kernel, const convjit_tensor* a,
                           const convjit_tensor* b, const convjit_tensor* out) {
  return guarded("convjit_run", [&]() -> Status {
    if (kernel == nullptr) return convjit::invalid_argument("convjit_run: kernel is NULL");
    std::array<convjit::runtime::OperandArg, 3> args;
    CONVJIT_RETURN_IF_ERROR(to_operand("a", a, &args[0]));
    CONVJIT_RETURN_IF_ERROR(to_operand("b", b, &args[1]));
    CONVJIT_RETURN_IF_ERROR(to_operand("out", out, &args[2]));
    return kernel->impl->run(args);
  });
}

convjit_status convjit_run_with_context(const convjit_kernel* kernel, const convjit_tensor* a,
                                        const convjit_tensor* b, const convjit_tensor* out,
                                        const convjit_run_context* context) {
  return guarded("convjit_run_with_context", [&]() -> Status {
    if (kernel == nullptr) {
      return convjit::invalid_argument("convjit_run_with_context: kernel is NULL");
    }
    std::array<convjit::runtime::OperandArg, 3> args;
    CONVJIT_RETURN_IF_ERROR(to_operand("a", a, &args[0]));
    CONVJIT_RETURN_IF_ERROR(to_operand("b", b, &args[1]));
    CONVJIT_RETURN_IF_ERROR(to_operand("out", out, &args[2]));
    convjit::codegen::RunContext run_context;
    if (context != nullptr) {
      run_context.stream = context->stream;
      run_context.workspace = context->workspace;
      run_context.workspace_bytes = context->workspace_bytes;
    }
    return kernel->impl->run(args, run_context);
  });
}

convjit_status convjit_run_with_parallel_for(const convjit_kernel* kernel, const convjit_tensor* a,
                                             const convjit_tensor* b, const convjit_tensor* out,
                                             const convjit_run_context* context,
                                             convjit_parallel_for_fn fn, void* fn_ctx) {
  return guarded("convjit_run_with_parallel_for", [&]() -> Status {
    if (kernel == nullptr) {
      return convjit::invalid_argument("convjit_run_with_parallel_for: kernel is NULL");
    }
    std::array<convjit::runtime::OperandArg, 3> args;
    CONVJIT_RETURN_IF_ERROR(to_operand("a", a, &args[0]));
    CONVJIT_RETURN_IF_ERROR(to_operand("b", b, &args[1]));
    CONVJIT_RETURN_IF_ERROR(to_operand("out", out, &args[2]));
    convjit::codegen::RunContext run_context;
    if (context != nullptr) {
      run_context.stream = context->stream;
      run_context.workspace = context->workspace;
      run_context.workspace_bytes = context->workspace_bytes;
    }
    if (fn == nullptr) return kernel->impl->run(args, run_context);
    return kernel->impl->run(args, run_context, to_parallel_for(fn, fn_ctx));
  });
}

convjit_status convjit_infer_output_shape(const convjit_op_desc* desc,
                                          int64_t shape[CONVJIT_MAX_RANK]) {
  return guarded("convjit_infer_output_shape", [&]() -> Status {
    if (desc == nullptr || shape == nullptr) {
      return convjit::invalid_argument(
          "convjit_infer_output_shape: desc and shape must be non-NULL");
    }
    convjit::OpDescriptor descriptor;
    CONVJIT_RETURN_IF_ERROR(to_descriptor(*desc, &descriptor));
    convjit::Expected<convjit::ConvProblem> problem = convjit::validate(descriptor);
    if (!problem.has_value()) return problem.status();
    const std::array<std::int64_t, 4> result = problem->shape(problem->output_role());
    for (std::size_t i = 0; i < result.size(); ++i) shape[i] = result[i];
    return Status::ok();
  });
}

size_t convjit_kernel_workspace_bytes(const convjit_kernel* kernel) {
  if (kernel == nullptr) {
    fail(CONVJIT_INVALID_ARGUMENT, "convjit_kernel_workspace_bytes: kernel is NULL");
    return 0;
  }
  return kernel->impl->workspace_bytes();
}

void convjit_destroy(convjit_kernel* kernel) { delete kernel; }

int32_t convjit_kernel_operand_shape(const convjit_kernel* kernel, int32_t index,
                                     int64_t shape[CONVJIT_MAX_RANK]) {
  if (kernel == nullptr || shape == nullptr || index < 0 || index > 2) {
    fail(CONVJIT_INVALID_ARGUMENT,
         "convjit_kernel_operand_shape: kernel and shape must be non-NULL and index 0, 1 or 2");
    return -1;
  }
  const std::array<std::int64_t, 4> s = kernel->impl->operand_shape(index);
  for (std::size_t i = 0; i < s.size(); ++i) shape[i] = s[i];
  return static_cast<int32_t>(s.size());
}

const char* convjit_kernel_name(const convjit_kernel* kernel) {
  return kernel_string(kernel, "convjit_kernel_name", &convjit::detail::KernelImpl::name);
}

const char* convjit_kernel_backend(const convjit_kernel* kernel) {
  return kernel_string(kernel, "convjit_kernel_backend", &convjit::detail::KernelImpl::backend);
}

const char* convjit_kernel_device(const convjit_kernel* kernel) {
  return kernel_string(kernel, "convjit_kernel_device", &convjit::detail::KernelImpl::device);
}

const char* convjit_kernel_descriptor(const convjit_kernel* kernel) {
  return kernel_string(kernel, "convjit_kernel_descriptor",
                       &convjit::detail::KernelImpl::descriptor);
}

convjit_status convjit_set_parallel_for(convjit_parallel_for_fn fn, void* ctx) {
  return guarded("convjit_set_parallel_for", [&]() -> Status {
    if (fn == nullptr) {
      convjit::runtime::set_parallel_for_hook({});
      return Status::ok();
    }
    convjit::runtime::set_parallel_for_hook(to_parallel_for(fn, ctx));
    return Status::ok();
  });
}

const char* convjit_last_error(void) { return t_last_error.c_str(); }

const char* convjit_status_name(convjit_status status) {
  switch (status) {
    case CONVJIT_OK: return "OK";
    case CONVJIT_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case CONVJIT_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case CONVJIT_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case CONVJIT_INTERNAL: return "INTERNAL";
    case CONVJIT_NOT_FOUND: return "NOT_FOUND";
    case CONVJIT_UNAVAILABLE: return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

}  // extern "C"
