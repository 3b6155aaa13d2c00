#include "tools/bench/gpu/gpu_report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

namespace convjit::bench::gpu {
namespace {

const Record* find_impl(const std::vector<Record>& group, bool convjit) {
  for (const Record& r : group) {
    if ((r.impl == "convjit") == convjit) return &r;
  }
  return nullptr;
}

std::string tflops(const Record* r) {
  return r != nullptr && r->ran() ? fmt::format("{:.2f}", r->gflops * 1e-3) : "n/a";
}

std::string ratio(const Record* self, const Record* peer) {
  const bool both =
      self != nullptr && peer != nullptr && self->ran() && peer->ran() && peer->gflops > 0;
  return both ? fmt::format("{:.2f}x", self->gflops / peer->gflops) : "-";
}

std::string mib(std::size_t bytes) {
  return bytes == 0 ? "0" : fmt::format("{:.1f}M", static_cast<double>(bytes) / (1 << 20));
}

std::string outcome(const Record& self, const Record* peer) {
  std::string s = self.ran() ? self.check : "FAILED: " + self.note;
  if (peer != nullptr && !peer->ran()) s += "; cuDNN did not run: " + peer->note;
  return s;
}

}  // namespace

void print_gpu_table_header(std::ostream& out, const std::string& peer_column) {
  std::string line = fmt::format("{:<28} {:<13} {:<8} {:>8}", "shape", "op", "dt", "convjit");
  if (!peer_column.empty()) line += fmt::format(" {:>8} {:>6}", "cudnn", "ratio");
  line += fmt::format(" {:>6} {:>7} {:>8}", "%peak", "GB/s", "ws");
  if (!peer_column.empty()) line += fmt::format(" {:>8}", "cudnn-ws");
  line += fmt::format(" {:>8}  check", "jit-ms");
  fmt::print(out,
             "{}\n(TFLOP/s, nominal FLOPs; %peak: of the dtype's math peak, dw: of DRAM "
             "bandwidth; ws: device workspace)\n",
             line);
}

void print_gpu_table_row(std::ostream& out, const std::vector<Record>& group,
                         const std::string& peer_column) {
  const Record* self = find_impl(group, true);
  if (self == nullptr) return;
  const Record* peer = find_impl(group, false);
  std::string line =
      fmt::format("{:<28} {:<13} {:<8} {:>8}", self->shape, self->op, self->dtype, tflops(self));
  if (!peer_column.empty()) line += fmt::format(" {:>8} {:>6}", tflops(peer), ratio(self, peer));
  line += fmt::format(" {:>5.0f}% {:>7.0f} {:>8}", self->peak_percent, self->gbps,
                      mib(self->workspace_bytes));
  if (!peer_column.empty()) {
    line +=
        fmt::format(" {:>8}", peer != nullptr && peer->ran() ? mib(peer->workspace_bytes) : "-");
  }
  line += fmt::format(" {:>8.1f}  {}", self->setup_ms, outcome(*self, peer));
  fmt::print(out, "{}\n", line);
}

void print_gpu_markdown(std::ostream& out, const std::vector<Record>& records,
                        const std::string& peer_column, const std::string& note) {
  fmt::print(out,
             "| shape | op | dtype | convjit TFLOP/s | {} TFLOP/s | ratio | % peak | GB/s | "
             "convjit ws | cuDNN ws | compile ms | check | kernel | cuDNN algorithm |\n"
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
             peer_column.empty() ? "cuDNN" : peer_column);
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& self = records[i];
    if (self.impl != "convjit") continue;
    const Record* peer =
        i + 1 < records.size() && records[i + 1].impl != "convjit" ? &records[i + 1] : nullptr;
    fmt::print(out,
               "| {} | {} | {} | {} | {} | {} | {:.0f}% ({}) | {:.0f} | {} | {} | {:.1f} | {} "
               "| `{}` | {} |\n",
               self.shape, self.op, self.dtype, tflops(&self), tflops(peer), ratio(&self, peer),
               self.peak_percent, self.peak_of, self.gbps, mib(self.workspace_bytes),
               peer != nullptr && peer->ran() ? mib(peer->workspace_bytes) : "-", self.setup_ms,
               outcome(self, peer), self.kernel, peer != nullptr ? peer->kernel : "");
  }
  std::vector<std::string> columns;
  if (!peer_column.empty()) columns.push_back(peer_column);
  fmt::print(out, "\n{}\n\n```\n{}```\n", note, summary(records, columns));
}

}  // namespace convjit::bench::gpu
