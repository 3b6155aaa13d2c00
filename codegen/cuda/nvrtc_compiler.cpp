#include "codegen/cuda/nvrtc_compiler.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <sstream>

namespace convjit::codegen {

struct NvrtcCompiler::Api {
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcGetNumSupportedArchs) num_archs = nullptr;
  decltype(&nvrtcGetSupportedArchs) archs = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&nvrtcGetPTX) ptx = nullptr;
};

namespace {

Status unavailable(std::string message) { return {StatusCode::kUnavailable, std::move(message)}; }

/// dlopen of every candidate, the loader's path first; `tried` collects what failed and why.
void* open_nvrtc(std::string* tried) {
  std::vector<std::string> candidates = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  for (const char* var : {"CUDA_PATH", "CUDA_HOME"}) {
    if (const char* root = std::getenv(var); root != nullptr && *root != '\0') {
      candidates.push_back(fmt::format("{}/lib64/libnvrtc.so", root));
      candidates.push_back(fmt::format("{}/lib/libnvrtc.so", root));
    }
  }
  candidates.push_back("/usr/local/cuda/lib64/libnvrtc.so");
  candidates.push_back("/usr/local/cuda/lib/libnvrtc.so");
  for (const std::string& candidate : candidates) {
    if (void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* error = ::dlerror();
    *tried += fmt::format("\n  {}: {}", candidate, error != nullptr ? error : "not loadable");
  }
  return nullptr;
}

template <typename F>
bool bind(void* handle, const char* symbol, F* out) {
  *out = reinterpret_cast<F>(::dlsym(handle, symbol));
  return *out != nullptr;
}

int first_int(const std::smatch& m, int index) { return std::stoi(m[index].str()); }

}  // namespace

std::vector<CudaKernelResources> parse_ptxas_report(std::string_view log) {
  std::vector<CudaKernelResources> kernels;
  static const std::regex kEntry(R"(Compiling entry function '([^']+)')");
  static const std::regex kFrame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  std::istringstream lines{std::string(log)};
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, kEntry)) {
      kernels.push_back({});
      kernels.back().symbol = m[1].str();
      continue;
    }
    if (kernels.empty()) continue;
    CudaKernelResources& k = kernels.back();
    if (std::regex_search(line, m, kFrame)) {
      k.stack_bytes = first_int(m, 1);
      k.spill_store_bytes = first_int(m, 2);
      k.spill_load_bytes = first_int(m, 3);
    }
    if (std::regex_search(line, m, kUsed)) k.registers = first_int(m, 1);
    if (line.find("Used ") != std::string::npos && std::regex_search(line, m, kSmem)) {
      k.shared_bytes = first_int(m, 1);
    }
  }
  return kernels;
}

std::string resources_to_text(const std::vector<CudaKernelResources>& kernels) {
  std::string text;
  for (const CudaKernelResources& k : kernels) {
    text += fmt::format("{} registers={} spill_stores={} spill_loads={} stack={} smem={}\n",
                        k.symbol, k.registers, k.spill_store_bytes, k.spill_load_bytes,
                        k.stack_bytes, k.shared_bytes);
  }
  return text;
}

std::vector<CudaKernelResources> resources_from_text(std::string_view text) {
  std::vector<CudaKernelResources> kernels;
  static const std::regex kLine(
      R"((\S+) registers=(\d+) spill_stores=(\d+) spill_loads=(\d+) stack=(\d+) smem=(\d+))");
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, kLine)) continue;
    kernels.push_back({m[1].str(), first_int(m, 2), first_int(m, 3), first_int(m, 4),
                       first_int(m, 5), first_int(m, 6)});
  }
  return kernels;
}

Expected<const NvrtcCompiler*> NvrtcCompiler::get() {
  static std::once_flag once;
  static NvrtcCompiler* instance = nullptr;
  static Status failure;
  std::call_once(once, [] {
    std::string tried;
    void* handle = open_nvrtc(&tried);
    if (handle == nullptr) {
      failure = unavailable(
          "NVRTC is not available (install the CUDA toolkit's NVRTC or set "
          "CUDA_PATH); tried:" +
          tried);
      return;
    }
    auto* api = new Api();  // lives for the process, as the library handle does
    bool ok = bind(handle, "nvrtcVersion", &api->version) &&
              bind(handle, "nvrtcGetErrorString", &api->error_string) &&
              bind(handle, "nvrtcGetNumSupportedArchs", &api->num_archs) &&
              bind(handle, "nvrtcGetSupportedArchs", &api->archs) &&
              bind(handle, "nvrtcCreateProgram", &api->create) &&
              bind(handle, "nvrtcDestroyProgram", &api->destroy) &&
              bind(handle, "nvrtcCompileProgram", &api->compile) &&
              bind(handle, "nvrtcGetProgramLogSize", &api->log_size) &&
              bind(handle, "nvrtcGetProgramLog", &api->log) &&
              bind(handle, "nvrtcGetCUBINSize", &api->cubin_size) &&
              bind(handle, "nvrtcGetCUBIN", &api->cubin) &&
              bind(handle, "nvrtcGetPTXSize", &api->ptx_size) &&
              bind(handle, "nvrtcGetPTX", &api->ptx);
    if (!ok) {
      failure = unavailable(
          "the NVRTC library found lacks a function convjit needs (an NVRTC "
          "older than CUDA 11.2?)");
      delete api;
      return;
    }
    auto* compiler = new NvrtcCompiler();
    compiler->api_ = api;
    int major = 0, minor = 0;
    api->version(&major, &minor);
    compiler->version_ = fmt::format("{}.{}", major, minor);
    int count = 0;
    if (api->num_archs(&count) == NVRTC_SUCCESS && count > 0) {
      compiler->archs_.resize(static_cast<std::size_t>(count));
      if (api->archs(compiler->archs_.data()) != NVRTC_SUCCESS) compiler->archs_.clear();
    }
    instance = compiler;
  });
  if (instance == nullptr) return failure;
  return static_cast<const NvrtcCompiler*>(instance);
}

Expected<CudaBinary> NvrtcCompiler::compile(const std::string& source, const std::string& name,
                                            const CudaDeviceInfo& device) const {
  const auto start = std::chrono::steady_clock::now();
  if (!archs_.empty() && std::find(archs_.begin(), archs_.end(), device.arch) == archs_.end()) {
    return unimplemented(fmt::format("NVRTC {} cannot compile for {} (it supports sm_{})", version_,
                                     device.arch_name(), fmt::join(archs_, ", sm_")));
  }
  const Api& api = *api_;
  nvrtcProgram program = nullptr;
  nvrtcResult result =
      api.create(&program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (result != NVRTC_SUCCESS) {
    return internal_error(fmt::format("nvrtcCreateProgram: {}", api.error_string(result)));
  }
  const std::string arch_option = "--gpu-architecture=" + device.arch_name();
  // 177: a constant of the problem's set that this kernel does not use.
  const char* options[] = {arch_option.c_str(), "-std=c++17", "--ptxas-options=-v", "-lineinfo",
                           "--diag-suppress=177"};
  result = api.compile(program, static_cast<int>(std::size(options)), options);
  CudaBinary binary;
  binary.arch = device.arch_name();
  std::size_t size = 0;
  if (api.log_size(program, &size) == NVRTC_SUCCESS && size > 1) {
    binary.log.resize(size);
    if (api.log(program, binary.log.data()) != NVRTC_SUCCESS) binary.log.clear();
    while (!binary.log.empty() && binary.log.back() == '\0') binary.log.pop_back();
  }
  if (result != NVRTC_SUCCESS) {
    api.destroy(&program);
    return internal_error(fmt::format("NVRTC {} could not compile kernel {} for {}: {}\n{}",
                                      version_, name, device.arch_name(), api.error_string(result),
                                      binary.log));
  }
  if (api.cubin_size(program, &size) == NVRTC_SUCCESS && size > 0) {
    binary.cubin.resize(size);
    if (api.cubin(program, reinterpret_cast<char*>(binary.cubin.data())) != NVRTC_SUCCESS) {
      binary.cubin.clear();
    }
  }
  if (api.ptx_size(program, &size) == NVRTC_SUCCESS && size > 0) {
    binary.ptx.resize(size);
    if (api.ptx(program, binary.ptx.data()) != NVRTC_SUCCESS) binary.ptx.clear();
    while (!binary.ptx.empty() && binary.ptx.back() == '\0') binary.ptx.pop_back();
  }
  api.destroy(&program);
  if (binary.cubin.empty()) {
    return internal_error(
        fmt::format("NVRTC {} produced no cubin for {}", version_, device.arch_name()));
  }
  binary.kernels = parse_ptxas_report(binary.log);
  binary.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return binary;
}

}  // namespace convjit::codegen
