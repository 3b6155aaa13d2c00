// The GPU benchmark's table and Markdown: TFLOP/s, the ratio to cuDNN, % of the device's peak
// (of DRAM bandwidth for depthwise ops), GB/s, workspace bytes and convjit's compile time. CSV
// and JSON are bench_report's, with the GPU columns.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tools/bench/bench_report.hpp"

namespace convjit::bench::gpu {

/// `peer_column`: cuDNN's column ("cudnn-9.10.2/best"), or "" when none ran.
void print_gpu_table_header(std::ostream& out, const std::string& peer_column);
/// One line per case: convjit's record first, then cuDNN's when present.
void print_gpu_table_row(std::ostream& out, const std::vector<Record>& group,
                         const std::string& peer_column);
void print_gpu_markdown(std::ostream& out, const std::vector<Record>& records,
                        const std::string& peer_column, const std::string& note);

}  // namespace convjit::bench::gpu
