// Small problems and hand-built cores the IR and CPU pass tests share.
#pragma once

#include <cstdint>

#include "frontend/problem.hpp"
#include "support/cpu_test_targets.hpp"

namespace convjit::testing {

/// dX of a 1x5x5x3 input, 3x3x3x2 filter, stride 2, SAME padding (1 on each side).
ConvProblem strided_backprop_data();

/// An AVX2 machine whatever the host: 8 f32 lanes, 16 registers, the given L2, one thread.
cpu::testing::TestTarget avx2_target(std::int64_t l2_bytes);

}  // namespace convjit::testing
