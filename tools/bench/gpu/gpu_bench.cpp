// The GPU benchmark: per case, convjit's kernel and cuDNN's search winner on the same device
// tensors (cuDNN's filter in its KRSC layout and, for asymmetric SAME padding, x with the odd
// row/column added: both prepared once, untimed, see gpu_layouts.hpp), convjit checked
// against cuDNN, then both timed in alternating blocks with CUDA events on one stream.
#include "tools/bench/gpu/gpu_bench.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>

#include "convjit/convjit.hpp"
#include "tools/bench/bench_report.hpp"
#include "tools/bench/bench_tensor.hpp"
#include "tools/bench/gpu/cuda_driver.hpp"
#include "tools/bench/gpu/cudnn_conv.hpp"
#include "tools/bench/gpu/gpu_layouts.hpp"
#include "tools/bench/gpu/gpu_peak.hpp"
#include "tools/bench/gpu/gpu_report.hpp"
#include "tools/cli_args.hpp"

namespace convjit::bench::gpu {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

CudnnDType cudnn_dtype(DType d) {
  switch (d) {
    case DType::kHalf:
      return CudnnDType::kHalf;
    case DType::kBFloat16:
      return CudnnDType::kBFloat16;
    case DType::kFloat64:
      return CudnnDType::kFloat64;
    case DType::kFloat32:
      break;
  }
  return CudnnDType::kFloat32;
}

PeakMath peak_math(DType d, GpuMath math) {
  switch (d) {
    case DType::kHalf:
      return PeakMath::kF16;
    case DType::kBFloat16:
      return PeakMath::kBF16;
    case DType::kFloat64:
      return PeakMath::kF64;
    case DType::kFloat32:
      break;
  }
  return math == GpuMath::kTf32 ? PeakMath::kTf32 : PeakMath::kF32;
}

// Largest relative error allowed against cuDNN: both accumulate in f32 (f64) but in different
// orders and, for cuDNN, sometimes through FFT or Winograd transforms.
double tolerance(DType d, GpuMath math) {
  switch (d) {
    case DType::kHalf:
    case DType::kBFloat16:
      return 2e-2;
    case DType::kFloat64:
      return 1e-9;
    case DType::kFloat32:
      break;
  }
  return math == GpuMath::kTf32 ? 1e-2 : 1e-3;
}

struct Suite {
  const BenchOptions& options;
  CudaDriver& driver;
  Cudnn* cudnn;  // null with --no-peers
  std::mt19937 rng{2024};
};

// One case: convjit's record first, then cuDNN's (when it ran or says why not).
std::vector<Record> bench_case(const BenchShape& shape, BenchOp op, DType dtype, Suite& suite) {
  CudaDriver& drv = suite.driver;
  const BenchOptions& opt = suite.options;
  Record base;
  base.shape = shape.name;
  base.op = bench_op_name(shape, op);
  base.dtype = std::string(short_dtype_name(dtype));
  if (dtype == DType::kFloat32 && opt.gpu_math == GpuMath::kTf32) base.dtype += "-tf32";
  base.flops = shape.flops();
  Record self = base;
  self.impl = "convjit";

  const bool data_grad = op == BenchOp::kBackpropData;
  const int e = dtype_size(dtype);
  BenchTensor x(dtype, {shape.n, shape.h, shape.w, shape.ic});
  BenchTensor w(dtype, {shape.kh, shape.kw, shape.ic, shape.m});
  BenchTensor y(dtype, {shape.n, shape.out_h(), shape.out_w(), shape.oc()});
  (data_grad ? w : x).fill_random(suite.rng);
  y.fill_random(suite.rng);
  BenchTensor& result_shape = data_grad ? x : w;
  const auto bytes = [e](const BenchTensor& t) {
    return static_cast<std::size_t>(t.elements()) * e;
  };

  // convjit: three cold compiles (the median is the compile time), then the cached kernel.
  const OpDescriptor desc = make_descriptor(shape, op, dtype);
  CompileOptions fresh;
  fresh.device = opt.device;
  fresh.always_compile = true;
  fresh.math_mode = opt.gpu_math == GpuMath::kTf32 ? MathMode::kTF32 : MathMode::kExact;
  std::vector<double> compile_ms;
  Kernel kernel;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    kernel = compile(desc, fresh);
    compile_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  self.setup_ms = median(compile_ms);
  self.kernel = kernel.name();
  self.workspace_bytes = kernel.workspace_bytes();

  DeviceMemory d_x(drv, bytes(x)), d_w(drv, bytes(w)), d_y(drv, bytes(y));
  DeviceMemory d_mine(drv, bytes(result_shape));
  DeviceMemory d_work(drv, std::max<std::size_t>(self.workspace_bytes, 16));
  drv.copy_to_device(d_y.data(), y.data(), bytes(y));
  drv.copy_to_device(data_grad ? d_w.data() : d_x.data(), data_grad ? w.data() : x.data(),
                     bytes(data_grad ? w : x));
  const RunContext context{drv.stream(), d_work.data(), d_work.bytes()};
  const auto view = [&](const DeviceMemory& m, const BenchTensor& t) {
    return TensorView{dtype, t.shape(), m.data()};
  };
  auto run_convjit = [&] {
    kernel.run(data_grad ? view(d_w, w) : view(d_x, x), view(d_y, y), view(d_mine, result_shape),
               context);
  };

  // cuDNN on its own copies of x (padded for asymmetric SAME) and the filter (KRSC).
  Record peer = base;
  peer.layouts = "best";
  std::unique_ptr<CudnnConv> conv;
  std::unique_ptr<DeviceMemory> c_x, c_w, c_work;
  if (suite.cudnn != nullptr) {
    peer.impl = suite.cudnn->name();
    try {
      const std::int64_t ph = shape.h + extra_rows(shape), pw = shape.w + extra_cols(shape);
      const std::size_t x_bytes = static_cast<std::size_t>(shape.n * ph * pw * shape.ic) * e;
      c_x = std::make_unique<DeviceMemory>(drv, x_bytes);
      c_w = std::make_unique<DeviceMemory>(drv, bytes(w));
      if (data_grad) {
        const std::vector<std::byte> krsc = hwio_to_krsc(shape, w.data(), e);
        drv.copy_to_device(c_w->data(), krsc.data(), krsc.size());
      } else {
        const std::vector<std::byte> padded = pad_x(shape, x.data(), e);
        drv.copy_to_device(c_x->data(), padded.data(), padded.size());
      }
      CudnnProblem p = cudnn_problem(shape, data_grad);
      p.dtype = cudnn_dtype(dtype);
      p.math = dtype == DType::kFloat32
                   ? (opt.gpu_math == GpuMath::kTf32 ? CudnnMath::kTf32 : CudnnMath::kExact)
                   : (dtype == DType::kFloat64 ? CudnnMath::kExact : CudnnMath::kTensorCore);
      {
        // The search may use the whole allowance; the winner keeps only what it needs.
        const std::size_t limit = std::min(opt.cudnn_workspace_bytes, drv.facts().free_bytes / 2);
        DeviceMemory search(drv, std::max<std::size_t>(limit, 16));
        conv = std::make_unique<CudnnConv>(*suite.cudnn, p, c_x->data(), c_w->data(), d_y.data(),
                                           search.data(), limit);
      }
      c_work =
          std::make_unique<DeviceMemory>(drv, std::max<std::size_t>(conv->workspace_bytes(), 16));
      peer.kernel = conv->algorithm();
      peer.setup_ms = conv->search_ms();
      peer.workspace_bytes = conv->workspace_bytes();
      // The search overwrote cuDNN's output buffer only; its inputs are as uploaded.
    } catch (const std::exception& ex) {
      peer.note = ex.what();
      conv.reset();
    }
  }
  auto run_cudnn = [&] { conv->run(c_work->data()); };

  // Check: convjit against cuDNN (in TensorFlow's layout), else against convjit's CPU kernel.
  run_convjit();
  BenchTensor mine(dtype, result_shape.shape());
  drv.copy_to_host(mine.data(), d_mine.data(), bytes(mine));
  BenchTensor theirs(dtype, result_shape.shape());
  std::string against;
  if (conv) {
    run_cudnn();
    if (data_grad) {
      std::vector<std::byte> padded(c_x->bytes());
      drv.copy_to_host(padded.data(), c_x->data(), padded.size());
      crop_x(shape, padded.data(), theirs.data(), e);
    } else {
      std::vector<std::byte> krsc(c_w->bytes());
      drv.copy_to_host(krsc.data(), c_w->data(), krsc.size());
      krsc_to_hwio(shape, krsc.data(), theirs.data(), e);
    }
    against = peer.column();
  } else {
    Kernel cpu = compile(desc);
    cpu.run(data_grad ? w.view() : x.view(), y.view(), theirs.view());
    against = "convjit cpu";
  }
  self.max_rel_error = relative_error(mine, theirs);
  self.check =
      self.max_rel_error <= tolerance(dtype, opt.gpu_math)
          ? fmt::format("ok vs {}", against)
          : fmt::format("MISMATCH vs {} (max rel error {:.2e})", against, self.max_rel_error);

  // Warm up, then alternate blocks of back-to-back calls, each block timed by two events.
  for (int i = 0; i < 3; ++i) {
    run_convjit();
    if (conv) run_cudnn();
  }
  drv.synchronize();
  const double mine_ms = std::max(1e-4, drv.time_calls(3, run_convjit));
  const double theirs_ms = conv ? std::max(1e-4, drv.time_calls(3, run_cudnn)) : 0;
  constexpr int kBlocks = 10;
  const double per_block = opt.min_time_ms / kBlocks;
  const int mine_calls = std::clamp(static_cast<int>(per_block / mine_ms), 1, 1000);
  const int theirs_calls = conv ? std::clamp(static_cast<int>(per_block / theirs_ms), 1, 1000) : 0;
  std::vector<double> t_mine, t_theirs;
  for (int b = 0; b < kBlocks; ++b) {
    t_mine.push_back(drv.time_calls(mine_calls, run_convjit));
    if (conv) t_theirs.push_back(drv.time_calls(theirs_calls, run_cudnn));
  }

  const double tensor_bytes = static_cast<double>(bytes(x) + bytes(w) + bytes(y));
  const DeviceFacts& f = drv.facts();
  const auto finish = [&](Record& r, const std::vector<double>& times) {
    r.ms = median(times);
    r.gflops = r.flops * 1e-9 / (r.ms * 1e-3);
    r.gbps = tensor_bytes * 1e-9 / (r.ms * 1e-3);
    if (shape.depthwise) {
      r.peak_of = "dram";
      if (f.memory_gbps > 0) r.peak_percent = 100 * r.gbps / f.memory_gbps;
    } else {
      const PeakMath m = peak_math(dtype, opt.gpu_math);
      r.peak_of = m == PeakMath::kF32 ? "ffma" : "tensor cores";
      const double peak = peak_tflops(f.sm_major, f.sm_minor, f.sm_count, f.clock_mhz, m);
      if (peak > 0) r.peak_percent = 100 * (r.gflops * 1e-3) / peak;
    }
  };
  finish(self, t_mine);
  std::vector<Record> records{self};
  if (conv) {
    finish(peer, t_theirs);
    records.push_back(peer);
  } else if (suite.cudnn != nullptr) {
    records.push_back(peer);
  }
  return records;
}

}  // namespace

int run_gpu_bench(const BenchOptions& opt, const std::vector<BenchShape>& shapes,
                  const std::string& command, std::ostream& out, std::ostream& err) {
  std::unique_ptr<CudaDriver> driver;
  try {
    driver = std::make_unique<CudaDriver>(opt.cuda_ordinal);
  } catch (const std::exception& ex) {
    fmt::print(err, "convjit bench: {}\n", ex.what());
    return cli::kExitFailure;
  }
  std::unique_ptr<Cudnn> cudnn;
  if (!opt.no_peers) {
    try {
      cudnn = std::make_unique<Cudnn>(driver->stream());
    } catch (const std::exception& ex) {
      fmt::print(err, "convjit bench: {}\n", ex.what());
      return cli::kExitFailure;
    }
  }
  const DeviceFacts& f = driver->facts();
  std::string host = fmt::format(
      "{} (cuda:{}, sm_{}{}, {} SMs, {:.0f} MHz max clock, {:.0f} GB/s DRAM); peak table {}; "
      "peer: {}",
      f.name, f.ordinal, f.sm_major, f.sm_minor, f.sm_count, f.clock_mhz, f.memory_gbps,
      describe_peak_table(f.sm_major, f.sm_minor),
      cudnn ? cudnn->name() + " (fastest of cudnnFind*AlgorithmEx, NHWC, KRSC filter)"
            : "none (checked against convjit's CPU kernel)");
  if (opt.gpu_math == GpuMath::kTf32) host += "; f32 as TF32 on both sides";
  const std::string peer_column = cudnn ? cudnn->name() + "/best" : "";

  std::size_t total = 0;
  for (const BenchShape& s : shapes) total += ops_for(s).size();
  total *= opt.dtypes.size();
  if (opt.format == OutputFormat::kTable) {
    fmt::print(out, "({})\n", host);
    print_gpu_table_header(out, peer_column);
  }
  Suite suite{opt, *driver, cudnn.get()};
  std::vector<Record> records;
  bool all_ok = true;
  std::size_t done = 0;
  for (DType dtype : opt.dtypes) {
    for (const BenchShape& shape : shapes) {
      for (BenchOp op : ops_for(shape)) {
        fmt::print(err, "[{}/{}] {} {} {}...\n", ++done, total, shape.name,
                   bench_op_name(shape, op), short_dtype_name(dtype));
        err.flush();
        std::vector<Record> group;
        try {
          group = bench_case(shape, op, dtype, suite);
          all_ok = all_ok && group[0].check.starts_with("ok");
        } catch (const std::exception& ex) {
          Record failed;
          failed.shape = shape.name;
          failed.op = bench_op_name(shape, op);
          failed.dtype = std::string(short_dtype_name(dtype));
          failed.impl = "convjit";
          failed.flops = shape.flops();
          failed.note = ex.what();
          group = {failed};
          all_ok = false;
        }
        if (opt.format == OutputFormat::kTable) {
          print_gpu_table_row(out, group, peer_column);
          out.flush();
        }
        records.insert(records.end(), group.begin(), group.end());
      }
    }
  }
  const std::vector<std::string> peer_columns =
      peer_column.empty() ? std::vector<std::string>{} : std::vector<std::string>{peer_column};
  return finish_report(
      out, err, opt.format, opt.markdown_path, records, peer_columns, /*gpu_columns=*/true, host,
      command,
      [&](std::ostream& md, const std::string& note) {
        print_gpu_markdown(md, records, peer_column, note);
      },
      all_ok);
}

}  // namespace convjit::bench::gpu
