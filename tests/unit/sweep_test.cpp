// Sweeps: every compiled kernel against the naive reference over op x dtype x layout x padding
// mode x strides x dilations x odd sizes x groups x depth multipliers, plus empty tensors.
//
// The full cross product is far too large, so the case list is: every (op, dtype, layout,
// padding) cell, twice, with the remaining attributes picked greedily (from a fixed seed) to
// cover every pair of attribute values; then the empty-tensor cases for every op. The list is
// deterministic, and a test below checks its coverage claims.
//
// Backends are a test parameter: a name the runtime does not know fails (compile throws); it is
// never skipped. Each parameter also names a CONVJIT_ISA cap ("" = the host's full ISA).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "convjit/convjit.hpp"
#include "support/sweep_cases.hpp"
#include "support/test_conv_cases.hpp"
#include "support/test_tensors.hpp"

namespace convjit {
namespace {

using testing::ConvCase;
using testing::TestTensor;

/// Which backend must compile the (non-empty) cases of a sweep target.
enum class Compiler {
  kRequested,    // the backend asked for, every case: a fallback is a failure
  kInterpreter,  // the runtime's fallback, every case: the backend cannot serve this target
};

/// One compiled-backend configuration the sweep runs under.
struct SweepTarget {
  std::string backend;
  /// Value for CONVJIT_ISA while compiling and running ("" leaves the environment alone).
  std::string isa;
  Compiler compiler = Compiler::kRequested;
};

void PrintTo(const SweepTarget& target, std::ostream* os) {
  *os << target.backend << (target.isa.empty() ? "" : " isa=") << target.isa;
}

// Adding a backend or an ISA cap is one line here, e.g. {"x86", ""}, {"x86", "avx2"}.
const SweepTarget kSweepTargets[] = {
    {"interpreter", ""},
    {"x86", ""},
    {"x86", "avx2"},
    // The x86 backend needs AVX2 and FMA and refuses a generic target: every case must reach
    // the interpreter through the runtime's fallback, and still be right.
    {"x86", "generic", Compiler::kInterpreter},
};

/// Whether the x86 backend can run on this host at all (it refuses hosts without AVX2+FMA).
bool host_runs_x86() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

using testing::CaseCode;
using testing::covering_codes;
using testing::kCasesPerCell;
using testing::kNumAttrs;
using testing::SweepCase;
using testing::sweep_cases;
constexpr auto& kOps = testing::kSweepOps;
constexpr auto& kDTypes = testing::kSweepDTypes;
constexpr auto& kFormats = testing::kSweepFormats;
constexpr auto& kPaddings = testing::kSweepPaddings;
constexpr auto& kLevels = testing::kSweepLevels;

/// convjit reads CONVJIT_ISA once per process, so an ISA cap runs the sweep in a fresh copy of
/// this test binary with the variable set, filtered to the current test. Returns the child's
/// exit status and its output.
std::pair<int, std::string> run_in_child_with_isa(const std::string& isa) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter = fmt::format("{}.{}", info->test_suite_name(), info->name());
  const std::string command =
      fmt::format("CONVJIT_ISA='{}' /proc/{}/exe --gtest_filter='{}' --gtest_brief=1 2>&1", isa,
                  ::getpid(), filter);
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "could not start " + command};
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

/// Runs one case; returns an empty string on success, else what went wrong.
std::string run_case(const SweepCase& s, const SweepTarget& target, std::uint64_t seed,
                     bool* has_code, bool* fell_back) {
  const ConvCase& c = s.geometry;
  const OpDescriptor desc = c.descriptor(s.op);
  const auto shapes = c.operand_shapes(s.op);
  const TestTensor a = testing::random_tensor(c.dtype, shapes[0], seed);
  const TestTensor b = testing::random_tensor(c.dtype, shapes[1], seed + 1);
  TestTensor got(c.dtype, shapes[2]);
  got.fill(std::numeric_limits<double>::quiet_NaN());  // unwritten elements cannot pass
  TestTensor want(c.dtype, shapes[2]);

  CompileOptions options;
  options.backend = target.backend;
  // Alternate serial and threaded runs: split reductions and their partial sums get exercised.
  options.num_threads = (seed / 7) % 2 == 0 ? 1 : 3;
  try {
    const Kernel kernel = compile(desc, options);
    // A problem with an empty operand (some VALID windows leave none) needs no code at all.
    *has_code = kernel.name() != "zero_fill";
    *fell_back = kernel.backend().rfind(target.backend, 0) != 0;
    kernel.run(a.view(), b.view(), got.view());
    run_reference(desc, a.view(), b.view(), want.view());
  } catch (const Error& e) {
    return fmt::format("convjit::Error (kind {}): {}", static_cast<int>(e.kind()), e.what());
  }
  const ::testing::AssertionResult close = testing::all_close(
      got.view(), want.view(), testing::tolerance(c.dtype, c.reduction_length(s.op)));
  if (close) return {};
  return close.message();
}

class Sweep : public ::testing::TestWithParam<SweepTarget> {};

TEST_P(Sweep, MatchesReference) {
  const SweepTarget& target = GetParam();
  const char* process_isa = std::getenv("CONVJIT_ISA");
  if (!target.isa.empty() && (process_isa == nullptr || target.isa != process_isa)) {
    const auto [status, output] = run_in_child_with_isa(target.isa);
    EXPECT_EQ(status, 0) << "sweep under CONVJIT_ISA=" << target.isa << ":\n" << output;
    const std::size_t summary = output.find("[   SWEEP  ]");
    if (status == 0 && summary != std::string::npos) {
      std::printf("%s\n", output.substr(summary, output.find('\n', summary) - summary).c_str());
    }
    return;
  }
  const std::vector<SweepCase> cases = sweep_cases();
  Compiler compiler = target.compiler;
  if (target.backend == "x86" && !host_runs_x86()) compiler = Compiler::kInterpreter;
  int failures = 0;
  int fallbacks = 0;
  int wrong_compiler = 0;
  int compiled = 0;  // cases that needed code (empty problems need none)
  constexpr int kReported = 10;  // keep a broken backend's output readable
  std::uint64_t seed = 1000;
  for (const SweepCase& s : cases) {
    bool has_code = false;
    bool fell_back = false;
    const std::string problem = run_case(s, target, seed += 7, &has_code, &fell_back);
    fallbacks += fell_back ? 1 : 0;
    if (has_code) {
      ++compiled;
      if (fell_back != (compiler == Compiler::kInterpreter) && ++wrong_compiler <= kReported) {
        ADD_FAILURE() << to_text(s.geometry.descriptor(s.op)) << "\n  "
                      << (fell_back ? "fell back to another backend (CONVJIT_VERBOSE=1 says why)"
                                    : "compiled by the backend although it should refuse it");
      }
    }
    if (problem.empty()) continue;
    if (++failures <= kReported) {
      ADD_FAILURE() << to_text(s.geometry.descriptor(s.op)) << "\n  " << problem;
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " sweep cases failed";
  EXPECT_EQ(fallbacks, compiler == Compiler::kInterpreter ? compiled : 0)
      << "cases compiled by another backend than '" << target.backend << "'";
  EXPECT_GT(compiled, 0);
  RecordProperty("cases", static_cast<int>(cases.size()));
  RecordProperty("fallbacks", fallbacks);
  std::printf("[   SWEEP  ] %s%s: %zu cases, %d failed, %d compiled by another backend\n",
              target.backend.c_str(), target.isa.empty() ? "" : (" isa=" + target.isa).c_str(),
              cases.size(), failures, fallbacks);
}

INSTANTIATE_TEST_SUITE_P(Backends, Sweep, ::testing::ValuesIn(kSweepTargets),
                         [](const ::testing::TestParamInfo<SweepTarget>& info) {
                           std::string name = info.param.backend;
                           if (!info.param.isa.empty()) name += "_" + info.param.isa;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

/// The case list keeps its promises: every primary cell, every pair of attribute values, every
/// value several times, valid sizes, and empty cases for every op.
TEST(SweepCases, CoverageIsAsClaimed) {
  const std::vector<CaseCode> codes = covering_codes(kCasesPerCell);
  constexpr int kAll = 4 + kNumAttrs;
  std::array<int, kAll> levels{};
  levels[0] = static_cast<int>(std::size(kOps));
  levels[1] = static_cast<int>(std::size(kDTypes));
  levels[2] = static_cast<int>(std::size(kFormats));
  levels[3] = static_cast<int>(std::size(kPaddings));
  for (int i = 0; i < kNumAttrs; ++i) levels[4 + i] = kLevels[i];

  std::set<std::array<int, 4>> pairs;
  std::map<std::pair<int, int>, int> singles;
  for (const CaseCode& code : codes) {
    const auto a = code.all();
    for (int i = 0; i < kAll; ++i) {
      ++singles[{i, a[i]}];
      for (int j = i + 1; j < kAll; ++j) pairs.insert({i, a[i], j, a[j]});
    }
  }
  for (int i = 0; i < kAll; ++i) {
    for (int v = 0; v < levels[i]; ++v) {
      EXPECT_GE((singles[{i, v}]), 3) << "attribute " << i << " value " << v;
      for (int j = i + 1; j < kAll; ++j)
        for (int u = 0; u < levels[j]; ++u)
          EXPECT_TRUE(pairs.count({i, v, j, u}))
              << "pair " << i << "=" << v << ", " << j << "=" << u;
    }
  }
  const std::vector<SweepCase> cases = sweep_cases();
  std::map<OpKind, int> empty_per_op;
  std::set<std::int64_t> strides, dilations, multipliers, groups;
  for (const SweepCase& s : cases) {
    const ConvCase& c = s.geometry;
    EXPECT_GE(c.out_h(), 0);
    EXPECT_GE(c.out_w(), 0);
    if (s.empty) {
      ++empty_per_op[s.op];
      EXPECT_TRUE(testing::element_count(c.input_shape()) == 0 ||
                  testing::element_count(c.filter_shape()) == 0 ||
                  testing::element_count(c.output_shape()) == 0);
      continue;
    }
    strides.insert(c.stride_h);
    strides.insert(c.stride_w);
    dilations.insert(c.dilation_h);
    dilations.insert(c.dilation_w);
    (c.depthwise ? multipliers : groups).insert(c.depthwise ? c.filter_out : c.groups());
  }
  EXPECT_EQ(strides, (std::set<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(dilations, (std::set<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(multipliers, (std::set<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(groups, (std::set<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(empty_per_op.size(), std::size(kOps));
}

}  // namespace
}  // namespace convjit
