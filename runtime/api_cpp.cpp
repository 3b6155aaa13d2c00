// The C++ API of convjit.hpp: Tensor, Kernel, compile, run_reference and the descriptor text.
#include <limits>

#include <fmt/format.h>

#include "convjit/convjit.hpp"
#include "frontend/descriptor_text.hpp"
#include "frontend/validate.hpp"
#include "reference/naive.hpp"
#include "runtime/api_error.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/compile.hpp"
#include "runtime/device_memory.hpp"
#include "runtime/env.hpp"
#include "runtime/kernel.hpp"

namespace convjit {
namespace runtime {

void throw_status(const Status& status) {
  ErrorKind kind = ErrorKind::kInternal;
  switch (status.code()) {
    case StatusCode::kInvalidArgument: kind = ErrorKind::kInvalidArgument; break;
    case StatusCode::kUnimplemented: kind = ErrorKind::kUnimplemented; break;
    case StatusCode::kResourceExhausted: kind = ErrorKind::kResourceExhausted; break;
    case StatusCode::kNotFound: kind = ErrorKind::kNotFound; break;
    case StatusCode::kUnavailable: kind = ErrorKind::kUnavailable; break;
    case StatusCode::kInternal:
    case StatusCode::kOk: kind = ErrorKind::kInternal; break;
  }
  throw Error(kind, status.message());
}

}  // namespace runtime

namespace {

const detail::KernelImpl& checked_impl(const detail::KernelImpl* impl) {
  if (impl == nullptr) {
    throw Error(ErrorKind::kInvalidArgument,
                "convjit::Kernel is empty (default-constructed); get one from convjit::compile");
  }
  return *impl;
}

}  // namespace

Tensor::Tensor(DType dtype, std::vector<std::int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  std::int64_t count = 1;
  for (std::int64_t d : shape_) {
    if (d < 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  fmt::format("Tensor shape [{}] has a negative dimension", fmt::join(shape_, ",")));
    }
    if (d != 0 && count > std::numeric_limits<std::int64_t>::max() / dtype_size(dtype) / d) {
      throw Error(ErrorKind::kResourceExhausted,
                  fmt::format("Tensor shape [{}] of {} is too large", fmt::join(shape_, ","),
                              dtype_name(dtype)));
    }
    count *= d;
  }
  storage_.resize(static_cast<std::size_t>(count * dtype_size(dtype)));
}

std::int64_t Tensor::elements() const {
  std::int64_t count = 1;
  for (std::int64_t d : shape_) count *= d;
  return count;
}

TensorView Tensor::view() const {
  // A view is how a tensor is passed to run(); inputs are only read through it.
  return TensorView{dtype_, shape_, const_cast<std::byte*>(storage_.data())};
}

void Kernel::run(const TensorView& a, const TensorView& b, const TensorView& out) const {
  runtime::throw_if_error(checked_impl(impl_.get()).run(runtime::operand_args(a, b, out)));
}

void Kernel::run(const TensorView& a, const TensorView& b, const TensorView& out,
                 const RunContext& context) const {
  codegen::RunContext run_context;
  run_context.stream = context.stream;
  run_context.workspace = context.workspace;
  run_context.workspace_bytes = context.workspace_bytes;
  runtime::throw_if_error(
      checked_impl(impl_.get()).run(runtime::operand_args(a, b, out), run_context));
}

const std::string& Kernel::descriptor() const { return checked_impl(impl_.get()).descriptor(); }
const std::string& Kernel::backend() const { return checked_impl(impl_.get()).backend(); }
const std::string& Kernel::device() const { return checked_impl(impl_.get()).device(); }
std::size_t Kernel::workspace_bytes() const {
  return checked_impl(impl_.get()).workspace_bytes();
}
const std::string& Kernel::name() const { return checked_impl(impl_.get()).name(); }
double Kernel::compile_ms() const { return checked_impl(impl_.get()).compile_ms(); }
const std::string& Kernel::cache_source() const { return checked_impl(impl_.get()).cache_source(); }
double Kernel::flops() const { return checked_impl(impl_.get()).problem().flops(); }
std::size_t Kernel::scratch_bytes() const { return checked_impl(impl_.get()).scratch_bytes(); }

std::vector<std::int64_t> Kernel::operand_shape(int index) const {
  const detail::KernelImpl& impl = checked_impl(impl_.get());
  if (index < 0 || index > 2) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("Kernel::operand_shape: index must be 0, 1 or 2, but got {}", index));
  }
  const std::array<std::int64_t, 4> shape = impl.operand_shape(index);
  return {shape.begin(), shape.end()};
}

namespace {

runtime::Device parse_or_throw(const std::string& device) {
  Expected<runtime::Device> parsed = runtime::parse_device(device, runtime::env().cuda_interpret);
  if (!parsed.has_value()) runtime::throw_status(parsed.status());
  return *parsed;
}

}  // namespace

DeviceBuffer::DeviceBuffer(const std::string& device, std::size_t bytes)
    : bytes_(bytes), device_(device) {
  Expected<std::shared_ptr<void>> memory =
      runtime::allocate_device_memory(parse_or_throw(device), bytes);
  if (!memory.has_value()) runtime::throw_status(memory.status());
  data_ = std::move(memory).value();
}

void DeviceBuffer::copy_from_host(const void* source, std::size_t bytes) {
  if (bytes > bytes_) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("DeviceBuffer::copy_from_host: {} bytes into a buffer of {}", bytes,
                            bytes_));
  }
  runtime::throw_if_error(
      runtime::copy_to_device_memory(parse_or_throw(device_), data_.get(), source, bytes));
}

void DeviceBuffer::copy_to_host(void* destination, std::size_t bytes) const {
  if (bytes > bytes_) {
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("DeviceBuffer::copy_to_host: {} bytes from a buffer of {}", bytes,
                            bytes_));
  }
  runtime::throw_if_error(
      runtime::copy_from_device_memory(parse_or_throw(device_), destination, data_.get(), bytes));
}

void synchronize(const std::string& device, void* stream) {
  runtime::throw_if_error(runtime::synchronize_device(parse_or_throw(device), stream));
}

Kernel compile(const OpDescriptor& desc, const CompileOptions& options) {
  Expected<std::shared_ptr<const detail::KernelImpl>> kernel =
      runtime::compile_kernel(desc, options);
  if (!kernel.has_value()) runtime::throw_status(kernel.status());
  return Kernel(std::move(kernel).value());
}

void run_reference(const OpDescriptor& desc, const TensorView& a, const TensorView& b,
                   const TensorView& out) {
  Expected<ConvProblem> problem = validate(desc);
  if (!problem.has_value()) runtime::throw_status(problem.status());
  OperandPointers pointers;
  runtime::throw_if_error(runtime::check_operands(desc.op, problem.value(),
                                                  runtime::operand_args(a, b, out), &pointers));
  run_reference(problem.value(), pointers);
}

OpDescriptor parse_descriptor(std::string_view text) {
  Expected<OpDescriptor> desc = parse_descriptor_text(text);
  if (!desc.has_value()) runtime::throw_status(desc.status());
  return std::move(desc).value();
}

}  // namespace convjit
