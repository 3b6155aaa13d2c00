// compile()'s fast path for a repeated request (runtime/descriptor_memo): a hit hands back the
// kernel already built without generating code or taking the slow path, every descriptor field
// and compile option selects its own kernel, clearing or evicting from the memory cache reaches
// the memo, and eight threads hit it at once. Named RuntimeCache* so the TSan stage runs it.
//
// Hit time is not asserted here (`convjit bench` reports it as jit-hit-us); what is checked is
// that a hit never reaches the slow path, by the memo's count of lookups that missed.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convjit/convjit.hpp"
#include "runtime/descriptor_memo.hpp"
#include "runtime/env.hpp"
#include "runtime/kernel.hpp"
#include "runtime/kernel_cache.hpp"
#include "support/run_together.hpp"
#include "support/test_tensors.hpp"

namespace convjit::runtime {
namespace {

// Conv2D with a symmetric shape, so that every single-field change below but a few still
// validates: NCHW reads the same dims, dilation 2 still fits, ...
OpDescriptor forward_base() {
  OpDescriptor desc;
  desc.op = OpKind::kConv2D;
  desc.input = {1, 5, 5, 5};
  desc.filter = {3, 3, 5, 2};
  desc.out_backprop = {};
  desc.padding = Padding::kValid;
  return desc;
}

OpDescriptor backprop_base() {
  OpDescriptor desc;
  desc.op = OpKind::kConv2DBackpropInput;
  desc.input = {1, 4, 4, 4};
  desc.filter = {3, 3, 4, 2};
  desc.out_backprop = {1, 2, 2, 2};
  return desc;
}

OpDescriptor explicit_base() {
  OpDescriptor desc = forward_base();
  desc.padding = Padding::kExplicit;
  desc.explicit_paddings = {0, 0, 1, 1, 1, 1, 0, 0};
  return desc;
}

std::uint64_t memo_misses() { return global_descriptor_memo().stats().misses; }

// A request `base` differs from in the one field `field` names.
struct FieldCase {
  std::string field;
  OpDescriptor base;
  std::function<void(OpDescriptor&)> change;
};

// One case (at least) per OpDescriptor field; make_descriptor_key's structured binding stops
// compiling when a field is added, which is the cue to add it here too.
std::vector<FieldCase> field_cases() {
  return {
      {"op", forward_base(), [](OpDescriptor& d) { d.op = OpKind::kDepthwiseConv2dNative; }},
      {"op_backprop", backprop_base(), [](OpDescriptor& d) { d.op = OpKind::kConv2DBackpropInputV2; }},
      {"dtype", forward_base(), [](OpDescriptor& d) { d.dtype = DType::kFloat64; }},
      {"data_format", forward_base(), [](OpDescriptor& d) { d.data_format = DataFormat::kNCHW; }},
      {"input", forward_base(), [](OpDescriptor& d) { d.input = {2, 5, 5, 5}; }},
      // The same problem spelled as 2 spatial sizes: a different descriptor all the same.
      {"input_sizes", backprop_base(), [](OpDescriptor& d) { d.input = {4, 4}; }},
      {"filter", forward_base(), [](OpDescriptor& d) { d.filter = {2, 2, 5, 2}; }},
      {"out_backprop", backprop_base(), [](OpDescriptor& d) { d.out_backprop = {1, 2, 2, 3}; }},
      {"out_backprop_forward", forward_base(), [](OpDescriptor& d) { d.out_backprop = {1, 3, 3, 2}; }},
      {"sizes_rank", backprop_base(), [](OpDescriptor& d) { d.sizes_rank = 2; }},
      {"sizes_rank_forward", forward_base(), [](OpDescriptor& d) { d.sizes_rank = 2; }},
      {"strides", forward_base(), [](OpDescriptor& d) { d.strides = {1, 2, 2, 1}; }},
      {"dilations", forward_base(), [](OpDescriptor& d) { d.dilations = {1, 2, 2, 1}; }},
      {"padding", forward_base(), [](OpDescriptor& d) { d.padding = Padding::kSame; }},
      {"explicit_paddings", explicit_base(),
       [](OpDescriptor& d) { d.explicit_paddings = {0, 0, 0, 1, 1, 0, 0, 0}; }},
      {"explicit_paddings_unused", forward_base(),
       [](OpDescriptor& d) { d.explicit_paddings = {0, 0, 0, 0, 0, 0, 0, 0}; }},
      {"use_cudnn_on_gpu", forward_base(), [](OpDescriptor& d) { d.use_cudnn_on_gpu = false; }},
  };
}

std::string key_of(const OpDescriptor& desc, std::string_view backend = "", int threads = 1,
                   cpu::Isa isa = cpu::Isa::kAvx2) {
  std::string key;
  CompileOptions options;
  options.backend = std::string(backend);
  make_descriptor_key(desc, options, threads, isa, &key);
  return key;
}

TEST(RuntimeCacheHit, KeyTellsEveryFieldAndOptionApart) {
  for (const FieldCase& c : field_cases()) {
    OpDescriptor changed = c.base;
    c.change(changed);
    ASSERT_NE(changed, c.base) << c.field;
    EXPECT_EQ(key_of(c.base), key_of(OpDescriptor(c.base))) << c.field;
    EXPECT_NE(key_of(changed), key_of(c.base)) << c.field;
  }
  const OpDescriptor d = forward_base();
  EXPECT_NE(key_of(d, "", 1), key_of(d, "", 2));
  EXPECT_NE(key_of(d, ""), key_of(d, "interpreter"));
  EXPECT_NE(key_of(d, "x86"), key_of(d, "interpreter"));
  EXPECT_NE(key_of(d, "", 1, cpu::Isa::kAvx2), key_of(d, "", 1, cpu::Isa::kGeneric));
  // Lists carry their length: moving a value from one list to the next changes the key.
  OpDescriptor a = d;
  OpDescriptor b = d;
  a.input = {1, 2};
  a.filter = {3};
  b.input = {1};
  b.filter = {2, 3};
  EXPECT_NE(key_of(a), key_of(b));
}

TEST(RuntimeCacheHit, RepeatReturnsTheSameKernelWithoutTheSlowPath) {
  OpDescriptor desc = backprop_base();
  desc.input = {1, 7, 5, 4};  // a problem no other test compiles
  desc.out_backprop = {1, 5, 3, 2};
  const Kernel first = compile(desc);  // the slow path, which fills the memo
  ASSERT_NE(first.cache_source(), "memory");
  const Kernel second = compile(desc);

  const std::uint64_t misses = memo_misses();
  const CacheStats cache_before = global_kernel_cache().stats();
  constexpr int kRepeats = 1000;
  for (int i = 0; i < kRepeats; ++i) {
    const Kernel again = compile(desc);
    ASSERT_EQ(again.impl(), second.impl());  // the very same handle state
    ASSERT_EQ(&again.impl()->compiled(), &first.impl()->compiled());
  }
  EXPECT_EQ(memo_misses(), misses);  // no call took the slow path
  const CacheStats cache_after = global_kernel_cache().stats();
  EXPECT_EQ(cache_after.misses, cache_before.misses);  // nothing compiled
  EXPECT_EQ(cache_after.hits - cache_before.hits, static_cast<std::uint64_t>(kRepeats));

  const Kernel hit = compile(desc);
  EXPECT_EQ(hit.cache_source(), "memory");
  EXPECT_EQ(hit.compile_ms(), 0.0);
  EXPECT_EQ(hit.descriptor(), to_text(desc));
  EXPECT_EQ(hit.name(), first.name());
  ASSERT_NE(first.impl()->compiled().code, nullptr);
  EXPECT_EQ(hit.impl()->compiled().code, first.impl()->compiled().code);
}

TEST(RuntimeCacheHit, EveryFieldSelectsItsOwnKernel) {
  for (const FieldCase& c : field_cases()) {
    SCOPED_TRACE(c.field);
    OpDescriptor changed = c.base;
    c.change(changed);
    // Twice each, so the memo holds the base before the changed request is made.
    const Kernel base = compile(c.base);
    ASSERT_EQ(compile(c.base).impl()->descriptor(), to_text(c.base));
    Kernel other;
    try {
      other = compile(changed);
    } catch (const Error& e) {
      // Invalid once changed: the memo must not answer for it with the base's kernel.
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_THROW(compile(changed), Error);
      continue;
    }
    EXPECT_NE(other.impl(), base.impl());
    EXPECT_EQ(other.descriptor(), to_text(changed));
    const Kernel other_again = compile(changed);
    EXPECT_EQ(other_again.descriptor(), to_text(changed));
    EXPECT_EQ(other_again.impl()->op(), changed.op);
    EXPECT_EQ(&other_again.impl()->compiled(), &other.impl()->compiled());
    EXPECT_EQ(compile(c.base).descriptor(), to_text(c.base));
  }
}

TEST(RuntimeCacheHit, ThreadsAndBackendSelectTheirOwnKernel) {
  OpDescriptor desc = forward_base();
  desc.input = {1, 9, 5, 5};
  CompileOptions one;
  one.num_threads = 1;
  CompileOptions two;
  two.num_threads = 2;
  CompileOptions interpreter;
  interpreter.backend = "interpreter";
  interpreter.num_threads = 1;
  for (int round = 0; round < 3; ++round) {
    const Kernel k1 = compile(desc, one);
    const Kernel k2 = compile(desc, two);
    const Kernel ki = compile(desc, interpreter);
    EXPECT_EQ(k1.impl()->compiled().num_threads, 1);
    EXPECT_EQ(k2.impl()->compiled().num_threads, 2);
    EXPECT_EQ(ki.backend(), "interpreter");
    EXPECT_NE(&k1.impl()->compiled(), &k2.impl()->compiled());
    EXPECT_NE(&k1.impl()->compiled(), &ki.impl()->compiled());
  }
}

TEST(RuntimeCacheHit, AlwaysCompileBypassesTheMemo) {
  OpDescriptor desc = forward_base();
  desc.input = {1, 6, 9, 5};
  (void)compile(desc);
  const Kernel cached = compile(desc);
  CompileOptions always;
  always.always_compile = true;
  const Kernel fresh = compile(desc, always);
  EXPECT_EQ(fresh.cache_source(), "none");
  EXPECT_NE(&fresh.impl()->compiled(), &cached.impl()->compiled());
  EXPECT_EQ(compile(desc).impl(), cached.impl());  // and leaves it as it was
}

TEST(RuntimeCacheHit, HitWithParallelForUsesTheCallersLoop) {
  OpDescriptor desc = backprop_base();
  desc.input = {2, 16, 16, 8};
  desc.filter = {3, 3, 8, 8};
  desc.out_backprop = {2, 16, 16, 8};
  desc.padding = Padding::kSame;
  CompileOptions options;
  options.num_threads = 4;
  (void)compile(desc, options);
  const Kernel plain = compile(desc, options);
  std::atomic<int> calls{0};
  options.parallel_for = [&](std::int64_t n,
                             const std::function<void(std::int64_t, std::int64_t)>& body) {
    ++calls;
    for (std::int64_t i = 0; i < n; ++i) body(i, i + 1);
  };
  const std::uint64_t misses = memo_misses();
  const Kernel hooked = compile(desc, options);
  EXPECT_EQ(memo_misses(), misses);
  EXPECT_EQ(hooked.cache_source(), "memory");
  EXPECT_NE(hooked.impl(), plain.impl());  // its own handle, holding the caller's loop
  EXPECT_EQ(&hooked.impl()->compiled(), &plain.impl()->compiled());
  using convjit::testing::TestTensor;
  const TestTensor a = convjit::testing::random_tensor(DType::kFloat32, hooked.operand_shape(0), 1);
  const TestTensor b = convjit::testing::random_tensor(DType::kFloat32, hooked.operand_shape(1), 2);
  TestTensor out(DType::kFloat32, hooked.operand_shape(2));
  hooked.run(a.view(), b.view(), out.view());
  EXPECT_GT(calls.load(), 0) << hooked.name();
}

TEST(RuntimeCacheHit, ClearingTheCacheClearsTheMemo) {
  OpDescriptor desc = forward_base();
  desc.input = {1, 7, 6, 5};
  (void)compile(desc);
  const Kernel before = compile(desc);
  ASSERT_EQ(compile(desc).impl(), before.impl());

  global_kernel_cache().clear();
  const std::uint64_t misses = memo_misses();
  const Kernel after = compile(desc);
  EXPECT_EQ(memo_misses(), misses + 1);  // the memo did not answer
  EXPECT_NE(after.cache_source(), "memory");
  EXPECT_NE(&after.impl()->compiled(), &before.impl()->compiled());
  // The new kernel is remembered in turn.
  const Kernel again = compile(desc);
  EXPECT_EQ(&again.impl()->compiled(), &after.impl()->compiled());
  EXPECT_EQ(compile(desc).impl(), again.impl());
}

// Restores the global cache's capacity when a test that shrank it ends.
struct CapacityGuard {
  ~CapacityGuard() { global_kernel_cache().set_capacity(env().cache_capacity); }
};

TEST(RuntimeCacheHit, ZeroCapacityRemembersNothing) {
  CapacityGuard guard;
  global_kernel_cache().set_capacity(0);
  OpDescriptor desc = forward_base();
  desc.input = {1, 8, 6, 5};
  const Kernel first = compile(desc);
  const Kernel second = compile(desc);
  EXPECT_NE(second.cache_source(), "memory");
  EXPECT_NE(&second.impl()->compiled(), &first.impl()->compiled());
}

TEST(RuntimeCacheHit, EvictionReachesTheMemoAndSparesAHotKernel) {
  CapacityGuard guard;
  global_kernel_cache().set_capacity(2);
  OpDescriptor a = forward_base();
  a.input = {1, 10, 5, 5};
  OpDescriptor b = a;
  b.input = {1, 11, 5, 5};
  OpDescriptor c = a;
  c.input = {1, 12, 5, 5};

  const Kernel ka = compile(a);  // each miss leaves its kernel in the memo
  const Kernel kb = compile(b);
  // Memo hits only: the cache's LRU list still says b is newer than a...
  for (int i = 0; i < 3; ++i) ASSERT_EQ(compile(a).cache_source(), "memory");
  // ...but a was used last, so the insertion of c must evict b, not a.
  const std::uint64_t misses_before = global_kernel_cache().stats().misses;
  (void)compile(c);
  EXPECT_EQ(global_kernel_cache().stats().misses, misses_before + 1);
  const Kernel a_again = compile(a);
  EXPECT_EQ(a_again.cache_source(), "memory");
  EXPECT_EQ(&a_again.impl()->compiled(), &ka.impl()->compiled());
  // b was evicted: the memo must not hand it out any more.
  const Kernel b_again = compile(b);
  EXPECT_NE(b_again.cache_source(), "memory");
  EXPECT_NE(&b_again.impl()->compiled(), &kb.impl()->compiled());
}

TEST(RuntimeCacheHit, AHotKernelDoesNotCrowdOutTheNewOneAtCapacityOne) {
  CapacityGuard guard;
  global_kernel_cache().set_capacity(1);
  OpDescriptor a = forward_base();
  a.input = {1, 10, 6, 5};
  OpDescriptor b = a;
  b.input = {1, 11, 6, 5};
  (void)compile(a);
  ASSERT_EQ(compile(a).cache_source(), "memory");  // a memo hit marks a as used
  const Kernel kb = compile(b);
  // b, just compiled, is what the cache keeps; a goes.
  const Kernel b_again = compile(b);
  EXPECT_EQ(b_again.cache_source(), "memory");
  EXPECT_EQ(&b_again.impl()->compiled(), &kb.impl()->compiled());
  EXPECT_NE(compile(a).cache_source(), "memory");
}

TEST(RuntimeCacheHit, MemoStaysWithinItsLimit) {
  DescriptorMemo memo;
  auto compiled = std::make_shared<CompiledKernel>();
  auto kernel = std::make_shared<const detail::KernelImpl>(compiled, OpKind::kConv2D, "d", "memory",
                                                           ParallelFor{});
  for (int i = 0; i < 200; ++i) memo.remember("key" + std::to_string(i), kernel, 0, 0, 8);
  EXPECT_LE(memo.stats().size, 8u + 16u);  // the limit, give or take one entry per shard
  // An entry from an older epoch is never returned, and a newer remember() drops it.
  memo.remember("old", kernel, 0, 0, 8);
  EXPECT_EQ(memo.find("old", 0), kernel);
  EXPECT_EQ(memo.find("old", 1), nullptr);
  memo.remember("new", kernel, 1, 1, 8);
  EXPECT_EQ(memo.stats().size, 1u);
  // Seen and now differing: a kernel left the cache meanwhile, so nothing is remembered.
  memo.remember("racy", kernel, 1, 2, 8);
  EXPECT_EQ(memo.find("racy", 2), nullptr);
  memo.clear();
  EXPECT_EQ(memo.stats().size, 0u);
}

std::uint64_t constant_hash(std::string_view) { return 7; }

TEST(RuntimeCacheHit, CollidingHashesAreToldApartByTheFullKey) {
  DescriptorMemo memo(&constant_hash);
  auto compiled = std::make_shared<CompiledKernel>();
  auto ka = std::make_shared<const detail::KernelImpl>(compiled, OpKind::kConv2D, "a", "memory",
                                                       ParallelFor{});
  auto kb = std::make_shared<const detail::KernelImpl>(compiled, OpKind::kConv2D, "b", "memory",
                                                       ParallelFor{});
  memo.remember(key_of(forward_base(), "", 1), ka, 0, 0, 8);
  memo.remember(key_of(forward_base(), "", 2), kb, 0, 0, 8);
  EXPECT_EQ(memo.find(key_of(forward_base(), "", 1), 0), ka);
  EXPECT_EQ(memo.find(key_of(forward_base(), "", 2), 0), kb);
  EXPECT_EQ(memo.find(key_of(forward_base(), "", 3), 0), nullptr);
}

using convjit::testing::run_together;

TEST(RuntimeCacheHit, EightThreadsHitOverlappingDescriptors) {
  std::vector<OpDescriptor> descs;
  for (std::int64_t h : {13, 14, 15}) {
    OpDescriptor d = forward_base();
    d.input = {1, h, 6, 5};
    descs.push_back(d);
  }
  std::vector<CompileOptions> options(2);
  options[0].num_threads = 1;
  options[1].num_threads = 2;
  // Cold: all eight threads ask for the same six kernels at once; each is generated once.
  const CacheStats cold_before = global_kernel_cache().stats();
  std::vector<std::vector<const CompiledKernel*>> seen(8);
  run_together(8, [&](int t) {
    for (int i = 0; i < 6; ++i) {
      const int which = (i + t) % 6;
      const Kernel k = compile(descs[static_cast<std::size_t>(which / 2)],
                               options[static_cast<std::size_t>(which % 2)]);
      seen[static_cast<std::size_t>(t)].push_back(&k.impl()->compiled());
    }
  });
  EXPECT_EQ(global_kernel_cache().stats().misses - cold_before.misses, 6u);

  // Warm: the expected kernel of each request, then many concurrent hits.
  std::vector<Kernel> expected;
  for (int which = 0; which < 6; ++which) {
    (void)compile(descs[static_cast<std::size_t>(which / 2)], options[static_cast<std::size_t>(which % 2)]);
    expected.push_back(compile(descs[static_cast<std::size_t>(which / 2)],
                               options[static_cast<std::size_t>(which % 2)]));
  }
  const std::uint64_t misses = memo_misses();
  std::atomic<int> wrong{0};
  run_together(8, [&](int t) {
    for (int i = 0; i < 300; ++i) {
      const int which = (i + t) % 6;
      const Kernel k = compile(descs[static_cast<std::size_t>(which / 2)],
                               options[static_cast<std::size_t>(which % 2)]);
      if (k.impl() != expected[static_cast<std::size_t>(which)].impl()) ++wrong;
    }
  });
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(memo_misses(), misses);
}

TEST(RuntimeCacheHit, HitsRaceWithClearsAndStayCorrect) {
  std::vector<OpDescriptor> descs;
  for (std::int64_t w : {7, 8}) {
    OpDescriptor d = forward_base();
    d.input = {1, 16, w, 5};
    descs.push_back(d);
  }
  for (const OpDescriptor& d : descs) (void)compile(d);
  std::atomic<int> wrong{0};
  run_together(8, [&](int t) {
    for (int i = 0; i < 200; ++i) {
      if (t == 0 && i % 20 == 0) {
        global_kernel_cache().clear();
        continue;
      }
      const OpDescriptor& d = descs[static_cast<std::size_t>((i + t) % 2)];
      const Kernel k = compile(d);
      if (k.descriptor() != to_text(d) || k.impl()->problem().iw != d.input[2]) ++wrong;
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace convjit::runtime
