#include "tools/bench/bench_report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <tuple>

#include "tools/cli_args.hpp"

namespace convjit::bench {
namespace {

const Record* find_column(const std::vector<Record>& records, const std::string& column) {
  for (const Record& r : records) {
    if (r.column() == column) return &r;
  }
  return nullptr;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? 0 : std::exp(s / static_cast<double>(v.size()));
}

std::string column_width(const std::string& column) {
  return fmt::format("{:>{}}", column, std::max<std::size_t>(column.size(), 9));
}

}  // namespace

std::string Record::column() const {
  return impl == "convjit" ? impl : fmt::format("{}/{}", impl, layouts);
}

void print_table_header(std::ostream& out, const std::vector<std::string>& peer_columns) {
  std::string line =
      fmt::format("{:<24} {:<11} {:<4} {:>2} {:>9}", "shape", "op", "dt", "th", "convjit");
  for (const std::string& c : peer_columns)
    line += fmt::format(" {} {:>6}", column_width(c), "ratio");
  line += fmt::format(" {:>6} {:>9}  check", "%peak", "jit-ms");
  fmt::print(out, "{}\n", line);
}

void print_table_row(std::ostream& out, const std::vector<Record>& records,
                     const std::vector<std::string>& peer_columns) {
  const Record* self = find_column(records, "convjit");
  if (self == nullptr) return;
  std::string line =
      fmt::format("{:<24} {:<11} {:<4} {:>2} {:>9}", self->shape, self->op, self->dtype,
                  self->threads, self->ran() ? fmt::format("{:.1f}", self->gflops) : "failed");
  for (const std::string& c : peer_columns) {
    const Record* peer = find_column(records, c);
    const bool both = peer != nullptr && peer->ran() && self->ran() && peer->gflops > 0;
    line +=
        fmt::format(" {} {:>6}", column_width(both ? fmt::format("{:.1f}", peer->gflops) : "n/a"),
                    both ? fmt::format("{:.2f}x", self->gflops / peer->gflops) : "-");
  }
  line += fmt::format(" {:>5.0f}% {:>9.3f}  ", self->peak_percent, self->setup_ms);
  line += self->ran() ? self->check : fmt::format("FAILED: {}", self->note);
  fmt::print(out, "{}\n", line);
}

std::string summary(const std::vector<Record>& records,
                    const std::vector<std::string>& peer_columns) {
  using Case = std::tuple<std::string, std::string, std::string, int>;  // shape, op, dtype, th
  std::map<Case, std::vector<const Record*>> cases;
  for (const Record& r : records) cases[{r.shape, r.op, r.dtype, r.threads}].push_back(&r);
  // Per (dtype, threads, op) group: ratios against each peer column and the best peer.
  std::map<std::string, std::map<std::string, std::vector<double>>> ratios;
  for (const auto& [key, group] : cases) {
    const auto& [shape, op, dtype, threads] = key;
    const Record* self = nullptr;
    double best = 0;
    for (const Record* r : group) {
      if (r->impl == "convjit")
        self = r;
      else if (r->ran())
        best = std::max(best, r->gflops);
    }
    if (self == nullptr || !self->ran()) continue;
    // GPU cases have no thread count (0).
    const std::string g = threads > 0 ? fmt::format("{} {}T {}", dtype, threads, op)
                                      : fmt::format("{} {}", dtype, op);
    for (const Record* r : group) {
      if (r->impl != "convjit" && r->ran() && r->gflops > 0) {
        ratios[g][r->column()].push_back(self->gflops / r->gflops);
      }
    }
    if (best > 0) ratios[g]["best peer"].push_back(self->gflops / best);
  }
  std::string out = "geometric mean of convjit / peer (cases below 1.0x):\n";
  std::vector<std::string> columns = peer_columns;
  columns.push_back("best peer");
  for (const auto& [g, per_column] : ratios) {
    std::string line = fmt::format("  {:<22}", g);
    for (const std::string& c : columns) {
      const auto it = per_column.find(c);
      if (it == per_column.end()) continue;
      const auto below =
          std::count_if(it->second.begin(), it->second.end(), [](double r) { return r < 1.0; });
      line += fmt::format("  {} {:.2f}x ({}/{})", c, geomean(it->second), below, it->second.size());
    }
    out += line + "\n";
  }
  if (ratios.empty()) out += "  (no case ran on both convjit and a peer)\n";
  return out;
}

void print_csv(std::ostream& out, const std::vector<Record>& records, bool gpu_columns) {
  fmt::print(out,
             "shape,op,dtype,threads,impl,layouts,gflops,ms,flops,setup_ms,check,max_rel_error,"
             "kernel,note{}\n",
             gpu_columns ? ",peak_percent,peak_of,gbps,workspace_bytes" : "");
  for (const Record& r : records) {
    fmt::print(out, "{},{},{},{},{},{},{:.4f},{:.6f},{:.6g},{:.4f},{},{:.3g},{},{}",
               csv_field(r.shape), r.op, r.dtype, r.threads, csv_field(r.impl), r.layouts, r.gflops,
               r.ms, r.flops, r.setup_ms, csv_field(r.check), r.max_rel_error, csv_field(r.kernel),
               csv_field(r.note));
    if (gpu_columns) {
      fmt::print(out, ",{:.2f},{},{:.3f},{}", r.peak_percent, csv_field(r.peak_of), r.gbps,
                 r.workspace_bytes);
    }
    fmt::print(out, "\n");
  }
}

void print_json(std::ostream& out, const std::vector<Record>& records, const std::string& host,
                const std::string& command) {
  fmt::print(out, "{{\n  \"tool\": \"convjit bench\",\n  \"command\": {},\n  \"host\": {},\n",
             json_string(command), json_string(host));
  fmt::print(out, "  \"results\": [");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    fmt::print(out,
               "{}\n    {{\"shape\": {}, \"op\": {}, \"dtype\": {}, \"threads\": {}, \"impl\": {}, "
               "\"layouts\": {}, \"gflops\": {:.4f}, \"ms\": {:.6f}, \"flops\": {:.6g}, "
               "\"setup_ms\": {:.4f}, \"check\": {}, \"max_rel_error\": {:.3g}, \"kernel\": {}, "
               "\"note\": {}, \"peak_percent\": {:.2f}, \"peak_of\": {}, \"gbps\": {:.3f}, "
               "\"workspace_bytes\": {}}}",
               i == 0 ? "" : ",", json_string(r.shape), json_string(r.op), json_string(r.dtype),
               r.threads, json_string(r.impl), json_string(r.layouts), r.gflops, r.ms, r.flops,
               r.setup_ms, json_string(r.check), r.max_rel_error, json_string(r.kernel),
               json_string(r.note), r.peak_percent, json_string(r.peak_of), r.gbps,
               r.workspace_bytes);
  }
  fmt::print(out, "\n  ]\n}}\n");
}

void print_markdown(std::ostream& out, const std::vector<Record>& records,
                    const std::vector<std::string>& peer_columns, const std::string& note) {
  std::string header = "| shape | op | dtype | threads | convjit GF/s |";
  std::string rule = "|---|---|---|---|---|";
  for (const std::string& c : peer_columns) {
    header += fmt::format(" {} GF/s | ratio |", c);
    rule += "---|---|";
  }
  header += " % peak | check | kernel |";
  rule += "---|---|---|";
  fmt::print(out, "{}\n{}\n", header, rule);
  using Case = std::tuple<std::string, std::string, std::string, int>;
  std::map<Case, std::vector<Record>> cases;
  std::vector<Case> order;
  for (const Record& r : records) {
    const Case key{r.shape, r.op, r.dtype, r.threads};
    if (!cases.count(key)) order.push_back(key);
    cases[key].push_back(r);
  }
  for (const Case& key : order) {
    const std::vector<Record>& group = cases[key];
    const Record* self = find_column(group, "convjit");
    if (self == nullptr) continue;
    std::string line =
        fmt::format("| {} | {} | {} | {} | {} |", self->shape, self->op, self->dtype, self->threads,
                    self->ran() ? fmt::format("{:.1f}", self->gflops) : "failed");
    for (const std::string& c : peer_columns) {
      const Record* peer = find_column(group, c);
      const bool both = peer != nullptr && peer->ran() && self->ran() && peer->gflops > 0;
      line += both ? fmt::format(" {:.1f} | {:.2f}x |", peer->gflops, self->gflops / peer->gflops)
                   : " n/a | - |";
    }
    line += fmt::format(" {:.0f}% | {} | `{}` |", self->peak_percent,
                        self->ran() ? self->check : fmt::format("FAILED: {}", self->note),
                        self->kernel);
    fmt::print(out, "{}\n", line);
  }
  fmt::print(out, "\n{}\n\n```\n{}```\n", note, summary(records, peer_columns));
}

int finish_report(std::ostream& out, std::ostream& err, OutputFormat format,
                  const std::string& markdown_path, const std::vector<Record>& records,
                  const std::vector<std::string>& peer_columns, bool gpu_columns,
                  const std::string& host, const std::string& command,
                  const MarkdownPrinter& markdown, bool all_ok) {
  switch (format) {
    case OutputFormat::kTable: fmt::print(out, "\n{}", summary(records, peer_columns)); break;
    case OutputFormat::kCsv: print_csv(out, records, gpu_columns); break;
    case OutputFormat::kJson: print_json(out, records, host, command); break;
  }
  if (!markdown_path.empty()) {
    std::ofstream md(markdown_path);
    markdown(md, fmt::format("`{}`; {}.", command, host));
    if (!md) {
      fmt::print(err, "convjit bench: cannot write {}\n", markdown_path);
      return cli::kExitFailure;
    }
  }
  return all_ok ? cli::kExitOk : cli::kExitFailure;
}

}  // namespace convjit::bench
