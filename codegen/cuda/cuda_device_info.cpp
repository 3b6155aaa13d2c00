#include "codegen/cuda/cuda_device_info.hpp"

#include <fmt/format.h>

#include <cctype>

namespace convjit::codegen {
namespace {

// Resources per architecture from NVIDIA's CUDA C++ Programming Guide (compute capabilities
// table) and each data-center part's SM count. Consumer parts of one architecture differ in SM
// count only, which the plan uses for split-K decisions and nothing else.
struct KnownArch {
  std::string_view name;
  int arch;
  bool arch_specific;
  std::string_view part;
  int sm_count;
  int shared_optin_kib;
  int shared_per_sm_kib;
  int max_threads_per_sm;
};

constexpr KnownArch kKnownArchs[] = {
    {"sm_75", 75, false, "Turing (T4)", 40, 64, 64, 1024},
    {"sm_80", 80, false, "Ampere (A100)", 108, 163, 164, 2048},
    {"sm_86", 86, false, "Ampere (A10/RTX 30)", 84, 99, 100, 1536},
    {"sm_87", 87, false, "Ampere (Orin)", 16, 163, 164, 1536},
    {"sm_89", 89, false, "Ada (L4/L40/RTX 40)", 142, 99, 100, 1536},
    {"sm_90", 90, false, "Hopper (H100)", 132, 227, 228, 2048},
    {"sm_90a", 90, true, "Hopper (H100), arch-specific", 132, 227, 228, 2048},
    {"sm_100", 100, false, "Blackwell (B200)", 148, 227, 228, 2048},
    {"sm_100a", 100, true, "Blackwell (B200), arch-specific", 148, 227, 228, 2048},
    {"sm_120", 120, false, "Blackwell (RTX 50)", 170, 99, 100, 1536},
};

}  // namespace

std::string CudaDeviceInfo::arch_name() const {
  return fmt::format("sm_{}{}", arch, arch_specific ? "a" : "");
}

bool is_cuda_arch_name(std::string_view name) {
  if (name.size() < 4 || name.substr(0, 3) != "sm_") return false;
  std::string_view digits = name.substr(3);
  if (digits.back() == 'a') digits.remove_suffix(1);
  if (digits.empty()) return false;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::vector<std::string> known_cuda_target_names() {
  std::vector<std::string> names;
  for (const KnownArch& k : kKnownArchs) names.emplace_back(k.name);
  return names;
}

Expected<CudaDeviceInfo> known_cuda_target(std::string_view arch_name) {
  for (const KnownArch& k : kKnownArchs) {
    if (k.name != arch_name) continue;
    CudaDeviceInfo info;
    info.arch = k.arch;
    info.arch_specific = k.arch_specific;
    info.name = fmt::format("{} (table)", k.part);
    info.sm_count = k.sm_count;
    info.shared_bytes_per_block_optin = k.shared_optin_kib * 1024;
    info.shared_bytes_per_sm = k.shared_per_sm_kib * 1024;
    info.max_threads_per_sm = k.max_threads_per_sm;
    return info;
  }
  return invalid_argument(fmt::format("unknown CUDA target '{}'; known targets: {}", arch_name,
                                      fmt::join(known_cuda_target_names(), ", ")));
}

}  // namespace convjit::codegen
