// The interpreter backend: "compiles" a scheduled LoopNest by keeping it, and runs it through
// the IR interpreter. Slow by design; it is the oracle that tells a lowering bug from a codegen
// bug, and the fallback when no code generator supports a nest.
#pragma once

#include <memory>

#include "codegen/backend.hpp"
#include "codegen/cpu/cpu_info.hpp"

namespace convjit::codegen {

/// The backend's registry name.
inline constexpr std::string_view kInterpreterBackendName = "interpreter";

/// A Backend named "interpreter" scheduling for `cpu` (normally cpu::CpuInfo::generic()).
std::unique_ptr<Backend> make_interpreter_backend(const cpu::CpuInfo& cpu);

}  // namespace convjit::codegen
