// convjit's TensorFlow op library (convjit.tf loads it with tf.load_op_library). It registers
// TensorFlow's six convolution ops under the prefix "Convjit" with TensorFlow's inputs,
// attributes and shape functions, and kernels that run convjit:
//   - CPU: the op's kernel is compiled once per op instance and operand shapes (the kernel
//     table below), and its parallel loops run on the TensorFlow device's intra-op thread pool;
//   - GPU: compiled for "cuda:N" and queued on the op's stream, with a workspace TensorFlow
//     allocates.
// Errors keep convjit's (TensorFlow's) message and map to TensorFlow's status of the same name.
// Built against the installed TensorFlow with tf.sysconfig's flags; it uses convjit's C ABI.
#include <convjit/convjit.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "adapter_common.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/padding.h"
#include "tensorflow/core/util/tensor_format.h"
#include "xla/stream_executor/stream.h"
#include "xla/stream_executor/stream_executor.h"

namespace convjit_tf {
namespace {

using convjit_adapter::Attrs;
using convjit_adapter::Failure;
using convjit_adapter::KernelPtr;
using convjit_adapter::Op;
using tensorflow::DEVICE_CPU;
using tensorflow::DEVICE_GPU;
using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

// ---- op registrations: TensorFlow's signatures (nn_ops.cc), T without int32 (convjit computes
// floating point only; TensorFlow's own message refuses the rest when the op is built).

absl::Status sizes_input_shape(InferenceContext* c, int index) {
  ShapeHandle s;
  TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(index, &s));
  TF_RETURN_IF_ERROR(c->WithRank(s, 4, &s));
  c->set_output(0, s);
  return absl::OkStatus();
}

#define CONVJIT_TF_COMMON_ATTRS                                 \
  Attr("T: {half, bfloat16, float, double}")                    \
      .Attr("strides: list(int)")                               \
      .Attr(tensorflow::GetPaddingAttrStringWithExplicit())     \
      .Attr(tensorflow::GetExplicitPaddingsAttrString())        \
      .Attr(tensorflow::GetConvnetDataFormatAttrString())       \
      .Attr("dilations: list(int) = [1, 1, 1, 1]")

REGISTER_OP("ConvjitConv2D")
    .Input("input: T")
    .Input("filter: T")
    .Output("output: T")
    .Attr("use_cudnn_on_gpu: bool = true")
    .CONVJIT_TF_COMMON_ATTRS
    .SetShapeFn(tensorflow::shape_inference::Conv2DShapeWithExplicitPadding)
    .Doc("tf.raw_ops.Conv2D computed by convjit.");

REGISTER_OP("ConvjitConv2DBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("use_cudnn_on_gpu: bool = true")
    .CONVJIT_TF_COMMON_ATTRS
    .SetShapeFn(tensorflow::shape_inference::Conv2DBackpropInputShape)
    .Doc("tf.raw_ops.Conv2DBackpropInput computed by convjit.");

REGISTER_OP("ConvjitConv2DBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("use_cudnn_on_gpu: bool = true")
    .CONVJIT_TF_COMMON_ATTRS
    .SetShapeFn([](InferenceContext* c) { return sizes_input_shape(c, 1); })
    .Doc("tf.raw_ops.Conv2DBackpropFilter computed by convjit.");

REGISTER_OP("ConvjitDepthwiseConv2dNative")
    .Input("input: T")
    .Input("filter: T")
    .Output("output: T")
    .CONVJIT_TF_COMMON_ATTRS
    .SetShapeFn(tensorflow::shape_inference::DepthwiseConv2DNativeShapeWithExplicitPadding)
    .Doc("tf.raw_ops.DepthwiseConv2dNative computed by convjit.");

REGISTER_OP("ConvjitDepthwiseConv2dNativeBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .CONVJIT_TF_COMMON_ATTRS
    .SetShapeFn([](InferenceContext* c) { return sizes_input_shape(c, 0); })
    .Doc("tf.raw_ops.DepthwiseConv2dNativeBackpropInput computed by convjit.");

REGISTER_OP("ConvjitDepthwiseConv2dNativeBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .CONVJIT_TF_COMMON_ATTRS
    .SetShapeFn([](InferenceContext* c) { return sizes_input_shape(c, 1); })
    .Doc("tf.raw_ops.DepthwiseConv2dNativeBackpropFilter computed by convjit.");

#undef CONVJIT_TF_COMMON_ATTRS

// ---- kernels

absl::Status to_tf_status(const Failure& f) {
  switch (f.status) {
    case CONVJIT_OK: return absl::OkStatus();
    case CONVJIT_INVALID_ARGUMENT: return absl::InvalidArgumentError(f.message);
    case CONVJIT_UNIMPLEMENTED: return absl::UnimplementedError(f.message);
    case CONVJIT_RESOURCE_EXHAUSTED: return absl::ResourceExhaustedError(f.message);
    case CONVJIT_NOT_FOUND: return absl::NotFoundError(f.message);
    case CONVJIT_UNAVAILABLE: return absl::UnavailableError(f.message);
    case CONVJIT_INTERNAL: break;
  }
  return absl::InternalError(f.message);
}

bool to_convjit_dtype(tensorflow::DataType t, convjit_dtype* out) {
  switch (t) {
    case tensorflow::DT_HALF: *out = CONVJIT_HALF; return true;
    case tensorflow::DT_BFLOAT16: *out = CONVJIT_BFLOAT16; return true;
    case tensorflow::DT_FLOAT: *out = CONVJIT_FLOAT32; return true;
    case tensorflow::DT_DOUBLE: *out = CONVJIT_FLOAT64; return true;
    default: return false;
  }
}

std::vector<std::int64_t> dims_of(const Tensor& t) {
  std::vector<std::int64_t> dims;
  for (int i = 0; i < t.dims(); ++i) dims.push_back(t.dim_size(i));
  return dims;
}

// Enough shards for the pool's threads to balance uneven chunks, few enough that scheduling
// costs nothing next to them.
constexpr std::int64_t kShardsPerThread = 4;

// convjit's parallel loop on TensorFlow's intra-op pool (ctx: the device's CpuWorkerThreads).
void tf_parallel_for(void* ctx, std::int64_t n, void (*body)(void*, std::int64_t, std::int64_t),
                     void* body_ctx) {
  const auto* workers = static_cast<const tensorflow::DeviceBase::CpuWorkerThreads*>(ctx);
  if (n <= 0) return;
  if (workers == nullptr || workers->workers == nullptr || workers->num_threads <= 1 || n == 1) {
    body(body_ctx, 0, n);
    return;
  }
  const std::int64_t shards = std::min<std::int64_t>(n, kShardsPerThread * workers->num_threads);
  const std::int64_t block = (n + shards - 1) / shards;
  workers->workers->ParallelFor(
      n, tsl::thread::ThreadPool::SchedulingParams::Fixed(block),
      [body, body_ctx](std::int64_t begin, std::int64_t end) { body(body_ctx, begin, end); });
}

class ConvjitOp : public OpKernel {
 public:
  ConvjitOp(OpKernelConstruction* c, Op op, bool gpu) : OpKernel(c), gpu_(gpu) {
    attrs_.op = op;
    std::vector<std::int32_t> strides, dilations;
    std::vector<std::int64_t> explicit_paddings;
    OP_REQUIRES_OK(c, c->GetAttr("strides", &strides));
    OP_REQUIRES_OK(c, c->GetAttr("dilations", &dilations));
    OP_REQUIRES_OK(c, c->GetAttr("explicit_paddings", &explicit_paddings));
    OP_REQUIRES_OK(c, c->GetAttr("padding", &attrs_.padding));
    OP_REQUIRES_OK(c, c->GetAttr("data_format", &attrs_.data_format));
    attrs_.strides.assign(strides.begin(), strides.end());
    attrs_.dilations.assign(dilations.begin(), dilations.end());
    attrs_.explicit_paddings.assign(explicit_paddings.begin(), explicit_paddings.end());
    tensorflow::DataType t;
    OP_REQUIRES_OK(c, c->GetAttr("T", &t));
    OP_REQUIRES(c, to_convjit_dtype(t, &dtype_),
                absl::InvalidArgumentError("convjit computes half, bfloat16, float and double"));
  }

  void Compute(OpKernelContext* ctx) override {
    const bool sizes_first = convjit_adapter::takes_input_sizes(attrs_.op);
    const bool sizes_second = convjit_adapter::takes_filter_sizes(attrs_.op);
    const int a_index = sizes_first ? 1 : 0;
    const int b_index = sizes_second || sizes_first ? 2 : 1;
    const Tensor& a = ctx->input(a_index);
    const Tensor& b = ctx->input(b_index);
    std::vector<std::int64_t> sizes;
    if (sizes_first || sizes_second) {
      const Tensor& s = ctx->input(sizes_first ? 0 : 1);
      const char* name = sizes_first ? "input_sizes" : "filter_sizes";
      OP_REQUIRES(ctx, tensorflow::TensorShapeUtils::IsVector(s.shape()),
                  absl::InvalidArgumentError(std::string(op_name()) + ": " + name +
                                             " input must be 1-dim, not " +
                                             std::to_string(s.dims())));
      const auto values = s.vec<std::int32_t>();
      for (int i = 0; i < values.size(); ++i) sizes.push_back(values(i));
    }

    int ordinal = -1;
    void* stream = nullptr;
    const tensorflow::DeviceBase::CpuWorkerThreads* workers = nullptr;
    int threads = 1;
    if (gpu_) {
      stream_executor::Stream* s = ctx->op_device_context() ? ctx->op_device_context()->stream() : nullptr;
      OP_REQUIRES(ctx, s != nullptr,
                  absl::InternalError(std::string(op_name()) + ": no GPU stream for this op"));
      stream = s->platform_specific_handle().stream;
      ordinal = s->parent()->device_ordinal();
    } else {
      workers = ctx->device()->tensorflow_cpu_worker_threads();
      threads = workers != nullptr ? std::max(1, workers->num_threads) : 1;
    }

    const std::vector<std::int64_t> a_dims = dims_of(a), b_dims = dims_of(b);
    convjit_adapter::KernelTable::Key key;
    key.values = sizes;
    key.values.push_back(-1);
    key.values.insert(key.values.end(), a_dims.begin(), a_dims.end());
    key.values.push_back(-1);
    key.values.insert(key.values.end(), b_dims.begin(), b_dims.end());
    key.values.push_back(ordinal);
    key.values.push_back(threads);
    const std::string device = gpu_ ? "cuda:" + std::to_string(ordinal) : "cpu";
    KernelPtr kernel;
    OP_REQUIRES_OK(ctx, to_tf_status(kernels_.get(
                            key,
                            [&](KernelPtr* out) {
                              return convjit_adapter::compile(attrs_, dtype_, sizes, a_dims,
                                                              b_dims, device, threads, out);
                            },
                            &kernel)));

    const std::array<std::int64_t, 4> out_dims = convjit_adapter::output_shape(kernel.get());
    tensorflow::TensorShape out_shape;
    OP_REQUIRES_OK(ctx, tensorflow::TensorShape::BuildTensorShape(out_dims, &out_shape));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));

    convjit_run_context run_context;
    std::memset(&run_context, 0, sizeof run_context);
    Tensor workspace;
    if (gpu_) {
      run_context.stream = stream;
      const std::size_t bytes = convjit_kernel_workspace_bytes(kernel.get());
      if (bytes > 0) {
        OP_REQUIRES_OK(ctx, ctx->allocate_temp(tensorflow::DT_INT8,
                                               tensorflow::TensorShape({static_cast<std::int64_t>(bytes)}),
                                               &workspace));
        run_context.workspace = workspace.data();
        run_context.workspace_bytes = bytes;
      }
    }
    const convjit_tensor ta = convjit_adapter::make_tensor(dtype_, a_dims.data(), a.dims(), a.data());
    const convjit_tensor tb = convjit_adapter::make_tensor(dtype_, b_dims.data(), b.dims(), b.data());
    const convjit_tensor tout = convjit_adapter::make_tensor(dtype_, out_dims.data(), 4, out->data());
    const convjit_status status = convjit_run_with_parallel_for(
        kernel.get(), &ta, &tb, &tout, &run_context, gpu_ ? nullptr : &tf_parallel_for,
        const_cast<tensorflow::DeviceBase::CpuWorkerThreads*>(workers));
    OP_REQUIRES_OK(ctx, to_tf_status(convjit_adapter::last_failure(status)));
  }

 private:
  const char* op_name() const { return convjit_adapter::op_name(attrs_.op); }

  Attrs attrs_;
  convjit_dtype dtype_ = CONVJIT_FLOAT32;
  bool gpu_;
  convjit_adapter::KernelTable kernels_;
};

template <Op kOp, bool kGpu>
class ConvjitOpFor : public ConvjitOp {
 public:
  explicit ConvjitOpFor(OpKernelConstruction* c) : ConvjitOp(c, kOp, kGpu) {}
};

#define CONVJIT_TF_KERNELS(NAME, OP, ...)                                                        \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(DEVICE_CPU) __VA_ARGS__, ConvjitOpFor<OP, false>); \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(DEVICE_GPU) __VA_ARGS__, ConvjitOpFor<OP, true>)

CONVJIT_TF_KERNELS("ConvjitConv2D", Op::kConv2D);
CONVJIT_TF_KERNELS("ConvjitDepthwiseConv2dNative", Op::kDepthwise);
CONVJIT_TF_KERNELS("ConvjitConv2DBackpropInput", Op::kConv2DBackpropInput,
                   .HostMemory("input_sizes"));
CONVJIT_TF_KERNELS("ConvjitConv2DBackpropFilter", Op::kConv2DBackpropFilter,
                   .HostMemory("filter_sizes"));
CONVJIT_TF_KERNELS("ConvjitDepthwiseConv2dNativeBackpropInput", Op::kDepthwiseBackpropInput,
                   .HostMemory("input_sizes"));
CONVJIT_TF_KERNELS("ConvjitDepthwiseConv2dNativeBackpropFilter", Op::kDepthwiseBackpropFilter,
                   .HostMemory("filter_sizes"));

#undef CONVJIT_TF_KERNELS

}  // namespace
}  // namespace convjit_tf
