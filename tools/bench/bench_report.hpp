// What `convjit bench` prints: one record per implementation and case, shown as a table with a
// ratio per peer column and geometric means, as CSV, or as JSON. The CSV and JSON records are
// the ones benchmarks/tf_peer.py writes for TensorFlow, so outputs of both can be joined
// (benchmarks/plot_ratios.py does).
#pragma once

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "tools/bench/bench_options.hpp"

namespace convjit::bench {

/// One implementation on one case (shape, op, dtype, threads).
struct Record {
  std::string shape, op, dtype;
  int threads = 0;
  /// "convjit", "onednn-2.6.3", "tensorflow-2.21.0", ...
  std::string impl;
  /// "tf": TensorFlow's layouts, conversions counted; "best": the implementation's own.
  std::string layouts = "tf";
  /// Median GFLOP/s and milliseconds per call; 0 when `note` says why it did not run.
  double gflops = 0, ms = 0;
  /// Nominal FLOPs of one call (padding taps included).
  double flops = 0;
  /// convjit: first compile (ms); peers: primitive creation (ms).
  double setup_ms = 0;
  /// convjit: "ok" or "mismatch" against the first peer (or the naive reference).
  std::string check;
  double max_rel_error = 0;
  /// convjit's kernel name.
  std::string kernel;
  /// Why the implementation did not run the case (empty when it did).
  std::string note;
  /// convjit: percent of the host's measured peak (0 when unknown); on a GPU of the device's
  /// peak for the dtype's math, or of its DRAM bandwidth for depthwise ops (`peak_of` says).
  double peak_percent = 0;
  /// "" (CPU), "tensor cores", "ffma", "dram".
  std::string peak_of;
  /// GPU: bytes of the three tensors over the time (GB/s); device workspace one run uses.
  double gbps = 0;
  std::size_t workspace_bytes = 0;

  bool ran() const { return note.empty(); }
  std::string column() const;
};

/// Header lines of the table, before the first case.
void print_table_header(std::ostream& out, const std::vector<std::string>& peer_columns);
/// One table line for a case's records (convjit's first).
void print_table_row(std::ostream& out, const std::vector<Record>& records,
                     const std::vector<std::string>& peer_columns);
/// Geometric means of convjit / peer per dtype, threads and op, per peer column and against
/// the best peer of each case, with the count of cases below 1.0x.
std::string summary(const std::vector<Record>& records,
                    const std::vector<std::string>& peer_columns);

/// The CSV records; `gpu_columns` appends peak_percent, peak_of, gbps and workspace_bytes (the
/// CPU records keep the columns benchmarks/tf_peer.py writes).
void print_csv(std::ostream& out, const std::vector<Record>& records, bool gpu_columns = false);
/// {"tool": ..., "host": {...}, "results": [records]}.
void print_json(std::ostream& out, const std::vector<Record>& records, const std::string& host,
                const std::string& command);
/// The table in Markdown (for --markdown).
void print_markdown(std::ostream& out, const std::vector<Record>& records,
                    const std::vector<std::string>& peer_columns, const std::string& note);

/// Markdown for --markdown: the records and a note (the command and the host) to print.
using MarkdownPrinter = std::function<void(std::ostream&, const std::string& note)>;

/// What a run prints once every case has run, in `format`: the geometric-mean summary below
/// the table rows printed so far, or every record as CSV (`gpu_columns` as print_csv) or JSON;
/// with a `markdown_path`, the Markdown table written there. Returns the exit status: failure
/// when a case failed (`all_ok` false) or the Markdown file cannot be written (said on `err`).
int finish_report(std::ostream& out, std::ostream& err, OutputFormat format,
                  const std::string& markdown_path, const std::vector<Record>& records,
                  const std::vector<std::string>& peer_columns, bool gpu_columns,
                  const std::string& host, const std::string& command,
                  const MarkdownPrinter& markdown, bool all_ok);

}  // namespace convjit::bench
