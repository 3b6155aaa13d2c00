// The in-memory kernel cache: bounded LRU, thread-safe, single-flight. Keys are the canonical
// problem text + backend + target + codegen version (make_cache_key); the map is indexed by a
// 128-bit hash of the key and the full key text is compared on every hit.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "frontend/hash.hpp"
#include "frontend/problem.hpp"
#include "codegen/backend.hpp"
#include "runtime/kernel.hpp"
#include "support/status.hpp"

namespace convjit::runtime {

/// The full cache key text: one line per component, so two keys are equal exactly when the
/// problem, backend, target, plan options (threads, math mode, ...) and codegen version all are.
std::string make_cache_key(const ConvProblem& problem, const codegen::Backend& backend,
                           const codegen::PlanOptions& options);
/// The same from the backend's name and target name.
std::string make_cache_key(const ConvProblem& problem, std::string_view backend,
                           std::string_view target, const codegen::PlanOptions& options);

struct CacheStats {
  std::uint64_t hits = 0;       // found in memory (count_front_hit's included)
  std::uint64_t misses = 0;     // compiled by the caller
  std::uint64_t coalesced = 0;  // waited for another thread's compile of the same key
  std::uint64_t evictions = 0;  // by either bound
  /// Kernels whose idle scratch was released to keep within the byte bound.
  std::uint64_t idle_releases = 0;
  std::size_t size = 0;
  std::size_t capacity = 0;
  /// Host memory the cached kernels keep between runs (code and idle scratch), as of now.
  std::size_t resident_bytes = 0;
  std::size_t byte_limit = 0;
};

/// No byte bound (KernelCache's default; the process's cache reads CONVJIT_CACHE_BYTES).
inline constexpr std::size_t kUnboundedBytes = static_cast<std::size_t>(-1);

class KernelCache {
 public:
  using Entry = std::shared_ptr<const CompiledKernel>;
  using CompileFn = std::function<Expected<Entry>()>;
  using HashFn = Hash128 (*)(std::string_view);

  /// Where get_or_compile's result came from.
  enum class Source : std::uint8_t { kMemoryHit, kCompiled, kCoalesced };
  struct Result {
    Entry kernel;
    Source source = Source::kCompiled;
  };

  /// Called, outside the cache's lock, after kernels left the cache (eviction, replacement,
  /// clear); the argument is the epoch() that followed. compile()'s descriptor memo drops its
  /// references to them here, so that an evicted kernel nobody else holds is freed at once.
  using EvictionListener = std::function<void(std::uint64_t epoch)>;

  /// Keeps at most `capacity` kernels (0: keep none, still single-flight) and, beyond the
  /// most recently inserted or run one, at most `byte_limit` bytes of their resident memory
  /// (CompiledCode::resident_bytes: code plus idle scratch): past it, idle scratch is
  /// released, least recently used kernels first, and only then are kernels evicted. `hash`
  /// is a test seam: a constant function makes every key collide.
  explicit KernelCache(std::size_t capacity, HashFn hash = &hash128,
                       std::size_t byte_limit = kUnboundedBytes);

  /// Memory lookup, else compile (once, however many threads ask for `key` at the same time:
  /// the others wait and share the result), then insert. A failed compile is returned to every
  /// waiter and not cached.
  Expected<Result> get_or_compile(const std::string& key, const CompileFn& compile);

  /// The entry for `key`, marked most recently used; null if absent. Counts nothing.
  Entry lookup(const std::string& key);
  /// Adds or replaces `key`, evicting the least recently used entries beyond capacity.
  void insert(const std::string& key, Entry kernel);

  CacheStats stats() const;
  void clear();
  void set_capacity(std::size_t capacity);
  std::size_t capacity() const { return capacity_seen_.load(std::memory_order_relaxed); }
  /// Changes the byte bound and applies it at once.
  void set_byte_limit(std::size_t bytes);
  std::size_t byte_limit() const { return byte_limit_seen_.load(std::memory_order_relaxed); }
  void set_eviction_listener(EvictionListener listener);

  /// Called after every run of `kernel` (KernelImpl::run): when its resident memory grew
  /// (a first run keeps its scratch block) and the cache may now be over its byte bound, the
  /// bound is applied, sparing `kernel` itself. A few atomic operations otherwise; kernels
  /// that are not in this cache are ignored.
  void note_run(const CompiledKernel& kernel);

  /// Advances whenever a kernel leaves the cache (eviction, replacement, clear) and on every
  /// set_capacity. An index in front of the cache (compile()'s descriptor memo) that read
  /// epoch E before a get_or_compile may hand out that call's kernel without asking the cache
  /// again for as long as epoch() is still E: nothing has been removed since, so the kernel is
  /// still cached, and clearing the cache invalidates the whole index at once.
  std::uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  /// Counts a memory hit served by such an index, which never reaches get_or_compile. The
  /// index marks the kernel's UseMark too, which eviction honours in place of an LRU move.
  void count_front_hit() { front_hits_.fetch_add(1, std::memory_order_relaxed); }

 private:
  struct Node {
    std::string key;
    Hash128 hash;
    Entry kernel;
  };
  struct HashOf {
    std::size_t operator()(const Hash128& h) const { return static_cast<std::size_t>(h.low); }
  };
  struct Flight;

  // Kernels leaving the cache under the lock are moved here and released after it (the last
  // reference frees code pages and scratch), and the listener is told.
  using Dropped = std::vector<Entry>;

  Entry lookup_locked(const std::string& key, const Hash128& hash);
  void insert_locked(const std::string& key, const Hash128& hash, Entry kernel, Dropped* dropped);
  void evict_locked(Dropped* dropped);
  // Applies the byte bound, sparing `spare` (the kernel just inserted or run; may be null).
  void trim_bytes_locked(const CompiledKernel* spare, Dropped* dropped);
  void erase_locked(std::list<Node>::iterator victim, Dropped* dropped);
  void after_unlock(Dropped dropped);
  void bump_epoch() { epoch_.fetch_add(1, std::memory_order_acq_rel); }

  const HashFn hash_;
  mutable std::mutex mutex_;
  std::size_t capacity_;
  std::size_t byte_limit_;
  // Lock-free reads for capacity(), byte_limit() and epoch(); written under mutex_.
  std::atomic<std::size_t> capacity_seen_;
  std::atomic<std::size_t> byte_limit_seen_;
  std::atomic<std::uint64_t> epoch_{0};
  std::atomic<std::uint64_t> front_hits_{0};
  // Resident bytes of the cached kernels when the bound was last applied, plus what runs have
  // added since (note_run): an estimate that decides when to apply the bound again.
  std::atomic<std::size_t> resident_at_trim_{0};
  std::atomic<std::size_t> grown_since_trim_{0};
  EvictionListener listener_;  // guarded by mutex_ (copied out before it is called)
  std::list<Node> lru_;  // front = most recently used
  std::unordered_multimap<Hash128, std::list<Node>::iterator, HashOf> index_;
  std::unordered_map<std::string, std::shared_ptr<Flight>> in_flight_;
  CacheStats counters_;
};

/// The process's cache, bounded by CONVJIT_CACHE_CAPACITY (kernels) and CONVJIT_CACHE_BYTES.
KernelCache& global_kernel_cache();

}  // namespace convjit::runtime
