#include "runtime/cuda/gpu_executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/cuda/nvrtc_compiler.hpp"
#include "runtime/cuda/driver_api.hpp"

namespace convjit::runtime::cuda {
namespace {

using codegen::Artifacts;
using codegen::CudaBinary;
using codegen::CudaDeviceInfo;
using codegen::CudaLaunch;
using codegen::CudaModule;
using codegen::CudaProgram;

/// The device and its retained primary context, shared by the executor and its modules.
struct DeviceContext {
  const DriverApi* api = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;
  int ordinal = 0;
  ~DeviceContext() {
    if (context != nullptr) (void)api->primary_ctx_release(device);
  }
};

/// Same layout as cj_args in the generated source: one by-value kernel parameter.
struct KernelArgs {
  void* x;
  void* w;
  void* y;
  void* workspace;
};

class GpuModule final : public CudaModule {
 public:
  GpuModule(std::shared_ptr<const DeviceContext> device, CUmodule module,
            std::vector<CUfunction> functions, std::size_t image_bytes)
      : device_(std::move(device)),
        module_(module),
        functions_(std::move(functions)),
        image_bytes_(image_bytes) {}

  ~GpuModule() override {
    const DriverApi& api = *device_->api;
    ScopedContext scope(api, device_->context);
    for (const auto& [stream, memory] : workspaces_) (void)api.mem_free(memory);
    if (module_ != nullptr) (void)api.module_unload(module_);
  }

  Status run(const CudaProgram& program, const OperandPointers& operands,
             const codegen::RunContext& context) const override {
    const DriverApi& api = *device_->api;
    ScopedContext scope(api, device_->context);
    CONVJIT_RETURN_IF_ERROR(scope.status());
    CONVJIT_RETURN_IF_ERROR(check_pointer(operands.x, program.x_bytes, "x"));
    CONVJIT_RETURN_IF_ERROR(check_pointer(operands.w, program.w_bytes, "w"));
    CONVJIT_RETURN_IF_ERROR(check_pointer(operands.y, program.y_bytes, "y"));
    auto stream = static_cast<CUstream>(context.stream);
    CUdeviceptr workspace = 0;
    if (program.workspace_bytes > 0) {
      if (context.workspace != nullptr) {
        if (context.workspace_bytes < program.workspace_bytes) {
          return invalid_argument(fmt::format(
              "the workspace passed ({} bytes) is smaller than the {} bytes kernel {} needs "
              "(Kernel::workspace_bytes)",
              context.workspace_bytes, program.workspace_bytes, program.kernel_name));
        }
        CONVJIT_RETURN_IF_ERROR(check_pointer(
            context.workspace, static_cast<std::int64_t>(program.workspace_bytes), "workspace"));
        workspace = reinterpret_cast<CUdeviceptr>(context.workspace);
      } else {
        Expected<CUdeviceptr> own = own_workspace(stream, program.workspace_bytes);
        if (!own) return own.status();
        workspace = *own;
      }
    }
    KernelArgs args{operands.x, operands.w, operands.y, reinterpret_cast<void*>(workspace)};
    void* params[] = {&args};
    for (std::size_t i = 0; i < program.launches.size(); ++i) {
      const CudaLaunch& l = program.launches[i];
      const CUresult r =
          api.launch_kernel(functions_[i], l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                            l.block[2], 0, stream, params, nullptr);
      if (r != CUDA_SUCCESS) return api.error(r, "cuLaunchKernel " + l.symbol);
    }
    return Status::ok();
  }

  std::size_t resident_bytes() const override { return image_bytes_; }

 private:
  // A kernel of this device reads and writes device memory only: a host pointer (or one of
  // another device) would fault or corrupt; refuse it with the operand's name.
  Status check_pointer(const void* pointer, std::int64_t bytes, const char* name) const {
    if (bytes == 0 || pointer == nullptr) return Status::ok();
    const DriverApi& api = *device_->api;
    unsigned int memory_type = 0;
    const auto address = reinterpret_cast<CUdeviceptr>(pointer);
    CUresult r = api.pointer_get_attribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address);
    if (r != CUDA_SUCCESS || memory_type == CU_MEMORYTYPE_HOST) {
      return invalid_argument(fmt::format(
          "operand {} ({}) is not CUDA device memory (a host pointer?): kernels compiled for "
          "cuda:{} take device pointers; use device \"cpu\" or \"cuda-interpret\" for host "
          "memory",
          name, pointer, device_->ordinal));
    }
    int ordinal = -1;
    r = api.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address);
    if (r == CUDA_SUCCESS && ordinal != device_->ordinal && memory_type == CU_MEMORYTYPE_DEVICE) {
      return invalid_argument(
          fmt::format("operand {} is memory of cuda:{}, but the kernel was "
                      "compiled for cuda:{}",
                      name, ordinal, device_->ordinal));
    }
    return Status::ok();
  }

  // One allocation per stream (runs on different streams may overlap), kept for later runs.
  Expected<CUdeviceptr> own_workspace(CUstream stream, std::size_t bytes) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = workspaces_.find(stream); it != workspaces_.end()) return it->second;
    CUdeviceptr memory = 0;
    const CUresult r = device_->api->mem_alloc(&memory, bytes);
    if (r != CUDA_SUCCESS) {
      return device_->api->error(r, fmt::format("allocating a {}-byte workspace", bytes));
    }
    workspaces_[stream] = memory;
    return memory;
  }

  std::shared_ptr<const DeviceContext> device_;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;
  std::size_t image_bytes_ = 0;
  mutable std::mutex mutex_;
  mutable std::map<CUstream, CUdeviceptr> workspaces_;  // guarded by mutex_
};

class GpuExecutor final : public codegen::CudaExecutor {
 public:
  GpuExecutor(std::shared_ptr<const DeviceContext> device, CudaDeviceInfo info,
              std::string nvrtc_version)
      : device_(std::move(device)),
        info_(std::move(info)),
        name_(fmt::format("cuda:{}", device_->ordinal)),
        target_(fmt::format("{}/nvrtc{}", info_.arch_name(), nvrtc_version)) {}

  const std::string& device() const override { return name_; }
  codegen::MemorySpace memory_space() const override { return codegen::MemorySpace::kCudaDevice; }
  const CudaDeviceInfo& device_info() const override { return info_; }
  std::string target_name() const override { return target_; }
  bool needs_cubin() const override { return true; }
  bool can_time() const override { return true; }

  // CONVJIT_CUDA_TUNE's measurement: the program on scratch operands (their contents do not
  // change the kernels' speed: no data-dependent branches), one warm-up run, then up to three
  // runs timed together from the host across a context synchronisation. Launch overhead is
  // in the figure, alike for every candidate.
  Expected<double> time_program_us(const codegen::CudaModule& module,
                                   const CudaProgram& program) const override {
    const DriverApi& api = *device_->api;
    ScopedContext scope(api, device_->context);
    CONVJIT_RETURN_IF_ERROR(scope.status());
    std::vector<CUdeviceptr> owned;
    struct Release {
      const DriverApi& api;
      std::vector<CUdeviceptr>& owned;
      ~Release() {
        for (CUdeviceptr p : owned) (void)api.mem_free(p);
      }
    } release{api, owned};
    auto allocate = [&](std::size_t bytes, void** out) -> Status {
      *out = nullptr;
      if (bytes == 0) return Status::ok();
      CUdeviceptr p = 0;
      const CUresult r = api.mem_alloc(&p, bytes);
      if (r != CUDA_SUCCESS) return api.error(r, "allocating tuning operands");
      owned.push_back(p);
      *out = reinterpret_cast<void*>(p);
      return Status::ok();
    };
    OperandPointers operands;
    codegen::RunContext context;
    CONVJIT_RETURN_IF_ERROR(allocate(static_cast<std::size_t>(program.x_bytes), &operands.x));
    CONVJIT_RETURN_IF_ERROR(allocate(static_cast<std::size_t>(program.w_bytes), &operands.w));
    CONVJIT_RETURN_IF_ERROR(allocate(static_cast<std::size_t>(program.y_bytes), &operands.y));
    CONVJIT_RETURN_IF_ERROR(allocate(program.workspace_bytes, &context.workspace));
    context.workspace_bytes = program.workspace_bytes;
    using Clock = std::chrono::steady_clock;
    auto timed_runs = [&](int runs) -> Expected<double> {
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < runs; ++i)
        CONVJIT_RETURN_IF_ERROR(module.run(program, operands, context));
      const CUresult r = api.ctx_synchronize();
      if (r != CUDA_SUCCESS) return api.error(r, "running a tuning candidate");
      return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / runs;
    };
    Expected<double> warm = timed_runs(1);
    if (!warm) return warm.status();
    // A slow candidate is timed once more only: the tuning budget is two seconds in all.
    return timed_runs(*warm > 50'000 ? 1 : 3);
  }

  Expected<std::shared_ptr<const CudaModule>> load(const CudaProgram& program,
                                                   const CudaBinary* binary,
                                                   Artifacts*) const override {
    if (binary == nullptr) return internal_error("the GPU executor needs NVRTC's output");
    return load_images(program, binary->cubin, binary->ptx);
  }

  Expected<std::shared_ptr<const CudaModule>> load_stored(
      const CudaProgram& program, const Artifacts& artifacts) const override {
    auto bytes = [&](const char* name) {
      const auto it = artifacts.find(name);
      return it == artifacts.end() ? std::vector<std::uint8_t>{} : it->second;
    };
    const std::vector<std::uint8_t> ptx = bytes("ptx");
    return load_images(program, bytes("cubin"), std::string(ptx.begin(), ptx.end()));
  }

 private:
  Expected<std::shared_ptr<const CudaModule>> load_images(const CudaProgram& program,
                                                          const std::vector<std::uint8_t>& cubin,
                                                          const std::string& ptx) const {
    const DriverApi& api = *device_->api;
    ScopedContext scope(api, device_->context);
    CONVJIT_RETURN_IF_ERROR(scope.status());
    CUmodule module = nullptr;
    std::size_t image_bytes = 0;
    if (!program.launches.empty()) {
      CUresult r = cubin.empty() ? CUDA_ERROR_NO_BINARY_FOR_GPU
                                 : api.module_load_data(&module, cubin.data());
      image_bytes = cubin.size();
      if (r == CUDA_ERROR_NO_BINARY_FOR_GPU && !ptx.empty()) {
        // A device newer than the cubin's architecture: the driver compiles the PTX.
        r = api.module_load_data(&module, ptx.c_str());
        image_bytes = ptx.size();
      }
      if (r != CUDA_SUCCESS) return api.error(r, "loading kernel " + program.kernel_name);
    }
    std::vector<CUfunction> functions;
    for (const CudaLaunch& l : program.launches) {
      CUfunction f = nullptr;
      const CUresult r = api.module_get_function(&f, module, l.symbol.c_str());
      if (r != CUDA_SUCCESS) {
        (void)api.module_unload(module);
        return api.error(r, "finding kernel " + l.symbol);
      }
      functions.push_back(f);
    }
    return std::shared_ptr<const CudaModule>(
        std::make_shared<GpuModule>(device_, module, std::move(functions), image_bytes));
  }

  std::shared_ptr<const DeviceContext> device_;
  CudaDeviceInfo info_;
  std::string name_;
  std::string target_;
};

}  // namespace

Expected<std::shared_ptr<const codegen::CudaExecutor>> make_gpu_executor(int ordinal) {
  Expected<const DriverApi*> api_or = driver_api();
  if (!api_or) return api_or.status();
  const DriverApi& api = **api_or;
  int count = 0;
  CUresult r = api.device_get_count(&count);
  if (r != CUDA_SUCCESS) return no_cuda_device(api.error(r, "cuDeviceGetCount").message());
  if (count == 0) return no_cuda_device("the driver reports no CUDA devices");
  if (ordinal >= count) {
    return no_cuda_device(fmt::format("device cuda:{} asked for, but there {} only {} ({} to {})",
                                      ordinal, count == 1 ? "is" : "are", count, "cuda:0",
                                      fmt::format("cuda:{}", count - 1)));
  }
  auto device = std::make_shared<DeviceContext>();
  device->api = &api;
  device->ordinal = ordinal;
  r = api.device_get(&device->device, ordinal);
  if (r != CUDA_SUCCESS) return no_cuda_device(api.error(r, "cuDeviceGet").message());
  auto attribute = [&](CUdevice_attribute a) {
    int value = 0;
    (void)api.device_get_attribute(&value, a, device->device);
    return value;
  };
  CudaDeviceInfo info;
  const int major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.arch = major * 10 + minor;
  char name[256] = {};
  (void)api.device_get_name(name, sizeof name, device->device);
  info.name = name;
  info.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.shared_bytes_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  info.shared_bytes_per_block_optin =
      attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.shared_bytes_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info.registers_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  info.max_threads_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  info.max_threads_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  if (info.arch < 75) {
    return Status(StatusCode::kUnimplemented,
                  fmt::format("cuda:{} ({}) is sm_{}: convjit's CUDA backend needs sm_75 or "
                              "newer",
                              ordinal, info.name, info.arch));
  }
  Expected<const codegen::NvrtcCompiler*> nvrtc = codegen::NvrtcCompiler::get();
  if (!nvrtc) return nvrtc.status();
  // A device newer than this NVRTC knows: compile for the newest architecture it does know;
  // the driver runs that cubin's PTX.
  const std::vector<int>& archs = (*nvrtc)->supported_archs();
  if (!archs.empty() && std::find(archs.begin(), archs.end(), info.arch) == archs.end()) {
    int best = 0;
    for (int a : archs) {
      if (a <= info.arch) best = std::max(best, a);
    }
    if (best == 0) {
      return Status(StatusCode::kUnimplemented,
                    fmt::format("NVRTC {} cannot compile for {} or any older architecture",
                                (*nvrtc)->version(), info.arch_name()));
    }
    info.arch = best;
  }
  r = api.primary_ctx_retain(&device->context, device->device);
  if (r != CUDA_SUCCESS) return api.error(r, fmt::format("retaining cuda:{}'s context", ordinal));
  return std::shared_ptr<const codegen::CudaExecutor>(
      std::make_shared<GpuExecutor>(std::move(device), std::move(info), (*nvrtc)->version()));
}

}  // namespace convjit::runtime::cuda
