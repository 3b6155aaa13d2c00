// What `convjit bench` prints: one record per implementation and case, shown as a table with a
// ratio per peer column and geometric means, as CSV, or as JSON. The CSV and JSON records are
// the ones benchmarks/tf_peer.py writes for TensorFlow, so outputs of both can be joined
// (benchmarks/plot_ratios.py does).
#pragma once

#include <ostream>
#include <string>
#include <vector>

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
  /// convjit: percent of the host's measured peak (0 when unknown).
  double peak_percent = 0;

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

void print_csv(std::ostream& out, const std::vector<Record>& records);
/// {"tool": ..., "host": {...}, "results": [records]}.
void print_json(std::ostream& out, const std::vector<Record>& records, const std::string& host,
                const std::string& command);
/// The table in Markdown (for --markdown).
void print_markdown(std::ostream& out, const std::vector<Record>& records,
                    const std::vector<std::string>& peer_columns, const std::string& note);

}  // namespace convjit::bench
