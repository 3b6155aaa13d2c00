// `convjit cache verify --run`: one stored kernel run on random data against the naive reference.
#include "tools/cache_entry_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include <fmt/format.h>

#include "convjit/convjit.hpp"
#include "convjit/numeric.hpp"
#include "tools/cuda_entry_view.hpp"

namespace convjit::cli {
namespace {

// Values on a 1/64 grid are exact in every dtype, so only the kernel's summation order differs
// from the reference's.
void fill_random(Tensor& t, std::mt19937& rng) {
  std::uniform_int_distribution<int> grid(-64, 64);
  for (std::int64_t i = 0; i < t.elements(); ++i) {
    float v = static_cast<float>(grid(rng)) / 64.0f;
    switch (t.dtype()) {
      case DType::kFloat32: t.data_as<float>()[i] = v; break;
      case DType::kFloat64: t.data_as<double>()[i] = v; break;
      case DType::kHalf: t.data_as<std::uint16_t>()[i] = float_to_half(v); break;
      case DType::kBFloat16: {
        std::uint32_t bits;
        std::memcpy(&bits, &v, 4);
        t.data_as<std::uint16_t>()[i] = static_cast<std::uint16_t>(bits >> 16);
        break;
      }
    }
  }
}

double element(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data_as<float>()[i];
    case DType::kFloat64: return t.data_as<double>()[i];
    case DType::kHalf: return half_to_float(t.data_as<std::uint16_t>()[i]);
    case DType::kBFloat16: {
      std::uint32_t bits = static_cast<std::uint32_t>(t.data_as<std::uint16_t>()[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
  }
  return 0;
}

}  // namespace

std::string run_entry_against_reference(const disk_cache::EntryMeta& m, const std::string& threads) {
  try {
    OpDescriptor desc = parse_descriptor(m.descriptor);
    CompileOptions options;
    options.backend = m.backend;
    options.device = device_for_entry(m.backend, m.isa);
    if (!threads.empty()) options.num_threads = std::stoi(threads);
    Kernel kernel = compile(desc, options);
    std::mt19937 rng(1234);
    Tensor a(desc.dtype, kernel.operand_shape(0)), b(desc.dtype, kernel.operand_shape(1));
    Tensor out(desc.dtype, kernel.operand_shape(2)), expected(desc.dtype, kernel.operand_shape(2));
    fill_random(a, rng);
    fill_random(b, rng);
    if (kernel.device().rfind("cuda:", 0) == 0) {
      // A GPU kernel runs on device copies of the operands.
      DeviceBuffer da(kernel.device(), a.bytes()), db(kernel.device(), b.bytes());
      DeviceBuffer dout(kernel.device(), out.bytes());
      da.copy_from_host(a.data(), a.bytes());
      db.copy_from_host(b.data(), b.bytes());
      kernel.run(TensorView{a.dtype(), a.shape(), da.data()},
                 TensorView{b.dtype(), b.shape(), db.data()},
                 TensorView{out.dtype(), out.shape(), dout.data()});
      synchronize(kernel.device());
      dout.copy_to_host(out.data(), out.bytes());
    } else {
      kernel.run(a.view(), b.view(), out.view());
    }
    run_reference(desc, a.view(), b.view(), expected.view());
    double max_ref = 0, max_err = 0;
    for (std::int64_t i = 0; i < out.elements(); ++i) {
      double r = element(expected, i), o = element(out, i);
      max_ref = std::max(max_ref, std::abs(r));
      max_err = std::max(max_err, std::isnan(o) ? INFINITY : std::abs(o - r));
    }
    double tol = desc.dtype == DType::kFloat64 ? 1e-10 : desc.dtype == DType::kFloat32 ? 1e-4
                 : desc.dtype == DType::kHalf ? 4e-3 : 2e-2;
    double limit = tol * std::max(1.0, max_ref);
    if (max_err > limit) return fmt::format("max error {:.3g} exceeds {:.3g}", max_err, limit);
    return "";
  } catch (const std::exception& e) {
    return fmt::format("cannot run: {}", e.what());
  }
}

}  // namespace convjit::cli
