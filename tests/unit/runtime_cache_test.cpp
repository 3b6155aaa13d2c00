// The memory kernel cache: hits and misses, LRU eviction, full-key comparison under hash
// collisions, failed compiles, and the cache key's components.
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "frontend/validate.hpp"
#include "runtime/kernel_cache.hpp"

namespace convjit::runtime {
namespace {

KernelCache::Entry make_entry(const std::string& name) {
  auto kernel = std::make_shared<CompiledKernel>();
  kernel->name = name;
  return kernel;
}

// Counts its calls and returns a fresh entry named `name`.
struct CountingCompiler {
  int calls = 0;
  KernelCache::CompileFn for_name(const std::string& name) {
    return [this, name]() -> Expected<KernelCache::Entry> {
      ++calls;
      return make_entry(name);
    };
  }
};

Hash128 constant_hash(std::string_view) { return Hash128{42, 42}; }

TEST(RuntimeCache, MissThenHit) {
  KernelCache cache(8);
  CountingCompiler compiler;
  auto first = cache.get_or_compile("key-a", compiler.for_name("a"));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->source, KernelCache::Source::kCompiled);
  auto second = cache.get_or_compile("key-a", compiler.for_name("a"));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->source, KernelCache::Source::kMemoryHit);
  EXPECT_EQ(second->kernel, first->kernel);  // the same compiled object, not a copy
  EXPECT_EQ(compiler.calls, 1);
  const CacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.size, 1u);
}

TEST(RuntimeCache, EvictsLeastRecentlyUsed) {
  KernelCache cache(2);
  CountingCompiler compiler;
  ASSERT_TRUE(cache.get_or_compile("a", compiler.for_name("a")).has_value());
  ASSERT_TRUE(cache.get_or_compile("b", compiler.for_name("b")).has_value());
  // Touch "a" so "b" becomes the least recently used.
  ASSERT_TRUE(cache.get_or_compile("a", compiler.for_name("a")).has_value());
  ASSERT_TRUE(cache.get_or_compile("c", compiler.for_name("c")).has_value());
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cache.stats().size, 2u);
  EXPECT_NE(cache.lookup("a"), nullptr);
  EXPECT_EQ(cache.lookup("b"), nullptr);
  EXPECT_NE(cache.lookup("c"), nullptr);
  EXPECT_EQ(compiler.calls, 3);
  // "b" was evicted: asking again compiles again.
  auto b = cache.get_or_compile("b", compiler.for_name("b"));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->source, KernelCache::Source::kCompiled);
  EXPECT_EQ(compiler.calls, 4);
}

TEST(RuntimeCache, ShrinkingCapacityEvicts) {
  KernelCache cache(4);
  for (const char* k : {"a", "b", "c", "d"}) cache.insert(k, make_entry(k));
  cache.set_capacity(1);
  EXPECT_EQ(cache.stats().size, 1u);
  EXPECT_NE(cache.lookup("d"), nullptr);  // the most recent one stays
}

TEST(RuntimeCache, ZeroCapacityCachesNothing) {
  KernelCache cache(0);
  CountingCompiler compiler;
  ASSERT_TRUE(cache.get_or_compile("a", compiler.for_name("a")).has_value());
  ASSERT_TRUE(cache.get_or_compile("a", compiler.for_name("a")).has_value());
  EXPECT_EQ(compiler.calls, 2);
  EXPECT_EQ(cache.stats().size, 0u);
}

TEST(RuntimeCache, CollidingHashesAreToldApartByTheFullKey) {
  KernelCache cache(8, &constant_hash);
  CountingCompiler compiler;
  auto a = cache.get_or_compile("problem-a", compiler.for_name("a"));
  auto b = cache.get_or_compile("problem-b", compiler.for_name("b"));
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(compiler.calls, 2);  // same hash, different key: no false hit
  EXPECT_EQ(a->kernel->name, "a");
  EXPECT_EQ(b->kernel->name, "b");
  EXPECT_EQ(cache.lookup("problem-a")->name, "a");
  EXPECT_EQ(cache.lookup("problem-b")->name, "b");
  EXPECT_EQ(cache.lookup("problem-c"), nullptr);
}

TEST(RuntimeCache, EvictionUnderCollisionsRemovesOnlyTheVictim) {
  KernelCache cache(2, &constant_hash);
  cache.insert("a", make_entry("a"));
  cache.insert("b", make_entry("b"));
  cache.insert("c", make_entry("c"));
  EXPECT_EQ(cache.lookup("a"), nullptr);
  EXPECT_EQ(cache.lookup("b")->name, "b");
  EXPECT_EQ(cache.lookup("c")->name, "c");
}

TEST(RuntimeCache, FailedCompileIsReportedAndNotCached) {
  KernelCache cache(8);
  int calls = 0;
  auto failing = [&]() -> Expected<KernelCache::Entry> {
    ++calls;
    return invalid_argument("no such luck");
  };
  auto first = cache.get_or_compile("k", failing);
  ASSERT_FALSE(first.has_value());
  EXPECT_EQ(first.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(first.status().message(), "no such luck");
  EXPECT_EQ(cache.stats().size, 0u);
  CountingCompiler compiler;
  auto second = cache.get_or_compile("k", compiler.for_name("k"));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(compiler.calls, 1);
  EXPECT_EQ(calls, 1);
}

TEST(RuntimeCache, KeyNamesEveryComponent) {
  OpDescriptor desc;
  desc.input = {1, 5, 5, 2};
  desc.filter = {3, 3, 2, 4};
  desc.out_backprop = {1, 3, 3, 4};
  auto problem = validate(desc);
  ASSERT_TRUE(problem.has_value()) << problem.status().to_string();
  codegen::PlanOptions one_thread, four_threads, tf32;
  four_threads.num_threads = 4;
  tf32.math_mode = MathMode::kTF32;
  const std::string key = make_cache_key(*problem, "interpreter", "generic", one_thread);
  EXPECT_NE(key.find("backend=interpreter"), std::string::npos) << key;
  EXPECT_NE(key.find("codegen_version="), std::string::npos) << key;
  EXPECT_NE(key.find("target=generic"), std::string::npos) << key;
  EXPECT_EQ(key, make_cache_key(*problem, "interpreter", "generic", one_thread));
  EXPECT_NE(key, make_cache_key(*problem, "x86", "generic", one_thread));
  EXPECT_NE(key, make_cache_key(*problem, "interpreter", "avx2", one_thread));
  EXPECT_NE(key, make_cache_key(*problem, "interpreter", "generic", four_threads));
  EXPECT_NE(key, make_cache_key(*problem, "interpreter", "generic", tf32));
  ConvProblem other = *problem;
  other.pad_left = 1;
  EXPECT_NE(key, make_cache_key(other, "interpreter", "generic", one_thread));
}

}  // namespace
}  // namespace convjit::runtime
