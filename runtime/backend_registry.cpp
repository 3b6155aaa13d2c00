#include "runtime/backend_registry.hpp"

#include <charconv>
#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "codegen/interpreter/interpreter_backend.hpp"

#ifdef CONVJIT_HAVE_CUDA
#include "codegen/cuda/cuda_backend.hpp"
#include "runtime/cuda/gpu_executor.hpp"
#include "runtime/cuda/interpret/interpret_executor.hpp"
#endif

#if __has_include("codegen/x86/x86_backend.hpp")
#include "codegen/x86/x86_backend.hpp"
#define CONVJIT_HAVE_X86_BACKEND 1
#endif

namespace convjit::runtime {
namespace {

using Factory = Expected<std::unique_ptr<codegen::Backend>> (*)(const Device&, cpu::Isa isa_cap);

struct Registration {
  std::string_view name;
  Factory make;
  /// Whether the backend generates for this kind of device.
  bool (*serves)(Device::Kind);
};

bool serves_cpu(Device::Kind kind) { return kind == Device::Kind::kCpu; }

#ifdef CONVJIT_HAVE_X86_BACKEND
Expected<std::unique_ptr<codegen::Backend>> make_x86(const Device&, cpu::Isa isa_cap) {
  return codegen::make_x86_backend(cpu::CpuInfo::host(isa_cap));
}
#endif

#ifdef CONVJIT_HAVE_CUDA
bool serves_cuda(Device::Kind kind) {
  return kind == Device::Kind::kCuda || kind == Device::Kind::kCudaInterpret;
}

// One backend for both CUDA devices: the executor decides where its programs run (the GPU
// through the driver, or the host through the interpreter).
Expected<std::unique_ptr<codegen::Backend>> make_cuda(const Device& device, cpu::Isa) {
  Expected<std::shared_ptr<const codegen::CudaExecutor>> executor =
      device.kind == Device::Kind::kCudaInterpret ? interpret::make_interpret_executor()
                                                  : cuda::make_gpu_executor(device.ordinal);
  if (!executor) return executor.status();
  return codegen::make_cuda_backend(std::move(executor).value());
}
#endif

Expected<std::unique_ptr<codegen::Backend>> make_interpreter(const Device&, cpu::Isa) {
  return codegen::make_interpreter_backend();
}

// Best first: for each device kind, the first entry serving it is the default.
const std::vector<Registration>& registrations() {
  static const std::vector<Registration> kRegistrations = {
#ifdef CONVJIT_HAVE_X86_BACKEND
      {codegen::kX86BackendName, &make_x86, &serves_cpu},
#endif
#ifdef CONVJIT_HAVE_CUDA
      {codegen::kCudaBackendName, &make_cuda, &serves_cuda},
#endif
      {codegen::kInterpreterBackendName, &make_interpreter, &serves_cpu},
  };
  return kRegistrations;
}

std::mutex g_mutex;
std::map<std::tuple<std::string, std::string, cpu::Isa>, std::shared_ptr<const codegen::Backend>>
    g_instances;  // guarded by g_mutex

}  // namespace

std::string Device::name() const {
  switch (kind) {
    case Kind::kCpu: return "cpu";
    case Kind::kCuda: return fmt::format("cuda:{}", ordinal);
    case Kind::kCudaInterpret: return "cuda-interpret";
  }
  return "cpu";
}

Expected<Device> parse_device(std::string_view text, bool cuda_interpret) {
  Device device;
  if (text.empty() || text == "cpu") return device;
  if (text == "cuda-interpret") {
    device.kind = Device::Kind::kCudaInterpret;
    return device;
  }
  if (text == "cuda" || text.substr(0, 5) == "cuda:") {
    device.kind = cuda_interpret ? Device::Kind::kCudaInterpret : Device::Kind::kCuda;
    if (text.size() > 5) {
      const std::string_view digits = text.substr(5);
      const auto [end, error] =
          std::from_chars(digits.data(), digits.data() + digits.size(), device.ordinal);
      if (error != std::errc() || end != digits.data() + digits.size() || device.ordinal < 0) {
        return invalid_argument(fmt::format(
            "device '{}': the CUDA device ordinal must be a non-negative integer", text));
      }
    }
    if (device.kind == Device::Kind::kCudaInterpret) device.ordinal = 0;
    return device;
  }
  return invalid_argument(fmt::format(
      "unknown device '{}'; known devices: cpu, cuda, cuda:N, cuda-interpret", text));
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const Registration& r : registrations()) names.emplace_back(r.name);
  return names;
}

std::string default_backend_name(const Device& device) {
  for (const Registration& r : registrations()) {
    if (r.serves(device.kind)) return std::string(r.name);
  }
  return {};
}

Expected<std::shared_ptr<const codegen::Backend>> get_backend(const Device& device,
                                                              std::string_view name,
                                                              cpu::Isa isa_cap) {
  std::string chosen(name);
  if (chosen.empty()) chosen = default_backend_name(device);
  if (chosen.empty()) {
    return unimplemented(fmt::format(
        "no backend for device '{}': convjit was built without CUDA support", device.name()));
  }
  const Registration* found = nullptr;
  for (const Registration& r : registrations()) {
    if (r.name == chosen) found = &r;
  }
  if (found == nullptr) {
    return invalid_argument(fmt::format("unknown convjit backend '{}'; known backends: {}", chosen,
                                        fmt::join(backend_names(), ", ")));
  }
  if (!found->serves(device.kind)) {
    return invalid_argument(
        fmt::format("backend '{}' does not run on device '{}'", chosen, device.name()));
  }
  // Only backends for the host CPU depend on the ISA cap: key the others once.
  if (device.kind != Device::Kind::kCpu || chosen == codegen::kInterpreterBackendName) {
    isa_cap = cpu::Isa::kGeneric;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  auto key = std::make_tuple(chosen, device.name(), isa_cap);
  auto it = g_instances.find(key);
  if (it != g_instances.end()) return it->second;
  Expected<std::unique_ptr<codegen::Backend>> made = found->make(device, isa_cap);
  if (!made.has_value()) return made.status();
  std::shared_ptr<const codegen::Backend> backend = std::move(made).value();
  g_instances.emplace(std::move(key), backend);
  return backend;
}

std::shared_ptr<const codegen::Backend> interpreter_backend() {
  return *get_backend(Device{}, codegen::kInterpreterBackendName, cpu::Isa::kGeneric);
}

}  // namespace convjit::runtime
