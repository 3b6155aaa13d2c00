// The oneDNN peer library: oneDNN's convolution gradient primitives behind peer_abi.h. Built
// once per oneDNN release (Debian's 2.6, and the newest from the Python package index), each
// into its own shared object that links its own libdnnl; the API differences between 2.x and
// 3.x are the primitive descriptors' constructors below.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#elif DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_TBB
#include <oneapi/tbb/global_control.h>

#include <memory>
#endif
#include <cstdlib>

#include "tools/bench/peer_abi.h"

using dnnl::memory;
using Tag = memory::format_tag;

struct convjit_peer_conv {
  bool backprop_data = true;
  bool preferred = false;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive primitive;
  // Per operand (DNNL_ARG_*): the caller's layout and the primitive's.
  std::unordered_map<int, memory::desc> user_desc;
  std::unordered_map<int, memory::desc> prim_desc;
  std::unordered_map<int, memory> user_mem;
  std::unordered_map<int, memory> prim_mem;
  int output_arg = 0;
  std::vector<int> input_args;
  struct Conversion {
    dnnl::reorder reorder;
    memory from, to;
  };
  std::vector<Conversion> to_primitive;
  std::vector<Conversion> to_user;
  double creation_ms = 0;
};

namespace {

#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_TBB
// TBB's cap on the threads of every arena, this library's included; replaced per setting.
std::unique_ptr<tbb::global_control> g_thread_cap;
#endif

#ifdef CONVJIT_PEER_OCL_ICD_DIR
// The package index's oneDNN runs its CPU engine through SYCL, whose OpenCL loader finds the
// CPU device only through an ICD file; the one the wheel installs names a path that does not
// exist, so benchmarks/setup_peers.sh writes a correct one. The loader reads the variable when
// the first engine is created, after this library is loaded.
__attribute__((constructor)) void point_the_opencl_loader_at_the_cpu_runtime() {
  ::setenv("OCL_ICD_VENDORS", CONVJIT_PEER_OCL_ICD_DIR, /*overwrite=*/0);
}
#endif

void set_error(char* error, std::size_t size, const std::string& text) {
  if (error != nullptr && size > 0) std::snprintf(error, size, "%s", text.c_str());
}

// Runs `body`, turning any exception into a message; returns whether it succeeded.
template <typename F>
bool guarded(char* error, std::size_t size, F&& body) {
  try {
    body();
    return true;
  } catch (const dnnl::error& e) {
    set_error(error, size, std::string("oneDNN: ") + e.what());
  } catch (const std::exception& e) {
    set_error(error, size, e.what());
  } catch (...) {
    set_error(error, size, "unknown error");
  }
  return false;
}

memory::data_type data_type_of(int dtype) {
  switch (dtype) {
    case CONVJIT_PEER_BF16:
      return memory::data_type::bf16;
    case CONVJIT_PEER_F16:
      return memory::data_type::f16;
#if DNNL_VERSION_MAJOR >= 3
    case CONVJIT_PEER_F64:
      return memory::data_type::f64;
#else
    case CONVJIT_PEER_F64:
      throw std::runtime_error("oneDNN 2.x has no f64 convolution");
#endif
    default:
      return memory::data_type::f32;
  }
}

memory::dims weight_dims(const convjit_peer_problem& s) {
  if (s.depthwise) return {s.ic, s.m, 1, s.kh, s.kw};  // g, o, i, h, w
  return {s.m, s.ic, s.kh, s.kw};
}

void create(convjit_peer_conv& st, const convjit_peer_problem& s) {
  st.backprop_data = s.backprop_data != 0;
  st.preferred = s.preferred_layouts != 0;
  const memory::data_type dt = data_type_of(s.dtype);
  const memory::dims x_dims{s.n, s.ic, s.h, s.w};
  const memory::dims y_dims{s.n, s.depthwise ? s.ic * s.m : s.m, s.out_h, s.out_w};
  const memory::dims w_dims = weight_dims(s);
  const memory::dims strides{s.stride, s.stride};
  const memory::dims dilates{s.dilation - 1, s.dilation - 1};
  const memory::dims pad_l{s.pad_top, s.pad_left};
  const memory::dims pad_r{s.pad_bottom, s.pad_right};
  const memory::desc x_any(x_dims, dt, Tag::any), y_any(y_dims, dt, Tag::any),
      w_any(w_dims, dt, Tag::any);
  const memory::desc x_user(x_dims, dt, Tag::nhwc), y_user(y_dims, dt, Tag::nhwc),
      w_user(w_dims, dt, s.depthwise ? Tag::hwigo : Tag::hwio);
  const auto algo = dnnl::algorithm::convolution_direct;

  const auto start = std::chrono::steady_clock::now();
#if DNNL_VERSION_MAJOR >= 3
  dnnl::convolution_forward::primitive_desc fwd_pd(st.engine, dnnl::prop_kind::forward_training,
                                                   algo, x_any, w_any, y_any, strides, dilates,
                                                   pad_l, pad_r);
#else
  dnnl::convolution_forward::desc fwd(dnnl::prop_kind::forward_training, algo, x_any, w_any, y_any,
                                      strides, dilates, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc fwd_pd(fwd, st.engine);
#endif
  if (st.backprop_data) {
#if DNNL_VERSION_MAJOR >= 3
    dnnl::convolution_backward_data::primitive_desc pd(st.engine, algo, x_any, w_any, y_any,
                                                       strides, dilates, pad_l, pad_r, fwd_pd);
#else
    dnnl::convolution_backward_data::desc bwd(algo, x_any, w_any, y_any, strides, dilates, pad_l,
                                              pad_r);
    dnnl::convolution_backward_data::primitive_desc pd(bwd, st.engine, fwd_pd);
#endif
    st.primitive = dnnl::convolution_backward_data(pd);
    st.prim_desc = {{DNNL_ARG_DIFF_SRC, pd.diff_src_desc()},
                    {DNNL_ARG_WEIGHTS, pd.weights_desc()},
                    {DNNL_ARG_DIFF_DST, pd.diff_dst_desc()}};
    st.user_desc = {
        {DNNL_ARG_DIFF_SRC, x_user}, {DNNL_ARG_WEIGHTS, w_user}, {DNNL_ARG_DIFF_DST, y_user}};
    st.output_arg = DNNL_ARG_DIFF_SRC;
    st.input_args = {DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST};
  } else {
#if DNNL_VERSION_MAJOR >= 3
    dnnl::convolution_backward_weights::primitive_desc pd(st.engine, algo, x_any, w_any, y_any,
                                                          strides, dilates, pad_l, pad_r, fwd_pd);
#else
    dnnl::convolution_backward_weights::desc bwd(algo, x_any, w_any, y_any, strides, dilates, pad_l,
                                                 pad_r);
    dnnl::convolution_backward_weights::primitive_desc pd(bwd, st.engine, fwd_pd);
#endif
    st.primitive = dnnl::convolution_backward_weights(pd);
    st.prim_desc = {{DNNL_ARG_SRC, pd.src_desc()},
                    {DNNL_ARG_DIFF_WEIGHTS, pd.diff_weights_desc()},
                    {DNNL_ARG_DIFF_DST, pd.diff_dst_desc()}};
    st.user_desc = {
        {DNNL_ARG_SRC, x_user}, {DNNL_ARG_DIFF_WEIGHTS, w_user}, {DNNL_ARG_DIFF_DST, y_user}};
    st.output_arg = DNNL_ARG_DIFF_WEIGHTS;
    st.input_args = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST};
  }
  st.creation_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void bind(convjit_peer_conv& st, void* x, void* w, void* y) {
  const std::unordered_map<int, void*> pointers =
      st.backprop_data ? std::unordered_map<int, void*>{{DNNL_ARG_DIFF_SRC, x},
                                                        {DNNL_ARG_WEIGHTS, w},
                                                        {DNNL_ARG_DIFF_DST, y}}
                       : std::unordered_map<int, void*>{
                             {DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}};
  st.user_mem.clear();
  st.prim_mem.clear();
  for (const auto& [arg, ptr] : pointers) {
    st.user_mem.emplace(arg, memory(st.user_desc.at(arg), st.engine, ptr));
    const memory::desc& want = st.prim_desc.at(arg);
    // Where oneDNN takes the caller's layout the primitive runs on the caller's memory.
    st.prim_mem.emplace(
        arg, want == st.user_desc.at(arg) ? st.user_mem.at(arg) : memory(want, st.engine));
  }
  st.to_primitive.clear();
  st.to_user.clear();
  for (int arg : st.input_args) {
    memory& from = st.user_mem.at(arg);
    memory& to = st.prim_mem.at(arg);
    if (from != to) st.to_primitive.push_back({dnnl::reorder(from, to), from, to});
  }
  memory& result = st.prim_mem.at(st.output_arg);
  memory& user_result = st.user_mem.at(st.output_arg);
  if (result != user_result) {
    st.to_user.push_back({dnnl::reorder(result, user_result), result, user_result});
  }
  if (st.preferred) {
    // The operands already live in oneDNN's layouts: converted once, outside the timing.
    for (auto& c : st.to_primitive) c.reorder.execute(st.stream, c.from, c.to);
    st.stream.wait();
  }
}

void run(convjit_peer_conv& st) {
  if (!st.preferred) {
    for (auto& c : st.to_primitive) c.reorder.execute(st.stream, c.from, c.to);
  }
  std::unordered_map<int, memory> args(st.prim_mem.begin(), st.prim_mem.end());
  st.primitive.execute(st.stream, args);
  if (!st.preferred) {
    for (auto& c : st.to_user) c.reorder.execute(st.stream, c.from, c.to);
  }
  st.stream.wait();
}

std::string version_name() {
  const dnnl_version_t* v = dnnl_version();
  return "onednn-" + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int convjit_peer_abi_version() {
  return CONVJIT_PEER_ABI_VERSION;
}

__attribute__((visibility("default"))) const char* convjit_peer_name() {
  static const std::string name = version_name();
  return name.c_str();
}

__attribute__((visibility("default"))) void convjit_peer_configure(int threads,
                                                                   const char* max_isa) {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(threads);
#elif DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_TBB
  g_thread_cap.reset();
  g_thread_cap = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                       static_cast<std::size_t>(threads));
#else
  (void)threads;  // a sequential build: one thread whatever the setting
#endif
  if (max_isa != nullptr && std::strcmp(max_isa, "avx2") == 0) {
    // Only before the first primitive; later calls fail, which changes nothing.
    try {
      dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
    } catch (...) {
    }
  }
}

__attribute__((visibility("default"))) convjit_peer_conv* convjit_peer_create(
    const convjit_peer_problem* problem, char* error, size_t error_size) {
  auto* conv = new convjit_peer_conv();
  if (!guarded(error, error_size, [&] { create(*conv, *problem); })) {
    delete conv;
    return nullptr;
  }
  return conv;
}

__attribute__((visibility("default"))) int convjit_peer_bind(convjit_peer_conv* conv, void* x,
                                                             void* w, void* y, char* error,
                                                             size_t error_size) {
  return guarded(error, error_size, [&] { bind(*conv, x, w, y); }) ? 0 : 1;
}

__attribute__((visibility("default"))) int convjit_peer_run(convjit_peer_conv* conv, char* error,
                                                            size_t error_size) {
  return guarded(error, error_size, [&] { run(*conv); }) ? 0 : 1;
}

__attribute__((visibility("default"))) int convjit_peer_finish(convjit_peer_conv* conv, char* error,
                                                               size_t error_size) {
  return guarded(error, error_size,
                 [&] {
                   for (auto& c : conv->to_user) c.reorder.execute(conv->stream, c.from, c.to);
                   conv->stream.wait();
                 })
             ? 0
             : 1;
}

__attribute__((visibility("default"))) double convjit_peer_creation_ms(
    const convjit_peer_conv* conv) {
  return conv->creation_ms;
}

__attribute__((visibility("default"))) void convjit_peer_destroy(convjit_peer_conv* conv) {
  delete conv;
}

}  // extern "C"
