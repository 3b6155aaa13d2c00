// convjit's XLA FFI handlers (convjit.jax registers them with jax.ffi.register_ffi_target): one
// custom call, "convjit_op", computes any of the six ops named by its `op` attribute, with one
// handler per platform.
//   - The kernel is compiled on the first call for an op instance (attributes, operand shapes,
//     dtype, device, pool size) and kept in a process-wide table: later calls only look it up.
//   - CPU: its parallel loops run on XLA's intra-op thread pool (the FFI ThreadPool context);
//     the calling thread takes chunks too, so the loop finishes even when the pool is busy.
//   - CUDA: compiled for the call's device and queued on XLA's stream, the workspace from
//     XLA's scratch allocator.
//   - Errors keep convjit's (TensorFlow's) message; XLA raises them in Python.
// convjit_jax_infer (plain C, called through ctypes while tracing) validates an op instance
// and gives its result's shape, so a bad attribute fails at trace time with TensorFlow's text.
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "adapter_common.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using convjit_adapter::Attrs;
using convjit_adapter::Failure;
using convjit_adapter::KernelPtr;

// Enough chunks for the pool to balance uneven ones, few enough that scheduling is free.
constexpr std::int64_t kChunksPerThread = 4;

struct PoolLoop {
  ffi::ThreadPool* pool;
  std::int64_t threads;
};

// One parallel loop's shared state: outlives the call when a scheduled task starts late.
struct LoopState {
  std::int64_t chunks = 0, n = 0, block = 0;
  void (*body)(void*, std::int64_t, std::int64_t) = nullptr;
  void* body_ctx = nullptr;
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;

  // Runs chunks until none is left.
  void work() {
    for (;;) {
      const std::int64_t chunk = next.fetch_add(1, std::memory_order_relaxed);
      if (chunk >= chunks) return;
      const std::int64_t begin = chunk * block;
      const std::int64_t end = begin + block < n ? begin + block : n;
      body(body_ctx, begin, end);
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mutex);
        finished.notify_all();
      }
    }
  }
};

void xla_parallel_for(void* ctx, std::int64_t n, void (*body)(void*, std::int64_t, std::int64_t),
                      void* body_ctx) {
  const auto* loop = static_cast<const PoolLoop*>(ctx);
  if (n <= 0) return;
  if (loop->threads <= 1 || n == 1) {
    body(body_ctx, 0, n);
    return;
  }
  auto state = std::make_shared<LoopState>();
  const std::int64_t wanted = kChunksPerThread * loop->threads;
  state->block = (n + (n < wanted ? n : wanted) - 1) / (n < wanted ? n : wanted);
  state->chunks = (n + state->block - 1) / state->block;
  state->n = n;
  state->body = body;
  state->body_ctx = body_ctx;
  const std::int64_t helpers = (loop->threads < state->chunks ? loop->threads : state->chunks) - 1;
  for (std::int64_t i = 0; i < helpers; ++i) loop->pool->Schedule([state] { state->work(); });
  state->work();
  std::unique_lock<std::mutex> lock(state->mutex);
  state->finished.wait(lock, [&] {
    return state->done.load(std::memory_order_acquire) == state->chunks;
  });
}

bool to_convjit_dtype(ffi::DataType t, convjit_dtype* out) {
  switch (t) {
    case ffi::DataType::F16: *out = CONVJIT_HALF; return true;
    case ffi::DataType::BF16: *out = CONVJIT_BFLOAT16; return true;
    case ffi::DataType::F32: *out = CONVJIT_FLOAT32; return true;
    case ffi::DataType::F64: *out = CONVJIT_FLOAT64; return true;
    default: return false;
  }
}

ffi::Error to_ffi_error(const Failure& f) {
  switch (f.status) {
    case CONVJIT_OK: return ffi::Error::Success();
    case CONVJIT_INVALID_ARGUMENT: return ffi::Error(ffi::ErrorCode::kInvalidArgument, f.message);
    case CONVJIT_UNIMPLEMENTED: return ffi::Error(ffi::ErrorCode::kUnimplemented, f.message);
    case CONVJIT_RESOURCE_EXHAUSTED:
      return ffi::Error(ffi::ErrorCode::kResourceExhausted, f.message);
    case CONVJIT_NOT_FOUND: return ffi::Error(ffi::ErrorCode::kNotFound, f.message);
    case CONVJIT_UNAVAILABLE: return ffi::Error(ffi::ErrorCode::kUnavailable, f.message);
    default: break;
  }
  return ffi::Error(ffi::ErrorCode::kInternal, f.message);
}

std::vector<std::int64_t> to_vector(ffi::Span<const std::int64_t> span) {
  return std::vector<std::int64_t>(span.begin(), span.end());
}

// Kernels of every op instance this process ran; an XLA executable runs the same few many
// times, so the table stays small (past its capacity it starts again).
convjit_adapter::KernelTable& kernels() {
  static auto* table = new convjit_adapter::KernelTable();  // never destroyed: safe at exit
  return *table;
}

// One call's op instance, decoded from its operands and attributes.
struct OpCall {
  Attrs attrs;
  convjit_dtype dtype = CONVJIT_FLOAT32;
  std::vector<std::int64_t> sizes, a_dims, b_dims;
};

ffi::Error decode_call(ffi::AnyBuffer a, ffi::AnyBuffer b, std::string_view op,
                       ffi::Span<const std::int64_t> sizes, ffi::Span<const std::int64_t> strides,
                       std::string_view padding, ffi::Span<const std::int64_t> explicit_paddings,
                       std::string_view data_format, ffi::Span<const std::int64_t> dilations,
                       OpCall* call) {
  if (!convjit_adapter::parse_op(std::string(op), &call->attrs.op)) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "convjit_op: unknown op " + std::string(op));
  }
  if (!to_convjit_dtype(a.element_type(), &call->dtype) || a.element_type() != b.element_type()) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                      std::string(convjit_adapter::op_name(call->attrs.op)) +
                          ": convjit computes float16, bfloat16, float32 and float64 operands of "
                          "one dtype");
  }
  call->attrs.padding = std::string(padding);
  call->attrs.data_format = std::string(data_format);
  call->attrs.strides = to_vector(strides);
  call->attrs.dilations = to_vector(dilations);
  call->attrs.explicit_paddings = to_vector(explicit_paddings);
  call->sizes = to_vector(sizes);
  call->a_dims = to_vector(a.dimensions());
  call->b_dims = to_vector(b.dimensions());
  return ffi::Error::Success();
}

// The kernel of `call` for `device` ("cpu" with `threads` pool threads, or "cuda:N"), compiled
// on the process's first call of that instance.
Failure kernel_for(const OpCall& call, const std::string& device, std::int64_t threads,
                   KernelPtr* kernel) {
  convjit_adapter::KernelTable::Key key;
  key.values = {static_cast<std::int64_t>(call.attrs.op), call.dtype, threads, -1};
  const std::vector<std::int64_t>* parts[] = {&call.sizes,           &call.a_dims,
                                              &call.b_dims,          &call.attrs.strides,
                                              &call.attrs.dilations, &call.attrs.explicit_paddings};
  for (const std::vector<std::int64_t>* v : parts) {
    key.values.insert(key.values.end(), v->begin(), v->end());
    key.values.push_back(-1);
  }
  for (char c : call.attrs.padding + "|" + call.attrs.data_format + "|" + device) {
    key.values.push_back(c);
  }
  return kernels().get(
      key,
      [&](KernelPtr* made) {
        return convjit_adapter::compile(call.attrs, call.dtype, call.sizes, call.a_dims,
                                        call.b_dims, device, static_cast<int>(threads), made);
      },
      kernel);
}

// Runs `kernel` on the call's buffers (host memory on CPU, device memory on a GPU).
ffi::Error run_kernel(const OpCall& call, const KernelPtr& kernel, const ffi::AnyBuffer& a,
                      const ffi::AnyBuffer& b, ffi::Result<ffi::AnyBuffer>& out,
                      const convjit_run_context* context, convjit_parallel_for_fn loop,
                      void* loop_ctx) {
  const std::array<std::int64_t, 4> out_dims = convjit_adapter::output_shape(kernel.get());
  const convjit_tensor ta = convjit_adapter::make_tensor(
      call.dtype, call.a_dims.data(), static_cast<int>(call.a_dims.size()), a.untyped_data());
  const convjit_tensor tb = convjit_adapter::make_tensor(
      call.dtype, call.b_dims.data(), static_cast<int>(call.b_dims.size()), b.untyped_data());
  const convjit_tensor tout =
      convjit_adapter::make_tensor(call.dtype, out_dims.data(), 4, out->untyped_data());
  const convjit_status status =
      convjit_run_with_parallel_for(kernel.get(), &ta, &tb, &tout, context, loop, loop_ctx);
  return to_ffi_error(convjit_adapter::last_failure(status));
}

// The CPU handler: the kernel's parallel loops run on XLA's intra-op pool.
ffi::Error run_op_cpu(ffi::ThreadPool pool, ffi::AnyBuffer a, ffi::AnyBuffer b,
                      ffi::Result<ffi::AnyBuffer> out, std::string_view op,
                      ffi::Span<const std::int64_t> sizes, ffi::Span<const std::int64_t> strides,
                      std::string_view padding, ffi::Span<const std::int64_t> explicit_paddings,
                      std::string_view data_format, ffi::Span<const std::int64_t> dilations) {
  OpCall call;
  ffi::Error decoded = decode_call(a, b, op, sizes, strides, padding, explicit_paddings,
                                   data_format, dilations, &call);
  if (decoded.failure()) return decoded;
  const std::int64_t threads = pool.num_threads() > 0 ? pool.num_threads() : 1;
  KernelPtr kernel;
  const Failure failure = kernel_for(call, "cpu", threads, &kernel);
  if (!failure.ok()) return to_ffi_error(failure);
  PoolLoop loop{&pool, threads};
  return run_kernel(call, kernel, a, b, out, nullptr, &xla_parallel_for, &loop);
}

// The CUDA handler: the kernel, compiled for the call's device, is queued on XLA's stream with
// a workspace from XLA's allocator (freed when the call returns, which XLA orders after the
// stream's work); the call returns once the work is queued.
ffi::Error run_op_cuda(void* stream, ffi::ScratchAllocator scratch, std::int32_t ordinal,
                       ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> out,
                       std::string_view op, ffi::Span<const std::int64_t> sizes,
                       ffi::Span<const std::int64_t> strides, std::string_view padding,
                       ffi::Span<const std::int64_t> explicit_paddings,
                       std::string_view data_format, ffi::Span<const std::int64_t> dilations) {
  OpCall call;
  ffi::Error decoded = decode_call(a, b, op, sizes, strides, padding, explicit_paddings,
                                   data_format, dilations, &call);
  if (decoded.failure()) return decoded;
  KernelPtr kernel;
  const Failure failure = kernel_for(call, "cuda:" + std::to_string(ordinal), 0, &kernel);
  if (!failure.ok()) return to_ffi_error(failure);
  convjit_run_context context;
  std::memset(&context, 0, sizeof context);
  context.stream = stream;
  context.workspace_bytes = convjit_kernel_workspace_bytes(kernel.get());
  if (context.workspace_bytes > 0) {
    constexpr std::size_t kWorkspaceAlignment = 256;
    const std::optional<void*> workspace =
        scratch.Allocate(context.workspace_bytes, kWorkspaceAlignment);
    if (!workspace.has_value()) {
      return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                        std::string(convjit_adapter::op_name(call.attrs.op)) +
                            ": XLA could not allocate the kernel's workspace of " +
                            std::to_string(context.workspace_bytes) + " bytes");
    }
    context.workspace = *workspace;
  }
  return run_kernel(call, kernel, a, b, out, &context, nullptr, nullptr);
}

// The attributes both handlers take, after their contexts and buffers.
template <typename Binding>
auto bind_attributes(Binding binding) {
  return std::move(binding)
      .template Attr<std::string_view>("op")
      .template Attr<ffi::Span<const std::int64_t>>("sizes")
      .template Attr<ffi::Span<const std::int64_t>>("strides")
      .template Attr<std::string_view>("padding")
      .template Attr<ffi::Span<const std::int64_t>>("explicit_paddings")
      .template Attr<std::string_view>("data_format")
      .template Attr<ffi::Span<const std::int64_t>>("dilations");
}

}  // namespace

// The handlers are the library's exported symbols besides convjit_jax_infer (the rest is
// compiled hidden). ConvjitOpCuda is registered for JAX's CUDA platform; it needs a libconvjit
// built with the CUDA backend (else its calls fail with convjit's "unavailable" message).
#pragma GCC visibility push(default)
XLA_FFI_DEFINE_HANDLER_SYMBOL(ConvjitOp, run_op_cpu,
                              bind_attributes(ffi::Ffi::Bind()
                                                  .Ctx<ffi::ThreadPool>()
                                                  .Arg<ffi::AnyBuffer>()
                                                  .Arg<ffi::AnyBuffer>()
                                                  .Ret<ffi::AnyBuffer>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(ConvjitOpCuda, run_op_cuda,
                              bind_attributes(ffi::Ffi::Bind()
                                                  .Ctx<ffi::PlatformStream<void*>>()
                                                  .Ctx<ffi::ScratchAllocator>()
                                                  .Ctx<ffi::DeviceOrdinal>()
                                                  .Arg<ffi::AnyBuffer>()
                                                  .Arg<ffi::AnyBuffer>()
                                                  .Ret<ffi::AnyBuffer>()));
#pragma GCC visibility pop

// Validates an op instance and stores its result's shape in out[0..3]: 0 on success, else the
// convjit status with its message in message[0..message_len).
extern "C" __attribute__((visibility("default"))) int convjit_jax_infer(
    const char* op, int dtype, const std::int64_t* sizes, int sizes_len, const std::int64_t* a,
    const std::int64_t* b, const std::int64_t* strides, int strides_len, const char* padding,
    const std::int64_t* explicit_paddings, int explicit_len, const char* data_format,
    const std::int64_t* dilations, int dilations_len, std::int64_t* out, char* message,
    int message_len) {
  Attrs attrs;
  if (!convjit_adapter::parse_op(op, &attrs.op)) {
    std::snprintf(message, static_cast<std::size_t>(message_len), "unknown op %s", op);
    return CONVJIT_INVALID_ARGUMENT;
  }
  attrs.padding = padding;
  attrs.data_format = data_format;
  attrs.strides.assign(strides, strides + strides_len);
  attrs.explicit_paddings.assign(explicit_paddings, explicit_paddings + explicit_len);
  attrs.dilations.assign(dilations, dilations + dilations_len);
  std::array<std::int64_t, 4> shape{};
  const Failure failure = convjit_adapter::infer_output_shape(
      attrs, static_cast<convjit_dtype>(dtype), std::vector<std::int64_t>(sizes, sizes + sizes_len),
      std::vector<std::int64_t>(a, a + 4), std::vector<std::int64_t>(b, b + 4), &shape);
  if (!failure.ok()) {
    std::snprintf(message, static_cast<std::size_t>(message_len), "%s", failure.message.c_str());
    return failure.status;
  }
  for (int i = 0; i < 4; ++i) out[i] = shape[static_cast<std::size_t>(i)];
  return 0;
}
