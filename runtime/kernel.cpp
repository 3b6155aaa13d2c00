#include "runtime/kernel.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "runtime/kernel_cache.hpp"
#include "runtime/thread_pool.hpp"
#include "runtime/verbose_log.hpp"

namespace convjit::runtime {

std::array<TensorRole, 3> operand_roles(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::kForward: return {TensorRole::kX, TensorRole::kW, TensorRole::kY};
    case ConvDirection::kBackpropData: return {TensorRole::kW, TensorRole::kY, TensorRole::kX};
    case ConvDirection::kBackpropFilter: return {TensorRole::kX, TensorRole::kY, TensorRole::kW};
  }
  return {TensorRole::kX, TensorRole::kW, TensorRole::kY};
}

std::string_view operand_name(OpKind op, int index) {
  switch (op) {
    case OpKind::kConv2D:
    case OpKind::kDepthwiseConv2dNative: {
      constexpr std::string_view kNames[] = {"input", "filter", "output"};
      return kNames[index];
    }
    case OpKind::kConv2DBackpropInput:
    case OpKind::kConv2DBackpropInputV2:
    case OpKind::kDepthwiseConv2dNativeBackpropInput: {
      constexpr std::string_view kNames[] = {"filter", "out_backprop", "output (input gradient)"};
      return kNames[index];
    }
    case OpKind::kConv2DBackpropFilter:
    case OpKind::kDepthwiseConv2dNativeBackpropFilter: {
      constexpr std::string_view kNames[] = {"input", "out_backprop", "output (filter gradient)"};
      return kNames[index];
    }
  }
  return "operand";
}

Status check_operands(OpKind op, const ConvProblem& problem, const std::array<OperandArg, 3>& args,
                      OperandPointers* pointers) {
  const std::array<TensorRole, 3> roles = operand_roles(problem.direction);
  for (int i = 0; i < 3; ++i) {
    const OperandArg& arg = args[static_cast<std::size_t>(i)];
    const TensorRole role = roles[static_cast<std::size_t>(i)];
    const std::array<std::int64_t, 4> expected = problem.shape(role);
    const std::string_view name = operand_name(op, i);
    if (arg.dtype != problem.dtype) {
      return invalid_argument(fmt::format("{}: operand '{}' has dtype {}, expected {}",
                                          op_name(op), name, dtype_name(arg.dtype),
                                          dtype_name(problem.dtype)));
    }
    const bool same_shape = arg.shape.size() == expected.size() &&
                            std::equal(expected.begin(), expected.end(), arg.shape.begin());
    if (!same_shape) {
      return invalid_argument(fmt::format("{}: operand '{}' has shape [{}], expected [{}]",
                                          op_name(op), name, fmt::join(arg.shape, ","),
                                          fmt::join(expected, ",")));
    }
    if (arg.data == nullptr && problem.elements(role) > 0) {
      return invalid_argument(fmt::format("{}: operand '{}' of shape [{}] has no data (null pointer)",
                                          op_name(op), name, fmt::join(expected, ",")));
    }
    switch (role) {
      case TensorRole::kX: pointers->x = arg.data; break;
      case TensorRole::kW: pointers->w = arg.data; break;
      case TensorRole::kY: pointers->y = arg.data; break;
    }
  }
  return check_no_alias(op, problem, args);
}

Status check_no_alias(OpKind op, const ConvProblem& problem,
                      const std::array<OperandArg, 3>& args) {
  // The kernels write the output while they still read the inputs (and zero or pre-fill parts
  // of it first), so any shared byte gives a wrong result: refused, never computed.
  const std::array<TensorRole, 3> roles = operand_roles(problem.direction);
  struct Range {
    std::uintptr_t begin, end;
  };
  auto range_of = [&](int i) {
    const auto begin = reinterpret_cast<std::uintptr_t>(args[static_cast<std::size_t>(i)].data);
    const auto bytes = static_cast<std::uintptr_t>(
        problem.elements(roles[static_cast<std::size_t>(i)]) * dtype_size(problem.dtype));
    return Range{begin, begin + bytes};
  };
  const Range out = range_of(2);
  if (out.begin == out.end) return Status::ok();  // nothing is written
  for (int i = 0; i < 2; ++i) {
    const Range in = range_of(i);
    if (in.begin == in.end || in.end <= out.begin || out.end <= in.begin) continue;
    return invalid_argument(fmt::format(
        "{}: operand '{}' ([{:#x}, {:#x}), {} bytes) overlaps operand '{}' ([{:#x}, {:#x}), {} "
        "bytes); the output must not share memory with an input",
        op_name(op), operand_name(op, 2), out.begin, out.end, out.end - out.begin,
        operand_name(op, i), in.begin, in.end, in.end - in.begin));
  }
  return Status::ok();
}

}  // namespace convjit::runtime

namespace convjit::detail {

KernelImpl::KernelImpl(std::shared_ptr<const runtime::CompiledKernel> compiled, OpKind op,
                       std::string descriptor, std::string cache_source, ParallelFor parallel_for)
    : compiled_(std::move(compiled)),
      op_(op),
      descriptor_(std::move(descriptor)),
      cache_source_(std::move(cache_source)),
      parallel_for_(std::move(parallel_for)) {}

std::array<std::int64_t, 4> KernelImpl::operand_shape(int index) const {
  const std::array<TensorRole, 3> roles = runtime::operand_roles(problem().direction);
  return problem().shape(roles[static_cast<std::size_t>(index)]);
}

Status KernelImpl::run(const std::array<runtime::OperandArg, 3>& args,
                       const codegen::RunContext& context, const ParallelFor& parallel_for) const {
  const ConvProblem& p = problem();
  OperandPointers pointers;
  CONVJIT_RETURN_IF_ERROR(runtime::check_operands(op_, p, args, &pointers));

  const bool log = runtime::verbose_level() >= 1;
  const auto start = log ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (!compiled_->code) {
    // TensorFlow's result for an empty operand is all zeros (one of its kernels leaves the
    // output uninitialised; convjit defines it). Host backends need no code for it; a device
    // backend compiles its own zero fill, so device memory is never touched from here.
    const TensorRole out = p.output_role();
    const std::int64_t bytes = p.elements(out) * dtype_size(p.dtype);
    if (bytes > 0) std::memset(pointers.get(out), 0, static_cast<std::size_t>(bytes));
  } else {
    codegen::RunContext run_context = context;
    run_context.parallel_for =
        parallel_for ? parallel_for
                     : runtime::resolve_parallel_for(parallel_for_, compiled_->num_threads);
    CONVJIT_RETURN_IF_ERROR(compiled_->code->run(pointers, run_context));
    // The run may have left a scratch block with the kernel: the memory cache's byte bound.
    runtime::global_kernel_cache().note_run(*compiled_);
  }
  if (log) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    runtime::log_run(*this, ms);
  }
  return Status::ok();
}

}  // namespace convjit::detail
