// The disk cache in the compile path with the x86 backend: a miss generates and stores code
// plus its load info; a hit maps the stored code without generating anything, and that kernel
// computes what the generated one did; entries whose bytes were tampered with, or whose load
// info the backend refuses, are never executed: they are compiled again.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "codegen/x86/x86_backend.hpp"
#include "frontend/hash.hpp"
#include "frontend/validate.hpp"
#include "codegen/cpu/cpu_pipeline.hpp"
#include "reference/naive.hpp"
#include "runtime/disk_cache/disk_cache.hpp"
#include "runtime/disk_cache/disk_tier.hpp"
#include "runtime/kernel_cache.hpp"
#include "support/test_tensors.hpp"

namespace convjit::runtime {
namespace {

namespace fs = std::filesystem;
using convjit::testing::TestTensor;

OpDescriptor descriptor() {
  OpDescriptor d;
  d.op = OpKind::kConv2DBackpropInput;
  d.dtype = DType::kFloat32;
  d.input = {2, 12, 12, 8};
  d.filter = {3, 3, 8, 16};
  d.out_backprop = {2, 6, 6, 16};
  d.strides = {1, 2, 2, 1};
  d.padding = Padding::kSame;
  return d;
}

class DiskCacheLoadTest : public ::testing::Test {
 public:
  void SetUp() override {
    target_ = cpu::CpuInfo::host(cpu::Isa::kAvx512);
    if (target_.isa == cpu::Isa::kGeneric) GTEST_SKIP() << "the x86 backend needs AVX2";
    std::string pattern = (fs::temp_directory_path() / "convjit-load-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    auto opened = disk_cache::DiskCache::open(root_ / "cache");
    ASSERT_TRUE(opened.has_value()) << opened.status().message();
    cache_ = std::move(*opened);
    desc_ = descriptor();
    Expected<ConvProblem> p = validate(desc_);
    ASSERT_TRUE(p.has_value()) << p.status().to_string();
    problem_ = *p;
    backend_ = codegen::make_x86_backend(target_);
    key_ = make_cache_key(problem_, *backend_, codegen::PlanOptions{});
  }
  void TearDown() override {
    cache_.reset();  // its writer thread finishes before the directory goes
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // One trip through the disk tier; `builds` counts code generations.
  KernelCache::Entry get(bool* disk_hit) {
    auto build = [this](BuildRecord*) -> Expected<KernelCache::Entry> {
      ++builds_;
      auto code = codegen::x86::emit_nest(cpu::lower_and_schedule(problem_, target_, 1), target_);
      if (!code) return code.status();
      auto kernel = std::make_shared<CompiledKernel>();
      kernel->problem = problem_;
      kernel->backend = std::string(backend_->name());
      kernel->name = (*code)->name();
      kernel->code = std::shared_ptr<const codegen::CompiledCode>(std::move(*code));
      return KernelCache::Entry(std::move(kernel));
    };
    Expected<KernelCache::Entry> got = compile_through_disk_cache(
        cache_.get(), key_, desc_, problem_, *backend_, 1, build, disk_hit);
    EXPECT_TRUE(got.has_value()) << got.status().to_string();
    return got ? *got : nullptr;
  }

  // The kernel's result on fixed inputs (checked against the naive reference).
  TestTensor run(const CompiledKernel& kernel) {
    const ConvProblem& p = problem_;
    TestTensor w = convjit::testing::random_tensor(p.dtype, shape(TensorRole::kW), 3);
    TestTensor y = convjit::testing::random_tensor(p.dtype, shape(TensorRole::kY), 4);
    TestTensor x(p.dtype, shape(TensorRole::kX));
    TestTensor ref = x;
    x.fill(std::numeric_limits<double>::quiet_NaN());
    EXPECT_TRUE(kernel.code->run({x.data(), w.data(), y.data()}, codegen::RunContext{}).is_ok());
    run_reference(p, {ref.data(), w.data(), y.data()});
    EXPECT_TRUE(convjit::testing::all_close(
        x.view(), ref.view(),
        convjit::testing::tolerance(p.dtype, convjit::testing::reduction_length(p))));
    return x;
  }

  std::vector<double> values(const KernelCache::Entry& kernel) { return run(*kernel).to_doubles(); }

  fs::path artifact(const char* name) {
    const std::string prefix = hash128(key_).hex() + "-";
    for (const auto& f : fs::directory_iterator(root_ / "cache")) {
      const std::string file = f.path().filename().string();
      if (file.starts_with(prefix) && file.ends_with(std::string(".") + name)) return f.path();
    }
    return {};
  }

  std::vector<std::int64_t> shape(TensorRole role) const {
    const auto s = problem_.shape(role);
    return {s.begin(), s.end()};
  }

  cpu::CpuInfo target_;
  fs::path root_;
  std::unique_ptr<disk_cache::DiskCache> cache_;
  OpDescriptor desc_;
  ConvProblem problem_;
  std::unique_ptr<codegen::Backend> backend_;
  std::string key_;
  int builds_ = 0;
};

TEST_F(DiskCacheLoadTest, HitLoadsStoredCodeWithoutGenerating) {
  bool hit = true;
  KernelCache::Entry cold = get(&hit);
  ASSERT_TRUE(cold);
  EXPECT_FALSE(hit);
  EXPECT_EQ(builds_, 1);
  EXPECT_FALSE(artifact(disk_cache::kLoadInfoArtifact).empty()) << "load info not stored";

  KernelCache::Entry warm = get(&hit);
  ASSERT_TRUE(warm);
  EXPECT_TRUE(hit);
  EXPECT_EQ(builds_, 1) << "a disk hit generated code";
  EXPECT_EQ(warm->name, cold->name);
  EXPECT_EQ(warm->backend, "x86");
  EXPECT_NE(warm->code->code_bytes().data(), cold->code->code_bytes().data());
  ASSERT_EQ(warm->code->code_bytes().size(), cold->code->code_bytes().size());
  EXPECT_EQ(std::memcmp(warm->code->code_bytes().data(), cold->code->code_bytes().data(),
                        cold->code->code_bytes().size()),
            0);
  EXPECT_EQ(values(warm), values(cold));
  // The hit is counted by the cache's writer thread; destroying the cache writes it.
  cache_.reset();
  auto reopened = disk_cache::DiskCache::open(root_ / "cache");
  ASSERT_TRUE(reopened.has_value());
  EXPECT_EQ((*reopened)->lookup(key_)->meta.hits, 1u);
}

// Flips bytes of a stored artifact in place; the next lookup must drop the entry and compile.
void flip(const fs::path& file, std::size_t at) {
  ASSERT_FALSE(file.empty());
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 0x5a));
}

TEST_F(DiskCacheLoadTest, TamperedCodeIsNeverRun) {
  bool hit = false;
  KernelCache::Entry cold = get(&hit);
  ASSERT_TRUE(cold);
  flip(artifact(disk_cache::kCodeArtifact), 16);
  ::testing::internal::CaptureStderr();
  KernelCache::Entry again = get(&hit);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(hit);
  EXPECT_EQ(builds_, 2);
  EXPECT_NE(warning.find("fails its checksum"), std::string::npos) << warning;
  EXPECT_EQ(values(again), values(cold));
  // Rebuilt and stored again: the next process gets a clean hit.
  get(&hit);
  EXPECT_TRUE(hit);
  EXPECT_EQ(builds_, 2);
}

TEST_F(DiskCacheLoadTest, TamperedLoadInfoIsNeverUsed) {
  bool hit = false;
  KernelCache::Entry cold = get(&hit);
  ASSERT_TRUE(cold);
  flip(artifact(disk_cache::kLoadInfoArtifact), 30);
  ::testing::internal::CaptureStderr();
  KernelCache::Entry again = get(&hit);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(hit);
  EXPECT_EQ(builds_, 2);
  EXPECT_NE(warning.find("fails its checksum"), std::string::npos) << warning;
  EXPECT_EQ(values(again), values(cold));
}

// An intact entry (checksums recomputed) whose load info names another target: the backend
// refuses it, the entry is compiled again and replaced.
TEST_F(DiskCacheLoadTest, LoadInfoForAnotherTargetIsRefused) {
  bool hit = false;
  KernelCache::Entry cold = get(&hit);
  ASSERT_TRUE(cold);
  std::optional<disk_cache::Entry> stored = cache_->lookup(key_);
  ASSERT_TRUE(stored.has_value());
  std::vector<std::uint8_t>& info = stored->artifacts[disk_cache::kLoadInfoArtifact];
  std::string text(info.begin(), info.end());
  const std::size_t at = text.find("\nisa ");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, text.find('\n', at + 1) - at, "\nisa other");
  info.assign(text.begin(), text.end());
  ASSERT_TRUE(cache_->import(*stored).is_ok());

  ::testing::internal::CaptureStderr();
  KernelCache::Entry again = get(&hit);
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(hit);
  EXPECT_EQ(builds_, 2);
  EXPECT_NE(warning.find("is for other"), std::string::npos) << warning;
  EXPECT_EQ(values(again), values(cold));
  get(&hit);
  EXPECT_TRUE(hit) << "the refused entry was not replaced";
  EXPECT_EQ(builds_, 2);
}

}  // namespace
}  // namespace convjit::runtime
