// The devices and backends compile() can choose from, by name, and the default for each device.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/backend.hpp"
#include "codegen/cpu/cpu_info.hpp"
#include "support/status.hpp"

namespace convjit::runtime {

/// Where a kernel runs, parsed from CompileOptions::device.
struct Device {
  enum class Kind : std::uint8_t {
    kCpu,
    kCuda,           // an NVIDIA GPU through the driver
    kCudaInterpret,  // the CUDA backend's kernels executed on the host
  };
  Kind kind = Kind::kCpu;
  int ordinal = 0;  // kCuda only
  /// "cpu", "cuda:N" or "cuda-interpret".
  std::string name() const;
};

/// Parses "cpu" (or ""), "cuda" (device 0), "cuda:N" and "cuda-interpret". With
/// `cuda_interpret` (CONVJIT_CUDA_INTERPRET=1) "cuda" and "cuda:N" become "cuda-interpret", so
/// an unchanged program runs its CUDA kernels on the host.
Expected<Device> parse_device(std::string_view text, bool cuda_interpret);

/// Registered backend names, best first ("x86" when built, ..., then "interpreter").
std::vector<std::string> backend_names();

/// The backend compile() uses on `device` when neither the caller nor CONVJIT_BACKEND names
/// one: the best one built for it.
std::string default_backend_name(const Device& device);

/// The backend `name` (empty: default_backend_name(device)) generating for `device`, capped
/// at `isa_cap` where the backend targets the host CPU. Instances are created once per
/// (name, device, isa_cap) and live for the process. An unknown name is InvalidArgument
/// listing the known ones; a backend that cannot serve the device (no GPU, a CPU backend asked
/// for a GPU) says why.
Expected<std::shared_ptr<const codegen::Backend>> get_backend(const Device& device,
                                                              std::string_view name,
                                                              cpu::Isa isa_cap);

/// The interpreter, the fallback for problems a host backend does not support.
std::shared_ptr<const codegen::Backend> interpreter_backend();

}  // namespace convjit::runtime
