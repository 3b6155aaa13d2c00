// convjit C++ API: compile an op descriptor into a kernel, then run it; plus helpers shaped like
// TensorFlow's Python functions. This is the only layer that throws (convjit::Error).
// The header is C++17: frameworks (TensorFlow's custom ops among them) build their code as C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "convjit/types.hpp"

// libconvjit is compiled with hidden visibility; what this header declares is its exported API.
#pragma GCC visibility push(default)

namespace convjit {

/// What went wrong, as the C ABI's status codes number it.
enum class ErrorKind : int {
  kInvalidArgument = 1,  // bad descriptor or tensors; the message is TensorFlow's text
  kUnimplemented = 2,
  kResourceExhausted = 3,
  kInternal = 4,         // a bug in convjit
  kNotFound = 5,
  kUnavailable = 6,
};

/// Thrown by every function of this header on failure.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

/// A non-owning view of a dense tensor in its op's layout (activations in data_format order,
/// filters HWIO). Input tensors are only read.
struct TensorView {
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  void* data = nullptr;
};

/// Storage that starts on a cache line (64 bytes), as frameworks allocate tensors: vector
/// loads then never straddle two lines, and a kernel can write its output past the caches.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::size_t kAlignment = 64;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: rebinding converts implicitly
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kAlignment}));
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{kAlignment}); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};

/// An owning dense tensor (zero-initialised), as the TensorFlow-shaped helpers return; its
/// data starts on a cache line.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::vector<std::int64_t> shape);
  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t elements() const;
  std::size_t bytes() const { return storage_.size(); }
  void* data() { return storage_.data(); }
  const void* data() const { return storage_.data(); }
  template <typename T>
  T* data_as() { return reinterpret_cast<T*>(storage_.data()); }
  template <typename T>
  const T* data_as() const { return reinterpret_cast<const T*>(storage_.data()); }
  TensorView view() const;

 private:
  DType dtype_ = DType::kFloat32;
  std::vector<std::int64_t> shape_;
  std::vector<std::byte, CacheLineAllocator<std::byte>> storage_;
};

/// An embedding framework's parallel loop: call body(begin, end) over chunks covering [0, n)
/// and return when all are done.
using ParallelForFn =
    std::function<void(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body)>;

/// How float32 products are computed where the device could do them in lower precision.
enum class MathMode : std::uint8_t {
  kExact,  ///< float32 in float32 (the default)
  kTF32,   ///< NVIDIA tensor cores' TF32 inputs (10-bit mantissa) with f32 accumulation
};

struct CompileOptions {
  /// Where the kernel runs: "cpu" (the default when empty), "cuda" (device 0), "cuda:N", or
  /// "cuda-interpret" (the CUDA backend's own kernels executed on the host; pointers are host
  /// memory). $CONVJIT_CUDA_INTERPRET=1 turns "cuda" into "cuda-interpret".
  std::string device;
  /// "x86", "interpreter", "cuda", ... ; empty: $CONVJIT_BACKEND, else the device's best.
  std::string backend;
  /// Threads a run may use; 0: $CONVJIT_NUM_THREADS, else all cores.
  int num_threads = 0;
  /// Bypass every cache and generate code again ($CONVJIT_ALWAYS_COMPILE=1 does the same).
  bool always_compile = false;
  /// Run parallel loops through this instead of convjit's thread pool.
  ParallelForFn parallel_for;
  /// float32 math on devices that offer a faster, less precise mode (part of the cache key).
  MathMode math_mode = MathMode::kExact;
  /// Same inputs, same bits: no floating-point atomics in reductions. false lets a device
  /// backend reduce filter gradients with atomics where that is faster (part of the cache key).
  bool deterministic = true;
};

/// What one run needs besides its tensors. CPU kernels ignore it (their threads come from
/// CompileOptions::parallel_for, the hook or convjit's pool).
struct RunContext {
  /// The CUDA stream (CUstream / cudaStream_t) the kernel is queued on; nullptr is the
  /// legacy default stream. The run returns once the work is queued, not done.
  void* stream = nullptr;
  /// Device memory the kernel may use as workspace, at least Kernel::workspace_bytes() bytes;
  /// nullptr lets convjit allocate (and keep) its own.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

// The kernel's implementation stays internal (hidden): declared outside the exported region.
#pragma GCC visibility pop
namespace detail {
class KernelImpl;
}
#pragma GCC visibility push(default)

/// A compiled op instance. Immutable; copies share the code; run() may be called from many
/// threads at once.
class Kernel {
 public:
  Kernel() = default;
  explicit Kernel(std::shared_ptr<const detail::KernelImpl> impl) : impl_(std::move(impl)) {}

  /// Runs the op. `a` and `b` are the op's two tensor operands in TensorFlow's argument order
  /// and `out` receives the result:
  ///   Conv2D / DepthwiseConv2dNative:        a = input,  b = filter,       out = output
  ///   Conv2DBackpropInput(V2) / Depthwise*:  a = filter, b = out_backprop, out = input grad
  ///   Conv2DBackpropFilter / Depthwise*:     a = input,  b = out_backprop, out = filter grad
  /// Shapes and dtypes must match the descriptor exactly. `out` must not share a byte with
  /// `a` or `b` (no in-place runs): an overlap throws kInvalidArgument and writes nothing.
  void run(const TensorView& a, const TensorView& b, const TensorView& out) const;
  /// The same on a device stream and, optionally, the caller's workspace. For a CUDA kernel
  /// the data pointers are device memory (host memory for "cuda-interpret").
  void run(const TensorView& a, const TensorView& b, const TensorView& out,
           const RunContext& context) const;

  bool valid() const { return impl_ != nullptr; }
  /// The canonical descriptor text this kernel was compiled from.
  const std::string& descriptor() const;
  /// "x86", "interpreter", "cuda", ...
  const std::string& backend() const;
  /// "cpu", "cuda:0", "cuda-interpret", ...: where run() expects its tensors.
  const std::string& device() const;
  /// Self-describing name with the chosen blocking.
  const std::string& name() const;
  /// Shapes of a, b and out as run() expects them.
  std::vector<std::int64_t> operand_shape(int index) const;
  /// Wall time spent compiling (0 when it came from a cache).
  double compile_ms() const;
  /// "memory", "disk" or "none": where compile() found it.
  const std::string& cache_source() const;
  /// Nominal FLOPs of one run.
  double flops() const;
  /// Bytes of host scratch (packed filter, partial sums) one run uses.
  std::size_t scratch_bytes() const;
  /// Bytes of device workspace one run needs (RunContext::workspace); 0 on the CPU.
  std::size_t workspace_bytes() const;

  const detail::KernelImpl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<const detail::KernelImpl> impl_;
};

/// Memory where kernels of `device` expect their tensors: device memory on "cuda" and "cuda:N"
/// (from the CUDA driver), host memory (64-byte aligned) on "cpu" and "cuda-interpret". For
/// programs without a framework of their own, such as the command line and tests; frameworks
/// pass their own pointers to Kernel::run.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// `bytes` of uninitialised memory on `device`; throws convjit::Error (e.g. "no CUDA device:
  /// ..." without a GPU, kResourceExhausted when the device is out of memory).
  DeviceBuffer(const std::string& device, std::size_t bytes);
  void* data() const { return data_.get(); }
  std::size_t bytes() const { return bytes_; }
  const std::string& device() const { return device_; }
  /// Synchronous copies of the first `bytes` bytes, ordered after the work queued on the
  /// device's default stream (synchronize() another stream first). Throws when `bytes`
  /// exceeds the buffer.
  void copy_from_host(const void* source, std::size_t bytes);
  void copy_to_host(void* destination, std::size_t bytes) const;

 private:
  std::shared_ptr<void> data_;
  std::size_t bytes_ = 0;
  std::string device_;
};

/// Waits until the work queued on `stream` (nullptr: the default stream) of a CUDA device is
/// done. Nothing to wait for on "cpu" and "cuda-interpret", whose runs are synchronous.
void synchronize(const std::string& device, void* stream = nullptr);

/// Validates and compiles (or fetches from the cache) a kernel for `desc`.
Kernel compile(const OpDescriptor& desc, const CompileOptions& options = {});

/// Computes the op with convjit's naive reference (the test oracle): slow, written straight
/// from the formulas, independent of the IR and every backend. Operands as for Kernel::run.
void run_reference(const OpDescriptor& desc, const TensorView& a, const TensorView& b,
                   const TensorView& out);

/// Canonical one-line text of a descriptor, and its parser (throws on a malformed line).
std::string to_text(const OpDescriptor& desc);
OpDescriptor parse_descriptor(std::string_view text);

/// Optional attributes of the TensorFlow-shaped helpers, defaulted as TensorFlow does.
struct ConvAttrs {
  std::vector<std::int64_t> explicit_paddings;
  std::string data_format = "NHWC";
  std::vector<std::int64_t> dilations{1, 1, 1, 1};
};

/// tf.raw_ops.Conv2DBackpropInput: gradient w.r.t. the input (shape `input_sizes`).
Tensor conv2d_backprop_input(const std::vector<std::int64_t>& input_sizes, const TensorView& filter,
                             const TensorView& out_backprop, const std::vector<std::int64_t>& strides,
                             std::string_view padding, const ConvAttrs& attrs = {});
/// tf.raw_ops.Conv2DBackpropFilter: gradient w.r.t. the filter (shape `filter_sizes`).
Tensor conv2d_backprop_filter(const TensorView& input, const std::vector<std::int64_t>& filter_sizes,
                              const TensorView& out_backprop, const std::vector<std::int64_t>& strides,
                              std::string_view padding, const ConvAttrs& attrs = {});
/// tf.raw_ops.DepthwiseConv2dNativeBackpropInput.
Tensor depthwise_conv2d_native_backprop_input(const std::vector<std::int64_t>& input_sizes,
                                              const TensorView& filter,
                                              const TensorView& out_backprop,
                                              const std::vector<std::int64_t>& strides,
                                              std::string_view padding,
                                              const ConvAttrs& attrs = {});
/// tf.raw_ops.DepthwiseConv2dNativeBackpropFilter.
Tensor depthwise_conv2d_native_backprop_filter(const TensorView& input,
                                               const std::vector<std::int64_t>& filter_sizes,
                                               const TensorView& out_backprop,
                                               const std::vector<std::int64_t>& strides,
                                               std::string_view padding,
                                               const ConvAttrs& attrs = {});
/// tf.raw_ops.Conv2D.
Tensor conv2d(const TensorView& input, const TensorView& filter,
              const std::vector<std::int64_t>& strides, std::string_view padding,
              const ConvAttrs& attrs = {});
/// tf.raw_ops.DepthwiseConv2dNative.
Tensor depthwise_conv2d_native(const TensorView& input, const TensorView& filter,
                               const std::vector<std::int64_t>& strides, std::string_view padding,
                               const ConvAttrs& attrs = {});

}  // namespace convjit

#pragma GCC visibility pop
