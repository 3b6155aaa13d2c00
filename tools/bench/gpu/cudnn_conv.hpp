// cuDNN as the GPU benchmark's peer, opened at run time (libcudnn.so.9, then .so.8 and .so): the
// convolution gradient for one problem on NHWC activations and a KRSC ([OC, KH, KW, IC/G])
// filter, with the algorithm cuDNN's own search (cudnnFind*AlgorithmEx) finds fastest on the
// caller's buffers, workspace allowed.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace convjit::bench::gpu {

enum class CudnnDType { kFloat32, kFloat64, kHalf, kBFloat16 };
/// kExact: no tensor cores for f32 (CUDNN_FMA_MATH); kTf32: f32 on tensor cores as TF32;
/// kTensorCore: the 16-bit types' tensor-core kernels (CUDNN_TENSOR_OP_MATH).
enum class CudnnMath { kExact, kTf32, kTensorCore };

/// One convolution as cuDNN describes it: symmetric padding (asymmetric SAME padding is
/// expressed by the caller through a taller/wider x, see gpu_bench.cpp).
struct CudnnProblem {
  int n = 0, h = 0, w = 0, c = 0;  // x (NHWC), as cuDNN sees it
  int k = 0, r = 0, s = 0;         // filter: output channels, taps (KRSC, C/groups channels)
  int groups = 1;
  int pad_h = 0, pad_w = 0, stride = 1, dilation = 1;
  int out_h = 0, out_w = 0;  // what cuDNN must compute from the above (checked)
  bool backprop_data = true;
  CudnnDType dtype = CudnnDType::kFloat32;
  CudnnMath math = CudnnMath::kExact;
};

/// The library and a handle bound to a stream. Throws std::runtime_error with the reason
/// (library missing, too old, any cuDNN error with its text).
class Cudnn {
 public:
  explicit Cudnn(void* stream);
  ~Cudnn();
  Cudnn(const Cudnn&) = delete;
  Cudnn& operator=(const Cudnn&) = delete;
  /// "cudnn-9.10.2".
  const std::string& name() const { return name_; }

  struct Api;
  const Api& api() const { return *api_; }
  void* handle() const { return handle_; }

 private:
  Api* api_ = nullptr;
  void* handle_ = nullptr;
  std::string name_;
};

/// One problem set up in cuDNN, bound to device buffers: x [n,h,w,c], filter KRSC, dy
/// [n,out_h,out_w,k]; the op writes dx (data gradient) or the filter (filter gradient).
class CudnnConv {
 public:
  /// Describes the problem and runs cuDNN's search on the buffers (which it overwrites), with
  /// up to `workspace_limit` bytes of workspace; keeps the fastest algorithm that succeeded.
  CudnnConv(const Cudnn& cudnn, const CudnnProblem& problem, void* x, void* filter, void* dy,
            void* search_workspace, std::size_t workspace_limit);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  /// The chosen algorithm's workspace (the caller gives run() at least this much).
  std::size_t workspace_bytes() const { return workspace_bytes_; }
  /// "bwd_data algo 1 (tensor cores, deterministic), search 12.3 ms".
  const std::string& algorithm() const { return algorithm_; }
  /// Milliseconds cuDNN's search took.
  double search_ms() const { return search_ms_; }
  /// Queues one run on the handle's stream.
  void run(void* workspace);

 private:
  void describe_and_search(void* search_workspace, std::size_t workspace_limit);
  void destroy_descriptors();

  const Cudnn& cudnn_;
  CudnnProblem problem_;
  void* x_;
  void* filter_;
  void* dy_;
  void* x_desc_ = nullptr;
  void* dy_desc_ = nullptr;
  void* filter_desc_ = nullptr;
  void* conv_desc_ = nullptr;
  int algo_ = -1;
  std::size_t workspace_bytes_ = 0;
  std::string algorithm_;
  double search_ms_ = 0;
};

}  // namespace convjit::bench::gpu
