// `convjit bench --device cuda[:N]`: every case of the shapes file on the GPU, convjit's CUDA
// kernel against cuDNN's fastest algorithm on the same device tensors.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tools/bench/bench_options.hpp"
#include "tools/bench/bench_shapes.hpp"

namespace convjit::bench::gpu {

/// Runs the suite on options.device; returns the exit code (0 every result matched, 1 a
/// mismatch, a failed case or no usable device: "no CUDA device: <reason>" on `err`).
int run_gpu_bench(const BenchOptions& options, const std::vector<BenchShape>& shapes,
                  const std::string& command, std::ostream& out, std::ostream& err);

}  // namespace convjit::bench::gpu
