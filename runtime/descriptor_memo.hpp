// The descriptor memo: compile()'s fast path for a kernel it has handed out before. It maps the
// request itself (every OpDescriptor field and the settings that choose the kernel, as compact
// bytes) to the finished KernelImpl, so a repeat compile() skips validation, the backend
// lookup, the canonical text, the 128-bit key hash and the memory cache's lock.
//
// It is an index in front of the memory cache, never a second cache: every entry records the
// cache's epoch() from before the lookup that produced it and is used only while the epoch is
// unchanged, i.e. while no kernel has left the cache since (see KernelCache::epoch). Sharded,
// each shard behind a std::shared_mutex, so hits on different threads only share a read lock.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "convjit/convjit.hpp"
#include "convjit/types.hpp"
#include "codegen/cpu/cpu_info.hpp"
#include "runtime/kernel.hpp"

namespace convjit::runtime {

/// Writes to `out` (replacing its contents) the bytes that name one compile() request: every
/// field of `desc`, the options that choose the kernel (device and backend as asked for, ""
/// for the defaults; math mode; determinism), the resolved thread count and the ISA cap. Each value has a fixed width and each list its length first, so two requests
/// get the same bytes exactly when they are equal field by field.
void make_descriptor_key(const OpDescriptor& desc, const CompileOptions& options,
                         int num_threads, cpu::Isa isa_cap, std::string* out);

class DescriptorMemo {
 public:
  using Kernel = std::shared_ptr<const detail::KernelImpl>;
  using HashFn = std::uint64_t (*)(std::string_view);

  struct Stats {
    /// find() calls that returned nothing: each one is a compile() that took the slow path.
    std::uint64_t misses = 0;
    std::size_t size = 0;
  };

  /// `hash` is a test seam: a constant function puts every key in one bucket of one shard.
  explicit DescriptorMemo(HashFn hash = &default_hash);

  /// The kernel remembered for `key`, if it was remembered at `epoch`; null otherwise.
  Kernel find(std::string_view key, std::uint64_t epoch) const;

  /// Remembers `kernel` for `key`. `seen` is the cache epoch read before the lookup that
  /// produced `kernel` and `now` the epoch after it: when they differ a kernel has left the
  /// cache meanwhile (maybe this one), so nothing is remembered. Entries of older epochs are
  /// dropped first. `limit` bounds the entries kept (0: remember nothing); past it an
  /// arbitrary entry of the same shard makes room.
  void remember(std::string_view key, Kernel kernel, std::uint64_t seen, std::uint64_t now,
                std::size_t limit);

  /// Drops every entry recorded before `epoch`: they can never be used again, and holding them
  /// would keep kernels the cache has let go alive. The memory cache's eviction listener.
  void forget_older_than(std::uint64_t epoch);

  void clear();
  Stats stats() const;

  static std::uint64_t default_hash(std::string_view key);

 private:
  struct Node {
    std::string key;
    Kernel kernel;
    std::uint64_t epoch = 0;
  };
  struct IdentityHash {
    std::size_t operator()(std::uint64_t h) const { return static_cast<std::size_t>(h); }
  };
  // One cache line each so that readers of different shards do not share their lock's line.
  struct alignas(64) Shard {
    mutable std::shared_mutex mutex;
    std::unordered_multimap<std::uint64_t, Node, IdentityHash> map;  // full hash -> entry
  };
  static constexpr int kShardBits = 4;
  static constexpr std::size_t kShards = std::size_t{1} << kShardBits;

  // The top bits pick the shard; the map's buckets use the low ones.
  Shard& shard_of(std::uint64_t hash) const { return shards_[hash >> (64 - kShardBits)]; }
  void drop_stale(std::uint64_t epoch);

  const HashFn hash_;
  mutable std::array<Shard, kShards> shards_;
  std::atomic<std::size_t> size_{0};
  // The epoch drop_stale last ran for; remember() runs it again when the cache's has moved on.
  std::atomic<std::uint64_t> clean_epoch_{0};
  mutable std::atomic<std::uint64_t> misses_{0};
};

/// The memo in front of global_kernel_cache().
DescriptorMemo& global_descriptor_memo();

}  // namespace convjit::runtime
