// `convjit bench`: a shapes file, convjit against its peers in the same process, alternating
// runs. Flags are in bench_options.*, the peers in peers.* (libraries loaded at run time), the
// output formats in bench_report.*.
#include "tools/bench/bench_command.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "convjit/convjit.hpp"
#include "tools/bench/bench_options.hpp"
#include "tools/bench/bench_report.hpp"
#include "tools/bench/bench_shapes.hpp"
#include "tools/bench/bench_tensor.hpp"
#include "tools/bench/gpu/gpu_bench.hpp"
#include "tools/bench/machine_peak.hpp"
#include "tools/bench/peers.hpp"
#include "tools/cli_args.hpp"

namespace convjit::bench {
namespace {

using Clock = std::chrono::steady_clock;

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

int peer_dtype(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return CONVJIT_PEER_BF16;
    case DType::kHalf:
      return CONVJIT_PEER_F16;
    case DType::kFloat64:
      return CONVJIT_PEER_F64;
    case DType::kFloat32:
      break;
  }
  return CONVJIT_PEER_F32;
}

convjit_peer_problem peer_problem(const BenchShape& s, BenchOp op, DType dtype, bool preferred) {
  convjit_peer_problem p{};
  p.n = s.n;
  p.h = s.h;
  p.w = s.w;
  p.ic = s.ic;
  p.m = s.m;
  p.kh = s.kh;
  p.kw = s.kw;
  p.stride = s.stride;
  p.dilation = s.dilation;
  p.out_h = s.out_h();
  p.out_w = s.out_w();
  p.pad_top = s.pad_before_h();
  p.pad_bottom = s.pad_after_h();
  p.pad_left = s.pad_before_w();
  p.pad_right = s.pad_after_w();
  p.depthwise = s.depthwise ? 1 : 0;
  p.backprop_data = op == BenchOp::kBackpropData ? 1 : 0;
  p.dtype = peer_dtype(dtype);
  p.preferred_layouts = preferred ? 1 : 0;
  return p;
}

struct Context {
  const BenchOptions& options;
  const std::vector<std::unique_ptr<PeerLibrary>>& peers;
  std::mt19937 rng{2024};
};

// One case: convjit and every peer column on the same tensors, checked, then timed in
// alternating blocks. Returns convjit's record first.
std::vector<Record> bench_case(const BenchShape& shape, BenchOp op, DType dtype, int threads,
                               Context& ctx) {
  Record base;
  base.shape = shape.name;
  base.op = bench_op_name(shape, op);
  base.dtype = std::string(short_dtype_name(dtype));
  base.threads = threads;
  base.flops = shape.flops();
  Record self = base;
  self.impl = "convjit";

  const OpDescriptor desc = make_descriptor(shape, op, dtype);
  const bool data_grad = op == BenchOp::kBackpropData;
  BenchTensor x(dtype, {shape.n, shape.h, shape.w, shape.ic});
  BenchTensor w(dtype, {shape.kh, shape.kw, shape.ic, shape.m});
  BenchTensor y(dtype, {shape.n, shape.out_h(), shape.out_w(), shape.oc()});
  (data_grad ? w : x).fill_random(ctx.rng);
  y.fill_random(ctx.rng);
  BenchTensor mine(dtype, (data_grad ? x : w).shape());

  CompileOptions fresh;
  fresh.num_threads = threads;
  fresh.always_compile = true;
  Kernel kernel;
  std::vector<double> first;
  for (int i = 0; i < 3; ++i) first.push_back(time_ms([&] { kernel = compile(desc, fresh); }));
  self.setup_ms = median(first);
  CompileOptions cached = fresh;
  cached.always_compile = false;
  kernel = compile(desc, cached);
  self.kernel = kernel.name();
  auto run_convjit = [&] { kernel.run(data_grad ? w.view() : x.view(), y.view(), mine.view()); };
  run_convjit();

  // Each peer in both layouts, each into an output of its own; a peer that cannot run a case
  // says why in its record. The first that runs is the reference for convjit's check.
  struct Column {
    Record record;
    std::unique_ptr<BenchTensor> output;
    std::unique_ptr<PeerConv> conv;
  };
  std::vector<Column> columns;
  int reference = -1;
  for (const auto& lib : ctx.peers) {
    lib->configure(threads, ctx.options.isa_cap);
    for (bool preferred : {false, true}) {
      Column col{base, std::make_unique<BenchTensor>(dtype, mine.shape()), nullptr};
      col.record.impl = lib->name();
      col.record.layouts = preferred ? "best" : "tf";
      std::string why;
      col.conv = lib->create(peer_problem(shape, op, dtype, preferred), &why);
      if (!col.conv) {
        col.record.note = why.empty() ? "not supported" : why;
      } else {
        try {
          col.record.setup_ms = col.conv->creation_ms();
          void* result = col.output->data();
          col.conv->bind(data_grad ? result : x.data(), data_grad ? w.data() : result, y.data());
          col.conv->run();
          col.conv->finish();
          if (reference < 0) reference = static_cast<int>(columns.size());
        } catch (const std::exception& e) {
          col.record.note = e.what();
          col.conv.reset();
        }
      }
      columns.push_back(std::move(col));
    }
  }
  // Where no peer ran the case, convjit's naive reference is the one to match.
  BenchTensor naive(dtype, reference >= 0 ? std::vector<std::int64_t>{0} : mine.shape());
  if (reference < 0) run_reference(desc, data_grad ? w.view() : x.view(), y.view(), naive.view());
  const BenchTensor& theirs =
      reference >= 0 ? *columns[static_cast<std::size_t>(reference)].output : naive;
  const std::string against =
      reference >= 0 ? columns[static_cast<std::size_t>(reference)].record.column() : "reference";
  // Half types are compared after rounding: allow their precision, not float's.
  const double tolerance = dtype == DType::kFloat32 || dtype == DType::kFloat64 ? 1e-4 : 2e-2;
  self.max_rel_error = relative_error(mine, theirs);
  self.check =
      self.max_rel_error <= tolerance
          ? fmt::format("ok vs {}", against)
          : fmt::format("MISMATCH vs {} (max rel error {:.2e})", against, self.max_rel_error);

  // Alternate in short blocks so that drift in clocks or load hits every column alike. Each
  // block is timed in its implementation's steady state, as in a training loop where the same
  // kernels run back to back: it starts after an untimed run of the same implementation of at
  // least kSettleMs. By then the previous implementation's threads have stopped spinning
  // (OpenMP workers spin for milliseconds after a call returns and would steal cores on a
  // small machine), and this one's threads are awake and spread over the cores again (a
  // sleep instead lets a virtual machine's scheduler pack the woken threads onto one core).
  constexpr double kSettleMs = 20;
  const auto settle = [](const auto& run) {
    const auto t0 = Clock::now();
    do run();
    while (std::chrono::duration<double, std::milli>(Clock::now() - t0).count() < kSettleMs);
  };
  const double warm = std::max(1e-3, time_ms(run_convjit));
  const int reps = std::clamp(static_cast<int>(ctx.options.min_time_ms / warm), 6, 120);
  const int block = std::clamp(reps / 6, 1, 10);
  std::vector<double> t_self;
  std::vector<std::vector<double>> t_peer(columns.size());
  for (int done = 0; done < reps; done += block) {
    settle(run_convjit);
    for (int i = 0; i < block; ++i) t_self.push_back(time_ms(run_convjit));
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (!columns[c].conv) continue;
      const auto run_peer = [&] { columns[c].conv->run(); };
      settle(run_peer);
      for (int i = 0; i < block; ++i) t_peer[c].push_back(time_ms(run_peer));
    }
  }
  self.ms = median(t_self);
  self.gflops = base.flops * 1e-9 / (self.ms * 1e-3);
  std::vector<Record> out{self};
  for (std::size_t c = 0; c < columns.size(); ++c) {
    Record r = columns[c].record;
    if (columns[c].conv) {
      r.ms = median(t_peer[c]);
      r.gflops = base.flops * 1e-9 / (r.ms * 1e-3);
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int bench_command(std::span<const std::string_view> args, std::ostream& out, std::ostream& err) {
  BenchOptions opt;
  try {
    opt = parse_bench_options(args);
  } catch (const cli::UsageError& e) {
    fmt::print(err, "convjit bench: {}\n(`convjit bench --help` lists the flags)\n", e.what());
    return cli::kExitUsage;
  }
  if (opt.help) {
    fmt::print(out, "{}", bench_usage());
    return cli::kExitOk;
  }
  std::vector<BenchShape> shapes;
  try {
    shapes = select_shapes(load_shapes(opt.shapes_path), opt.only);
  } catch (const std::exception& e) {
    fmt::print(err, "convjit bench: {}\n", e.what());
    return cli::kExitUsage;
  }
  if (shapes.empty()) {
    fmt::print(err, "convjit bench: {} lists no shapes\n", opt.shapes_path);
    return cli::kExitUsage;
  }
  std::string command = "convjit bench";
  for (std::string_view a : args) command += " " + std::string(a);
  if (opt.on_gpu()) return gpu::run_gpu_bench(opt, shapes, command, out, err);

  // With convjit capped at AVX2, so are the peers (oneDNN honours it before its first primitive).
  const char* isa = std::getenv("CONVJIT_ISA");
  opt.isa_cap = isa != nullptr && lower(isa) == "avx2" ? "avx2" : "";

  std::vector<std::unique_ptr<PeerLibrary>> peers;
  if (!opt.no_peers) {
    for (const std::string& path : installed_peer_libraries()) {
      std::string why;
      if (auto lib = PeerLibrary::load(path, &why)) {
        peers.push_back(std::move(lib));
      } else {
        fmt::print(err, "convjit bench: warning: peer {} not loaded: {}\n", path, why);
      }
    }
    for (const std::string& path : opt.peer_libs) {
      std::string why;
      auto lib = PeerLibrary::load(path, &why);
      if (!lib) {
        fmt::print(err, "convjit bench: cannot load peer library {}: {}\n", path, why);
        return cli::kExitUsage;
      }
      peers.push_back(std::move(lib));
    }
  }
  std::vector<std::string> peer_columns;
  for (const auto& lib : peers) {
    peer_columns.push_back(lib->name() + "/tf");
    peer_columns.push_back(lib->name() + "/best");
  }

  // The peak at each thread count, measured before any kernel runs: turbo clocks depend on how
  // many cores are busy.
  std::map<int, MachinePeak> peaks;
  for (int threads : opt.threads) peaks[threads] = measure_machine_peak(threads);
  std::string host = "measured peak per core:";
  for (const auto& [threads, p] : peaks) {
    host += fmt::format(" {}T {:.1f} GFLOP/s f32, {:.1f} bf16", threads, p.f32_per_core,
                        p.bf16_per_core);
    if (p.amx_bf16_per_core > 0) host += fmt::format(", {:.1f} bf16 AMX", p.amx_bf16_per_core);
    host += ";";
  }
  host += fmt::format(
      " {}; peers: {}", peaks.begin()->second.how,
      peers.empty() ? std::string("none") : fmt::format("{}", fmt::join(peer_columns, ", ")));
  if (!opt.isa_cap.empty()) host += "; ISA capped at " + opt.isa_cap;

  std::size_t total = 0;
  for (const BenchShape& s : shapes) total += ops_for(s).size();
  total *= opt.dtypes.size() * opt.threads.size();
  if (opt.format == OutputFormat::kTable) {
    fmt::print(out, "(GFLOP/s; ratio = convjit / peer; {})\n", host);
    print_table_header(out, peer_columns);
  }
  Context ctx{opt, peers};
  std::vector<Record> records;
  bool all_ok = true;
  std::size_t done = 0;
  for (DType dtype : opt.dtypes) {
    for (int threads : opt.threads) {
      for (const BenchShape& shape : shapes) {
        for (BenchOp op : ops_for(shape)) {
          fmt::print(err, "[{}/{}] {} {} {} {}T...\n", ++done, total, shape.name,
                     bench_op_name(shape, op), short_dtype_name(dtype), threads);
          err.flush();
          std::vector<Record> group;
          try {
            group = bench_case(shape, op, dtype, threads, ctx);
            const MachinePeak& peak = peaks[threads];
            const double per_core = peak_for_kernel(peak, dtype, group[0].kernel);
            if (per_core > 0) group[0].peak_percent = 100 * group[0].gflops / (per_core * threads);
            all_ok = all_ok && group[0].check.starts_with("ok");
          } catch (const std::exception& e) {
            Record failed;
            failed.shape = shape.name;
            failed.op = bench_op_name(shape, op);
            failed.dtype = std::string(short_dtype_name(dtype));
            failed.threads = threads;
            failed.impl = "convjit";
            failed.flops = shape.flops();
            failed.note = e.what();
            group = {failed};
            all_ok = false;
          }
          if (opt.format == OutputFormat::kTable) {
            print_table_row(out, group, peer_columns);
            out.flush();
          }
          records.insert(records.end(), group.begin(), group.end());
        }
      }
    }
  }

  return finish_report(
      out, err, opt.format, opt.markdown_path, records, peer_columns, /*gpu_columns=*/false, host,
      command,
      [&](std::ostream& md, const std::string& note) {
        print_markdown(md, records, peer_columns, note);
      },
      all_ok);
}

}  // namespace convjit::bench
