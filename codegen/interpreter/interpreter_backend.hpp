// The interpreter backend: keeps the lowered LoopNest (only target-independent transformations
// applied) and runs it through the IR interpreter. Slow by design; it is the oracle that tells a
// lowering bug from a codegen bug, and the fallback when no host code generator supports a
// problem.
#pragma once

#include <memory>

#include "codegen/backend.hpp"

namespace convjit::codegen {

/// The backend's registry name.
inline constexpr std::string_view kInterpreterBackendName = "interpreter";

/// A Backend named "interpreter".
std::unique_ptr<Backend> make_interpreter_backend();

}  // namespace convjit::codegen
