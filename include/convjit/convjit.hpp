// convjit C++ API: compile an op descriptor into a kernel, then run it; plus helpers shaped like
// TensorFlow's Python functions. This is the only layer that throws (convjit::Error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "convjit/types.hpp"

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

struct CompileOptions {
  /// "x86", "interpreter", ... ; empty: $CONVJIT_BACKEND, else the best backend for the host.
  std::string backend;
  /// Threads a run may use; 0: $CONVJIT_NUM_THREADS, else all cores.
  int num_threads = 0;
  /// Bypass every cache and generate code again ($CONVJIT_ALWAYS_COMPILE=1 does the same).
  bool always_compile = false;
  /// Run parallel loops through this instead of convjit's thread pool.
  ParallelForFn parallel_for;
};

namespace detail {
class KernelImpl;
}

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
  /// Shapes and dtypes must match the descriptor exactly.
  void run(const TensorView& a, const TensorView& b, const TensorView& out) const;

  bool valid() const { return impl_ != nullptr; }
  /// The canonical descriptor text this kernel was compiled from.
  const std::string& descriptor() const;
  /// "x86-avx512", "interpreter", ...
  const std::string& backend() const;
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
  /// Bytes of scratch (packed filter, partial sums) one run uses.
  std::size_t scratch_bytes() const;

  const detail::KernelImpl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<const detail::KernelImpl> impl_;
};

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
Tensor conv2d_backprop_input(std::span<const std::int64_t> input_sizes, const TensorView& filter,
                             const TensorView& out_backprop, std::span<const std::int64_t> strides,
                             std::string_view padding, const ConvAttrs& attrs = {});
/// tf.raw_ops.Conv2DBackpropFilter: gradient w.r.t. the filter (shape `filter_sizes`).
Tensor conv2d_backprop_filter(const TensorView& input, std::span<const std::int64_t> filter_sizes,
                              const TensorView& out_backprop, std::span<const std::int64_t> strides,
                              std::string_view padding, const ConvAttrs& attrs = {});
/// tf.raw_ops.DepthwiseConv2dNativeBackpropInput.
Tensor depthwise_conv2d_native_backprop_input(std::span<const std::int64_t> input_sizes,
                                              const TensorView& filter,
                                              const TensorView& out_backprop,
                                              std::span<const std::int64_t> strides,
                                              std::string_view padding,
                                              const ConvAttrs& attrs = {});
/// tf.raw_ops.DepthwiseConv2dNativeBackpropFilter.
Tensor depthwise_conv2d_native_backprop_filter(const TensorView& input,
                                               std::span<const std::int64_t> filter_sizes,
                                               const TensorView& out_backprop,
                                               std::span<const std::int64_t> strides,
                                               std::string_view padding,
                                               const ConvAttrs& attrs = {});
/// tf.raw_ops.Conv2D.
Tensor conv2d(const TensorView& input, const TensorView& filter,
              std::span<const std::int64_t> strides, std::string_view padding,
              const ConvAttrs& attrs = {});
/// tf.raw_ops.DepthwiseConv2dNative.
Tensor depthwise_conv2d_native(const TensorView& input, const TensorView& filter,
                               std::span<const std::int64_t> strides, std::string_view padding,
                               const ConvAttrs& attrs = {});

}  // namespace convjit
