// `convjit bench`: the shape suite, convjit against oneDNN in the same process, alternating runs.
#include "tools/bench/bench_command.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <span>
#include <string_view>
#include <string>
#include <thread>
#include <vector>

#include "tools/bench/bench_shapes.hpp"
#include "tools/bench/machine_peak.hpp"
#include "tools/bench/onednn_conv.hpp"
#include "convjit/convjit.hpp"

namespace convjit::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string shapes_path;
  std::vector<std::string> dtypes{"f32", "bf16"};
  std::vector<int> threads{1, 2};
  std::vector<std::string> only;
  double min_time_ms = 200;
  std::string markdown_path;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void print_usage(std::ostream& out) {
  fmt::print(out,
      "usage: convjit bench [--shapes FILE] [--dtypes f32,bf16] [--threads 1,2] [--only NAME,..]\n"
      "                     [--min-time-ms MS] [--markdown FILE]\n"
      "Runs the benchmark shape suite: for every shape and gradient op, convjit and oneDNN on\n"
      "the same NHWC/HWIO tensors, timed alternately in this process. oneDNN is measured twice:\n"
      "'tf' counts the reorders from and to TensorFlow's layouts, 'best' runs its primitive on\n"
      "its preferred layouts only. Each convjit result is checked against oneDNN's first;\n"
      "where oneDNN cannot run a configuration on this CPU (bf16 needs AVX-512 in oneDNN 2.x),\n"
      "convjit is timed alone and checked against its naive reference.\n");
}

// Round to nearest even, as every bf16 producer here does.
std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}
float from_bf16(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// A tensor's bytes plus its shape, filled with uniform values in [-1, 1].
struct Buffer {
  std::vector<std::int64_t> shape;
  std::vector<std::byte, CacheLineAllocator<std::byte>> bytes;  // as a framework aligns tensors
  bool bf16 = false;

  Buffer(std::vector<std::int64_t> s, bool is_bf16) : shape(std::move(s)), bf16(is_bf16) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    bytes.resize(static_cast<std::size_t>(n) * (bf16 ? 2 : 4));
  }
  std::int64_t elements() const { return static_cast<std::int64_t>(bytes.size()) / (bf16 ? 2 : 4); }
  float at(std::int64_t i) const {
    if (bf16) return from_bf16(reinterpret_cast<const std::uint16_t*>(bytes.data())[i]);
    return reinterpret_cast<const float*>(bytes.data())[i];
  }
  void fill_random(std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (std::int64_t i = 0; i < elements(); ++i) {
      const float v = dist(rng);
      if (bf16) {
        reinterpret_cast<std::uint16_t*>(bytes.data())[i] = to_bf16(v);
      } else {
        reinterpret_cast<float*>(bytes.data())[i] = v;
      }
    }
  }
  TensorView view() { return TensorView{bf16 ? DType::kBFloat16 : DType::kFloat32, shape, bytes.data()}; }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <typename F>
double time_ms(F&& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Row {
  std::string shape, op, dtype;
  int threads = 0;
  bool depthwise = false;
  double convjit_gflops = 0, tf_gflops = 0, best_gflops = 0;
  double peak_fraction = 0;
  double compile_first_ms = 0, compile_cached_us = 0, onednn_create_ms = 0;
  double max_rel_error = 0;
  bool check_ok = false;
  /// Why oneDNN could not run this row (empty when it did); ratios are then not defined.
  std::string onednn_unavailable;
  std::string kernel;
};

/// Largest |a - b| over the tensor, relative to the largest |b|.
double relative_error(const Buffer& got, const Buffer& want) {
  double max_diff = 0, max_ref = 0;
  for (std::int64_t i = 0; i < want.elements(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got.at(i)) - want.at(i)));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want.at(i))));
  }
  return max_diff / std::max(max_ref, 1e-30);
}

Row bench_one(const BenchShape& shape, BenchOp op, bool bf16, int threads, const Options& opt,
              std::mt19937& rng) {
  Row row;
  row.shape = shape.name;
  row.op = bench_op_name(shape, op);
  row.dtype = bf16 ? "bf16" : "f32";
  row.threads = threads;
  row.depthwise = shape.depthwise;
  const DType dtype = bf16 ? DType::kBFloat16 : DType::kFloat32;
  const OpDescriptor desc = make_descriptor(shape, op, dtype);

  Buffer x({shape.n, shape.h, shape.w, shape.ic}, bf16);
  Buffer w({shape.kh, shape.kw, shape.ic, shape.m}, bf16);
  Buffer y({shape.n, shape.out_h(), shape.out_w(), shape.oc()}, bf16);
  const bool data_grad = op == BenchOp::kBackpropData;
  (data_grad ? w : x).fill_random(rng);
  y.fill_random(rng);
  Buffer convjit_out = data_grad ? x : w;
  Buffer onednn_out = data_grad ? x : w;

  CompileOptions fresh;
  fresh.num_threads = threads;
  fresh.always_compile = true;
  std::vector<double> first;
  Kernel kernel;
  for (int i = 0; i < 5; ++i) {
    first.push_back(time_ms([&] { kernel = compile(desc, fresh); }));
  }
  row.compile_first_ms = median(first);
  CompileOptions cached = fresh;
  cached.always_compile = false;
  compile(desc, cached);
  std::vector<double> hits;
  for (int i = 0; i < 200; ++i) hits.push_back(time_ms([&] { kernel = compile(desc, cached); }) * 1e3);
  row.compile_cached_us = median(hits);
  row.kernel = kernel.name();

  auto run_convjit = [&] {
    if (data_grad) {
      kernel.run(w.view(), y.view(), convjit_out.view());
    } else {
      kernel.run(x.view(), y.view(), convjit_out.view());
    }
  };
  const double gflop = shape.flops() * 1e-9;

  // oneDNN refuses some configurations on some CPUs (bf16 needs AVX-512 in oneDNN 2.x): then
  // convjit is timed alone and checked against convjit's naive reference instead.
  std::unique_ptr<OneDnnConv> tf, best;
  try {
    tf = std::make_unique<OneDnnConv>(shape, op, bf16, OneDnnLayouts::kTensorFlow);
    best = std::make_unique<OneDnnConv>(shape, op, bf16, OneDnnLayouts::kPreferred);
  } catch (const std::exception& e) {
    row.onednn_unavailable = e.what();
  }
  const auto park_openmp = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  run_convjit();
  if (tf) {
    row.onednn_create_ms = tf->creation_ms();
    void* x_ptr = data_grad ? onednn_out.bytes.data() : x.bytes.data();
    void* w_ptr = data_grad ? w.bytes.data() : onednn_out.bytes.data();
    tf->bind(x_ptr, w_ptr, y.bytes.data());
    best->bind(x_ptr, w_ptr, y.bytes.data());
    tf->run();
    best->run();
    park_openmp();
  } else if (data_grad) {
    run_reference(desc, w.view(), y.view(), onednn_out.view());
  } else {
    run_reference(desc, x.view(), y.view(), onednn_out.view());
  }
  row.max_rel_error = relative_error(convjit_out, onednn_out);
  row.check_ok = row.max_rel_error <= (bf16 ? 2e-2 : 1e-4);

  // Alternate the three in short blocks so drift in clocks or load hits them alike. oneDNN's
  // OpenMP workers keep spinning for several milliseconds after a primitive returns (libgomp's
  // default spin count); on a 2-core machine they would steal a core from convjit's pool, so
  // each oneDNN block is followed by a pause long enough for them to park. Within a block each
  // library runs as it would in a training loop: back to back.
  const double warm = std::max(1e-3, time_ms(run_convjit));
  const int reps = std::clamp(static_cast<int>(opt.min_time_ms / warm), 6, 120);
  const int block = std::clamp(reps / 6, 1, 10);
  std::vector<double> t_convjit, t_tf, t_best;
  for (int done = 0; done < reps; done += block) {
    for (int i = 0; i < block; ++i) t_convjit.push_back(time_ms(run_convjit));
    if (!tf) continue;
    for (int i = 0; i < block; ++i) t_tf.push_back(time_ms([&] { tf->run(); }));
    for (int i = 0; i < block; ++i) t_best.push_back(time_ms([&] { best->run(); }));
    park_openmp();
  }
  row.convjit_gflops = gflop / (median(t_convjit) * 1e-3);
  if (tf) {
    row.tf_gflops = gflop / (median(t_tf) * 1e-3);
    row.best_gflops = gflop / (median(t_best) * 1e-3);
  }
  return row;
}

std::string format_row(const Row& r, bool markdown) {
  const bool peer = r.onednn_unavailable.empty();
  std::string check =
      r.check_ok ? "ok" : fmt::format("MISMATCH (max rel error {:.2e})", r.max_rel_error);
  if (!peer) check += " vs reference; oneDNN n/a: " + r.onednn_unavailable;
  auto num = [&](double v, int precision) {
    return peer ? fmt::format("{:.{}f}", v, precision) : std::string("n/a");
  };
  auto ratio = [&](double peer_gflops) {
    return peer ? fmt::format("{:.2f}x", r.convjit_gflops / peer_gflops) : std::string("n/a");
  };
  const std::string create_ms = num(r.onednn_create_ms, 3);
  if (markdown) {
    return fmt::format(
        "| {} | {} | {} | {} | {:.1f} | {} | {} | {} | {} | {:.0f}% | {:.3f} | {:.2f} | {} | {} | "
        "`{}` |",
        r.shape, r.op, r.dtype, r.threads, r.convjit_gflops, num(r.tf_gflops, 1),
        ratio(r.tf_gflops), num(r.best_gflops, 1), ratio(r.best_gflops), 100 * r.peak_fraction,
        r.compile_first_ms, r.compile_cached_us, create_ms, check, r.kernel);
  }
  return fmt::format(
      "{:<20} {:<11} {:<4} {:>2} {:>9.1f} {:>9} {:>8} {:>9} {:>8} {:>6.0f}% {:>10.3f} {:>10.2f} "
      "{:>10} {}",
      r.shape, r.op, r.dtype, r.threads, r.convjit_gflops, num(r.tf_gflops, 1),
      ratio(r.tf_gflops), num(r.best_gflops, 1), ratio(r.best_gflops), 100 * r.peak_fraction,
      r.compile_first_ms, r.compile_cached_us, create_ms, check);
}

std::string fmt_ratio(double r) { return fmt::format("{:.2f}x", r); }

double geomean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / static_cast<double>(v.size()));
}

/// Returns false on a usage error (reported on err); sets *help for --help.
bool parse_options(std::span<const std::string_view> args, Options* opt, bool* help,
                   std::ostream& err) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string arg(args[i]);
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = std::string(args[++i]);
      return true;
    };
    std::string v;
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return true;
    } else if (arg == "--shapes" && value(&v)) {
      opt->shapes_path = v;
    } else if (arg == "--dtypes" && value(&v)) {
      opt->dtypes = split(v, ',');
    } else if (arg == "--threads" && value(&v)) {
      opt->threads.clear();
      for (const auto& t : split(v, ',')) opt->threads.push_back(std::atoi(t.c_str()));
    } else if (arg == "--only" && value(&v)) {
      opt->only = split(v, ',');
    } else if (arg == "--min-time-ms" && value(&v)) {
      opt->min_time_ms = std::atof(v.c_str());
    } else if (arg == "--markdown" && value(&v)) {
      opt->markdown_path = v;
    } else {
      fmt::print(err, "convjit bench: unknown or incomplete argument '{}'\n", arg);
      return false;
    }
  }
  for (const auto& d : opt->dtypes) {
    if (d != "f32" && d != "bf16") {
      fmt::print(err, "convjit bench: --dtypes takes f32 and/or bf16, not '{}'\n", d);
      return false;
    }
  }
  for (int t : opt->threads) {
    if (t < 1) {
      fmt::print(err, "convjit bench: --threads takes positive counts\n");
      return false;
    }
  }
  return true;
}

}  // namespace

int bench_command(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  Options opt;
  opt.shapes_path = CONVJIT_DEFAULT_SHAPES;
  bool help = false;
  if (!parse_options(args, &opt, &help, err)) {
    print_usage(err);
    return 2;
  }
  if (help) {
    print_usage(out);
    return 0;
  }
  std::vector<BenchShape> shapes;
  try {
    shapes = load_shapes(opt.shapes_path);
  } catch (const std::exception& e) {
    fmt::print(err, "convjit bench: {}\n", e.what());
    return 2;
  }
  std::mt19937 rng(2024);
  std::vector<Row> rows;
  fmt::print(out,
             "{:<20} {:<11} {:<4} {:>2} {:>9} {:>9} {:>8} {:>9} {:>8} {:>7} {:>10} {:>10} {:>10} "
             "check\n",
             "shape", "op", "dt", "th", "convjit", "dnnl-tf", "ratio", "dnnl-best", "ratio",
             "%peak", "jit-1st-ms", "jit-hit-us", "dnnl-mk-ms");
  // The peak at each thread count, measured before any kernel runs: turbo clocks depend on
  // how many cores are busy.
  std::map<int, MachinePeak> peaks;
  for (int threads : opt.threads) peaks[threads] = measure_machine_peak(threads);
  std::string peak_note = "this host's measured peak per core:";
  for (const auto& [threads, p] : peaks) {
    peak_note +=
        fmt::format(" {}T {:.1f} f32, {:.1f} bf16;", threads, p.f32_per_core, p.bf16_per_core);
  }
  peak_note += fmt::format(" {}", peaks.begin() != peaks.end() ? peaks.begin()->second.how : "");
  fmt::print(out, "(GFLOP/s; ratio = convjit / oneDNN; %peak of {})\n", peak_note);
  bool all_ok = true;
  for (const auto& dt : opt.dtypes) {
    for (int threads : opt.threads) {
      set_onednn_threads(threads);
      for (const auto& shape : shapes) {
        if (!opt.only.empty() &&
            std::find(opt.only.begin(), opt.only.end(), shape.name) == opt.only.end()) {
          continue;
        }
        for (BenchOp op : ops_for(shape)) {
          try {
            Row r = bench_one(shape, op, dt == "bf16", threads, opt, rng);
            const MachinePeak& peak = peaks[threads];
            const double per_core = dt == "bf16" ? peak.bf16_per_core : peak.f32_per_core;
            if (per_core > 0) r.peak_fraction = r.convjit_gflops / (per_core * threads);
            all_ok = all_ok && r.check_ok;
            fmt::print(out, "{}\n", format_row(r, false));
            out.flush();
            rows.push_back(std::move(r));
          } catch (const std::exception& e) {
            all_ok = false;
            fmt::print(out, "{:<20} {:<11} {:<4} {:>2}  FAILED: {}\n", shape.name,
                       bench_op_name(shape, op), dt, threads, e.what());
          }
        }
      }
    }
  }

  // Geometric means of the ratios per dtype, thread count and op; the preferred-layout mean
  // covers the non-depthwise shapes, as the targets state it.
  std::map<std::string, std::vector<double>> tf_ratios, best_ratios;
  for (const auto& r : rows) {
    if (!r.onednn_unavailable.empty()) continue;
    const std::string key = fmt::format("{} {}T {}", r.dtype, r.threads, r.op);
    tf_ratios[key].push_back(r.convjit_gflops / r.tf_gflops);
    if (!r.depthwise) best_ratios[key].push_back(r.convjit_gflops / r.best_gflops);
  }
  std::string summary;
  for (const auto& [key, v] : tf_ratios) {
    const auto it = best_ratios.find(key);
    summary += fmt::format("  {:<24} vs tf layouts {:.2f}x   vs preferred layouts {}\n", key,
                           geomean(v),
                           it == best_ratios.end() ? "-" : fmt_ratio(geomean(it->second)));
  }
  fmt::print(out, "\ngeometric mean of convjit / oneDNN:\n{}", summary);

  if (!opt.markdown_path.empty()) {
    std::ofstream md(opt.markdown_path);
    md << "| shape | op | dtype | threads | convjit GF/s | oneDNN tf GF/s | ratio | oneDNN best "
          "GF/s | ratio | % peak | jit first ms | jit hit us | oneDNN create ms | check | kernel |\n"
       << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& r : rows) md << format_row(r, true) << "\n";
    md << "\n% peak: of " << peak_note << ".\n";
    md << "\nGeometric means of convjit / oneDNN:\n\n```\n" << summary << "```\n";
  }
  return all_ok ? 0 : 1;
}

}  // namespace convjit::bench
