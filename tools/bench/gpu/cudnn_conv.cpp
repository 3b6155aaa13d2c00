#include "tools/bench/gpu/cudnn_conv.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <stdexcept>

namespace convjit::bench::gpu {
namespace {

// cuDNN's C types and constants (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h of cuDNN 9; the same
// values in 8), declared here so that the benchmark builds without cuDNN's headers.
using Status = int;
using Handle = void*;
constexpr int kDataFloat = 0, kDataDouble = 1, kDataHalf = 2, kDataBFloat16 = 9;
constexpr int kDefaultMath = 0, kTensorOpMath = 1, kFmaMath = 3;
constexpr int kFormatNhwc = 1;
constexpr int kCrossCorrelation = 1;
constexpr int kDeterministic = 1;

// cudnnConvolutionBwdDataAlgoPerf_t and cudnnConvolutionBwdFilterAlgoPerf_t (the same layout).
struct AlgoPerf {
  int algo;
  Status status;
  float time;
  std::size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

int data_type(CudnnDType d) {
  switch (d) {
    case CudnnDType::kFloat64:
      return kDataDouble;
    case CudnnDType::kHalf:
      return kDataHalf;
    case CudnnDType::kBFloat16:
      return kDataBFloat16;
    case CudnnDType::kFloat32:
      break;
  }
  return kDataFloat;
}

}  // namespace

struct Cudnn::Api {
  void* library = nullptr;
  std::size_t (*get_version)() = nullptr;
  const char* (*get_error_string)(Status) = nullptr;
  Status (*create)(Handle*) = nullptr;
  Status (*destroy)(Handle) = nullptr;
  Status (*set_stream)(Handle, void*) = nullptr;
  Status (*create_tensor)(Handle*) = nullptr;
  Status (*destroy_tensor)(Handle) = nullptr;
  Status (*set_tensor_4d)(Handle, int, int, int, int, int, int) = nullptr;
  Status (*create_filter)(Handle*) = nullptr;
  Status (*destroy_filter)(Handle) = nullptr;
  Status (*set_filter_4d)(Handle, int, int, int, int, int, int) = nullptr;
  Status (*create_conv)(Handle*) = nullptr;
  Status (*destroy_conv)(Handle) = nullptr;
  Status (*set_conv_2d)(Handle, int, int, int, int, int, int, int, int) = nullptr;
  Status (*set_group_count)(Handle, int) = nullptr;
  Status (*set_math_type)(Handle, int) = nullptr;
  Status (*get_output_dim)(Handle, Handle, Handle, int*, int*, int*, int*) = nullptr;
  Status (*find_bwd_data)(Handle, Handle, const void*, Handle, const void*, Handle, Handle, void*,
                          int, int*, AlgoPerf*, void*, std::size_t) = nullptr;
  Status (*find_bwd_filter)(Handle, Handle, const void*, Handle, const void*, Handle, Handle, void*,
                            int, int*, AlgoPerf*, void*, std::size_t) = nullptr;
  Status (*bwd_data)(Handle, const void*, Handle, const void*, Handle, const void*, Handle, int,
                     void*, std::size_t, const void*, Handle, void*) = nullptr;
  Status (*bwd_filter)(Handle, const void*, Handle, const void*, Handle, const void*, Handle, int,
                       void*, std::size_t, const void*, Handle, void*) = nullptr;

  template <typename Fn>
  void find(Fn* out, const char* symbol) {
    *out = reinterpret_cast<Fn>(::dlsym(library, symbol));  // NOLINT: cuDNN's signatures
    if (*out == nullptr)
      throw std::runtime_error(fmt::format("cuDNN: the library has no {}", symbol));
  }

  void check(Status s, const char* what) const {
    if (s == 0) return;
    throw std::runtime_error(fmt::format("cuDNN: {} failed: {} ({})", what,
                                         get_error_string != nullptr ? get_error_string(s) : "?",
                                         s));
  }
};

Cudnn::Cudnn(void* stream) : api_(new Api()) {
  Api& a = *api_;
  std::string tried;
  for (const char* name :
       {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so", "/usr/local/cuda/lib64/libcudnn.so.9"}) {
    a.library = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (a.library != nullptr) break;
    const char* why = ::dlerror();
    tried += fmt::format("\n  {}: {}", name, why != nullptr ? why : "not found");
  }
  try {
    if (a.library == nullptr) {
      throw std::runtime_error(
          "cuDNN not found (the GPU benchmark's peer; install cuDNN or put "
          "it on LD_LIBRARY_PATH, or pass --no-peers):" +
          tried);
    }
    a.find(&a.get_version, "cudnnGetVersion");
    a.find(&a.get_error_string, "cudnnGetErrorString");
    a.find(&a.create, "cudnnCreate");
    a.find(&a.destroy, "cudnnDestroy");
    a.find(&a.set_stream, "cudnnSetStream");
    a.find(&a.create_tensor, "cudnnCreateTensorDescriptor");
    a.find(&a.destroy_tensor, "cudnnDestroyTensorDescriptor");
    a.find(&a.set_tensor_4d, "cudnnSetTensor4dDescriptor");
    a.find(&a.create_filter, "cudnnCreateFilterDescriptor");
    a.find(&a.destroy_filter, "cudnnDestroyFilterDescriptor");
    a.find(&a.set_filter_4d, "cudnnSetFilter4dDescriptor");
    a.find(&a.create_conv, "cudnnCreateConvolutionDescriptor");
    a.find(&a.destroy_conv, "cudnnDestroyConvolutionDescriptor");
    a.find(&a.set_conv_2d, "cudnnSetConvolution2dDescriptor");
    a.find(&a.set_group_count, "cudnnSetConvolutionGroupCount");
    a.find(&a.set_math_type, "cudnnSetConvolutionMathType");
    a.find(&a.get_output_dim, "cudnnGetConvolution2dForwardOutputDim");
    a.find(&a.find_bwd_data, "cudnnFindConvolutionBackwardDataAlgorithmEx");
    a.find(&a.find_bwd_filter, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    a.find(&a.bwd_data, "cudnnConvolutionBackwardData");
    a.find(&a.bwd_filter, "cudnnConvolutionBackwardFilter");
    const std::size_t v = a.get_version();
    // 8.x numbers versions major*1000 + minor*100 + patch, 9.x major*10000 + minor*100 + patch.
    name_ = v >= 90000 ? fmt::format("cudnn-{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
                       : fmt::format("cudnn-{}.{}.{}", v / 1000, v / 100 % 10, v % 100);
    a.check(a.create(&handle_), "cudnnCreate");
    a.check(a.set_stream(handle_, stream), "cudnnSetStream");
  } catch (...) {
    if (handle_ != nullptr) a.destroy(handle_);
    delete api_;  // the library stays loaded, as every library this process opened
    api_ = nullptr;
    throw;
  }
}

Cudnn::~Cudnn() {
  if (handle_ != nullptr) api_->destroy(handle_);
  delete api_;
}

CudnnConv::CudnnConv(const Cudnn& cudnn, const CudnnProblem& p, void* x, void* filter, void* dy,
                     void* search_workspace, std::size_t workspace_limit)
    : cudnn_(cudnn), problem_(p), x_(x), filter_(filter), dy_(dy) {
  try {
    describe_and_search(search_workspace, workspace_limit);
  } catch (...) {
    destroy_descriptors();
    throw;
  }
}

void CudnnConv::describe_and_search(void* search_workspace, std::size_t workspace_limit) {
  const CudnnProblem& p = problem_;
  const Cudnn& cudnn = cudnn_;
  void* x = x_;
  void* filter = filter_;
  void* dy = dy_;
  const Cudnn::Api& a = cudnn.api();
  const int type = data_type(p.dtype);
  a.check(a.create_tensor(&x_desc_), "cudnnCreateTensorDescriptor");
  a.check(a.create_tensor(&dy_desc_), "cudnnCreateTensorDescriptor");
  a.check(a.create_filter(&filter_desc_), "cudnnCreateFilterDescriptor");
  a.check(a.create_conv(&conv_desc_), "cudnnCreateConvolutionDescriptor");
  a.check(a.set_tensor_4d(x_desc_, kFormatNhwc, type, p.n, p.c, p.h, p.w), "set x descriptor");
  a.check(a.set_tensor_4d(dy_desc_, kFormatNhwc, type, p.n, p.k, p.out_h, p.out_w),
          "set dy descriptor");
  a.check(a.set_filter_4d(filter_desc_, type, kFormatNhwc, p.k, p.c / p.groups, p.r, p.s),
          "set filter descriptor");
  // 16-bit types accumulate in f32, as convjit's kernels do.
  const int compute = p.dtype == CudnnDType::kFloat64 ? kDataDouble : kDataFloat;
  a.check(a.set_conv_2d(conv_desc_, p.pad_h, p.pad_w, p.stride, p.stride, p.dilation, p.dilation,
                        kCrossCorrelation, compute),
          "cudnnSetConvolution2dDescriptor");
  a.check(a.set_group_count(conv_desc_, p.groups), "cudnnSetConvolutionGroupCount");
  const int math = p.math == CudnnMath::kExact
                       ? (p.dtype == CudnnDType::kFloat32 ? kFmaMath : kDefaultMath)
                       : kTensorOpMath;
  a.check(a.set_math_type(conv_desc_, math), "cudnnSetConvolutionMathType");
  int on = 0, oc = 0, oh = 0, ow = 0;
  a.check(a.get_output_dim(conv_desc_, x_desc_, filter_desc_, &on, &oc, &oh, &ow),
          "cudnnGetConvolution2dForwardOutputDim");
  if (oh != p.out_h || ow != p.out_w || oc != p.k) {
    throw std::runtime_error(
        fmt::format("cuDNN: the problem's output is {}x{}x{}, cuDNN's {}x{}x{}", p.out_h, p.out_w,
                    p.k, oh, ow, oc));
  }

  std::array<AlgoPerf, 16> perf{};
  int returned = 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (p.backprop_data) {
    a.check(a.find_bwd_data(cudnn.handle(), filter_desc_, filter, dy_desc_, dy, conv_desc_, x_desc_,
                            x, static_cast<int>(perf.size()), &returned, perf.data(),
                            search_workspace, workspace_limit),
            "cudnnFindConvolutionBackwardDataAlgorithmEx");
  } else {
    a.check(a.find_bwd_filter(cudnn.handle(), x_desc_, x, dy_desc_, dy, conv_desc_, filter_desc_,
                              filter, static_cast<int>(perf.size()), &returned, perf.data(),
                              search_workspace, workspace_limit),
            "cudnnFindConvolutionBackwardFilterAlgorithmEx");
  }
  search_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // Results come sorted by time; the first that succeeded within the limit is cuDNN's best.
  for (int i = 0; i < returned; ++i) {
    const AlgoPerf& r = perf[static_cast<std::size_t>(i)];
    if (r.status != 0 || r.memory > workspace_limit) continue;
    algo_ = r.algo;
    workspace_bytes_ = r.memory;
    algorithm_ = fmt::format(
        "{} algo {} ({}, {}), search {:.1f} ms", p.backprop_data ? "bwd_data" : "bwd_filter",
        r.algo, r.math_type == kTensorOpMath ? "tensor ops" : "no tensor ops",
        r.determinism == kDeterministic ? "deterministic" : "atomics", search_ms_);
    break;
  }
  if (algo_ < 0) {
    throw std::runtime_error(
        fmt::format("cuDNN: no algorithm runs this problem within {} bytes of workspace ({} tried)",
                    workspace_limit, returned));
  }
}

CudnnConv::~CudnnConv() { destroy_descriptors(); }

void CudnnConv::destroy_descriptors() {
  const Cudnn::Api& a = cudnn_.api();
  if (x_desc_ != nullptr) a.destroy_tensor(x_desc_);
  if (dy_desc_ != nullptr) a.destroy_tensor(dy_desc_);
  if (filter_desc_ != nullptr) a.destroy_filter(filter_desc_);
  if (conv_desc_ != nullptr) a.destroy_conv(conv_desc_);
  x_desc_ = dy_desc_ = filter_desc_ = conv_desc_ = nullptr;
}

void CudnnConv::run(void* workspace) {
  const Cudnn::Api& a = cudnn_.api();
  // alpha and beta are doubles for f64 tensors, floats otherwise.
  const float one_f = 1, zero_f = 0;
  const double one_d = 1, zero_d = 0;
  const bool f64 = problem_.dtype == CudnnDType::kFloat64;
  const void* one = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  if (problem_.backprop_data) {
    a.check(a.bwd_data(cudnn_.handle(), one, filter_desc_, filter_, dy_desc_, dy_, conv_desc_,
                       algo_, workspace, workspace_bytes_, zero, x_desc_, x_),
            "cudnnConvolutionBackwardData");
  } else {
    a.check(a.bwd_filter(cudnn_.handle(), one, x_desc_, x_, dy_desc_, dy_, conv_desc_, algo_,
                         workspace, workspace_bytes_, zero, filter_desc_, filter_),
            "cudnnConvolutionBackwardFilter");
  }
}

}  // namespace convjit::bench::gpu
