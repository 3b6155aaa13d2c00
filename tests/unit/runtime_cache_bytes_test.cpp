// The memory cache's byte bound: cached kernels keep their code and their last scratch block,
// and hundreds of distinct kernels used to hold gigabytes (700 NCHW input gradients, 3.9 GB
// resident) because the cache and the descriptor memo counted kernels, not bytes. Past the
// bound, idle scratch goes first (least recently used kernels first), then whole kernels; an
// evicted kernel nobody holds is destroyed at once, the memo's reference included.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "convjit/convjit.hpp"
#include "runtime/descriptor_memo.hpp"
#include "runtime/env.hpp"
#include "runtime/kernel.hpp"
#include "runtime/kernel_cache.hpp"

namespace convjit::runtime {
namespace {

std::atomic<int> g_destroyed{0};

// Code of a given size keeping a given idle scratch block; counts its destructions.
class FakeCode final : public codegen::CompiledCode {
 public:
  FakeCode(std::size_t code, std::size_t scratch) : code_(code), scratch_(scratch) {}
  ~FakeCode() override { g_destroyed.fetch_add(1); }
  Status run(const OperandPointers&, const codegen::RunContext&) const override {
    idle_.store(scratch_);  // a run leaves its scratch block behind
    return Status::ok();
  }
  const std::string& name() const override { return name_; }
  std::size_t scratch_bytes() const override { return scratch_; }
  std::size_t resident_bytes() const override { return code_ + idle_.load(); }
  void release_idle_memory() const override { idle_.store(0); }
  std::size_t idle() const { return idle_.load(); }

 private:
  std::size_t code_, scratch_;
  mutable std::atomic<std::size_t> idle_{0};
  std::string name_ = "fake";
};

struct Made {
  KernelCache::Entry entry;
  const FakeCode* code;
};

Made make(std::size_t code_bytes, std::size_t scratch_bytes) {
  auto kernel = std::make_shared<CompiledKernel>();
  auto code = std::make_shared<FakeCode>(code_bytes, scratch_bytes);
  const FakeCode* raw = code.get();
  kernel->code = std::move(code);
  return {std::move(kernel), raw};
}

// Runs the kernel's code and tells the cache, as KernelImpl::run does.
void run(KernelCache& cache, const KernelCache::Entry& kernel) {
  ASSERT_TRUE(kernel->code->run({}, {}).ok());
  cache.note_run(*kernel);
}

constexpr std::size_t kKiB = 1024;

TEST(RuntimeCacheBytes, IdleScratchGoesFirstLeastRecentlyUsedFirst) {
  KernelCache cache(100, &hash128, 20 * kKiB);
  std::vector<Made> made;
  for (int i = 0; i < 4; ++i) {
    made.push_back(make(1 * kKiB, 4 * kKiB));
    cache.insert("k" + std::to_string(i), made.back().entry);
    run(cache, made.back().entry);
  }
  // 4 x (1 + 4) KiB = 20 KiB: within the bound, nothing released.
  EXPECT_EQ(cache.stats().resident_bytes, 20 * kKiB);
  EXPECT_EQ(cache.stats().idle_releases, 0u);
  // A fifth kernel's code and scratch push it over: k0's scratch (the oldest) goes.
  made.push_back(make(1 * kKiB, 4 * kKiB));
  cache.insert("k4", made.back().entry);
  run(cache, made.back().entry);
  const CacheStats stats = cache.stats();
  EXPECT_LE(stats.resident_bytes, 20 * kKiB);
  EXPECT_EQ(stats.size, 5u);  // no kernel had to go
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(made[0].code->idle(), 0u);
  EXPECT_EQ(made[4].code->idle(), 4 * kKiB);  // the kernel that just ran keeps its block
  // k0 runs again and gets a block again; that pushes the next oldest out instead.
  run(cache, made[0].entry);
  EXPECT_EQ(made[0].code->idle(), 4 * kKiB);
  EXPECT_LE(cache.stats().resident_bytes, 20 * kKiB);
}

TEST(RuntimeCacheBytes, CodeBeyondTheBoundEvictsAndFreesKernels) {
  g_destroyed = 0;
  KernelCache cache(1000, &hash128, 10 * kKiB);
  std::vector<std::weak_ptr<const CompiledKernel>> weak;
  for (int i = 0; i < 300; ++i) {
    Made m = make(1 * kKiB, 3 * kKiB);
    weak.push_back(m.entry);
    cache.insert("k" + std::to_string(i), m.entry);
    run(cache, m.entry);
  }
  const CacheStats stats = cache.stats();
  EXPECT_LE(stats.resident_bytes, 10 * kKiB);
  EXPECT_LE(stats.size, 10u);
  EXPECT_EQ(stats.evictions, 300u - stats.size);
  // Every kernel that left the cache was destroyed: nothing else held it.
  std::size_t alive = 0;
  for (const auto& w : weak) alive += w.expired() ? 0 : 1;
  EXPECT_EQ(alive, stats.size);
  EXPECT_EQ(g_destroyed.load(), static_cast<int>(300 - stats.size));
  EXPECT_FALSE(weak.back().expired());  // the newest stays
}

TEST(RuntimeCacheBytes, AKernelAloneOverTheBoundStaysUntilAnotherComes) {
  KernelCache cache(100, &hash128, 4 * kKiB);
  Made big = make(1 * kKiB, 64 * kKiB);
  cache.insert("big", big.entry);
  run(cache, big.entry);
  EXPECT_EQ(big.code->idle(), 64 * kKiB);  // spared: it just ran
  EXPECT_NE(cache.lookup("big"), nullptr);
  Made small = make(1 * kKiB, 1 * kKiB);
  cache.insert("small", small.entry);
  EXPECT_EQ(big.code->idle(), 0u);  // released first; its code still fits
  EXPECT_NE(cache.lookup("big"), nullptr);
  EXPECT_EQ(cache.stats().evictions, 0u);
}

TEST(RuntimeCacheBytes, LoweringTheBoundAppliesItAndCapacityStillCounts) {
  KernelCache cache(3, &hash128);
  std::vector<Made> made;
  for (int i = 0; i < 3; ++i) {
    made.push_back(make(2 * kKiB, 2 * kKiB));
    cache.insert("k" + std::to_string(i), made.back().entry);
    run(cache, made.back().entry);
  }
  EXPECT_EQ(cache.stats().byte_limit, kUnboundedBytes);
  EXPECT_EQ(cache.stats().resident_bytes, 12 * kKiB);
  cache.set_byte_limit(6 * kKiB);
  EXPECT_LE(cache.stats().resident_bytes, 6 * kKiB);
  EXPECT_EQ(cache.byte_limit(), 6 * kKiB);
  cache.set_byte_limit(kUnboundedBytes);
  cache.insert("k3", make(1, 0).entry);  // the count bound alone
  EXPECT_EQ(cache.stats().size, 3u);
}

TEST(RuntimeCacheBytes, KernelsOutsideTheCacheAreNotCounted) {
  KernelCache cache(100, &hash128, 8 * kKiB);
  Made inside = make(1 * kKiB, 2 * kKiB);
  cache.insert("inside", inside.entry);
  run(cache, inside.entry);
  for (int i = 0; i < 10; ++i) {
    Made outside = make(1 * kKiB, 100 * kKiB);  // never inserted (always_compile)
    run(cache, outside.entry);
  }
  EXPECT_EQ(inside.code->idle(), 2 * kKiB);
  EXPECT_EQ(cache.stats().idle_releases, 0u);
}

// Resident pages of this process.
std::int64_t resident_bytes_of_process() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

bool built_with_sanitizers() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// Restores the process cache's bounds, whatever the test did.
struct BoundsGuard {
  ~BoundsGuard() {
    global_kernel_cache().set_byte_limit(env().cache_bytes);
    global_kernel_cache().set_capacity(env().cache_capacity);
  }
};

// The scenario, scaled down: distinct NCHW input gradients, each with over a megabyte
// of scratch (its transposed copy of dy), compiled and run once each through the public API.
TEST(RuntimeCacheBytes, DistinctKernelsStayWithinTheBoundAndEvictedOnesAreFreed) {
  BoundsGuard guard;
  constexpr std::size_t kBound = 1u << 20;  // below the code of all the kernels together
  global_kernel_cache().clear();
  global_kernel_cache().set_capacity(100000);  // only the byte bound applies
  global_kernel_cache().set_byte_limit(kBound);

  constexpr int kKernels = 120;
  constexpr std::int64_t kC = 32, kH = 96, kW0 = 96;
  std::vector<float> filter(3 * 3 * kC * kC, 0.01f);
  std::vector<float> dy(kC * kH * (kW0 + kKernels), 0.5f);
  std::vector<float> dx(kC * kH * (kW0 + kKernels), 0.0f);
  std::vector<std::weak_ptr<const CompiledKernel>> weak;
  std::size_t max_scratch = 0;
  const std::int64_t rss_before = resident_bytes_of_process();
  for (int i = 0; i < kKernels; ++i) {
    const std::int64_t w = kW0 + i;
    OpDescriptor d;
    d.op = OpKind::kConv2DBackpropInput;
    d.data_format = DataFormat::kNCHW;
    d.input = {1, kC, kH, w};
    d.filter = {3, 3, kC, kC};
    d.out_backprop = {1, kC, kH, w};
    d.strides = {1, 1, 1, 1};
    d.padding = Padding::kSame;
    CompileOptions options;
    options.num_threads = 1;
    const Kernel kernel = compile(d, options);
    kernel.run(TensorView{DType::kFloat32, {3, 3, kC, kC}, filter.data()},
               TensorView{DType::kFloat32, {1, kC, kH, w}, dy.data()},
               TensorView{DType::kFloat32, {1, kC, kH, w}, dx.data()});
    max_scratch = std::max(max_scratch, kernel.scratch_bytes());
    weak.push_back(kernel.impl()->compiled_ptr());
  }
  const std::int64_t rss_after = resident_bytes_of_process();
  ASSERT_GT(max_scratch, std::size_t{1} << 20) << "the kernels no longer keep large scratch";

  const CacheStats stats = global_kernel_cache().stats();
  // The last kernel is spared even if it alone were over the bound.
  EXPECT_LE(stats.resident_bytes, kBound + max_scratch);
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_GT(stats.idle_releases, 0u);
  // No handle is left: a kernel is alive exactly when the cache still holds it (the
  // descriptor memo does not keep evicted ones alive).
  std::size_t alive = 0;
  for (const auto& w : weak) {
    if (auto k = w.lock()) {
      ++alive;
      EXPECT_TRUE(k->residence.in_cache.load());
    }
  }
  EXPECT_EQ(alive, stats.size);
  EXPECT_LT(alive, static_cast<std::size_t>(kKernels));

  // Without the bound this keeps kKernels x (scratch + code), over 150 MB; allow the bound
  // plus generous slack for code pages, heap and the test's own buffers.
  if (!built_with_sanitizers()) {
    EXPECT_LT(rss_after - rss_before, static_cast<std::int64_t>(kBound + (48u << 20)))
        << "resident size grew by " << (rss_after - rss_before) / (1 << 20) << " MiB";
  }
  global_kernel_cache().clear();
  for (const auto& w : weak) EXPECT_TRUE(w.expired());
}

}  // namespace
}  // namespace convjit::runtime
