#include "runtime/kernel_cache.hpp"

#include <condition_variable>
#include <iterator>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "frontend/descriptor_text.hpp"
#include "runtime/codegen_version.hpp"
#include "runtime/env.hpp"

namespace convjit::runtime {

std::string make_cache_key(const ConvProblem& problem, const codegen::Backend& backend,
                           const codegen::PlanOptions& options) {
  return make_cache_key(problem, backend.name(), backend.target_name(), options);
}

std::string make_cache_key(const ConvProblem& problem, std::string_view backend,
                           std::string_view target, const codegen::PlanOptions& options) {
  return fmt::format("{}\nbackend={}\ntarget={}\n{}\ncodegen_version={}",
                     to_text(problem), backend, target, codegen::options_key(options),
                     codegen_version());
}

// One compile in progress; waiters block on `done`.
struct KernelCache::Flight {
  std::mutex mutex;
  std::condition_variable done;
  std::optional<Expected<Entry>> result;
};

KernelCache::KernelCache(std::size_t capacity, HashFn hash)
    : hash_(hash), capacity_(capacity), capacity_seen_(capacity) {}

KernelCache::Entry KernelCache::lookup_locked(const std::string& key, const Hash128& hash) {
  auto [first, last] = index_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    // Equal hashes are not proof: compare the whole key.
    if (it->second->key == key) {
      lru_.splice(lru_.begin(), lru_, it->second);
      // Just moved to the front: an older memo hit needs no second chance on top.
      if (it->second->kernel) it->second->kernel->use_mark.take();
      return it->second->kernel;
    }
  }
  return nullptr;
}

void KernelCache::insert_locked(const std::string& key, const Hash128& hash, Entry kernel) {
  if (capacity_ == 0) return;
  auto [first, last] = index_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (it->second->key == key) {
      it->second->kernel = std::move(kernel);
      lru_.splice(lru_.begin(), lru_, it->second);
      bump_epoch();  // the replaced kernel left the cache
      return;
    }
  }
  lru_.push_front(Node{key, hash, std::move(kernel)});
  index_.emplace(hash, lru_.begin());
  evict_locked();
}

void KernelCache::evict_locked() {
  // Memo hits skip the LRU list and mark the kernel instead: a marked tail entry was used
  // since it got there, so it moves up to just behind the front, which is the entry being
  // inserted (newer still; at capacity 1 it must not be the one to go). Once per entry and
  // call, so that hits arriving meanwhile cannot keep this loop going.
  std::size_t second_chances = lru_.size();
  while (lru_.size() > capacity_) {
    auto victim = std::prev(lru_.end());
    if (capacity_ > 0 && second_chances > 0 && victim->kernel && victim->kernel->use_mark.take()) {
      --second_chances;
      lru_.splice(std::next(lru_.begin()), lru_, victim);  // size > capacity >= 1: 2 or more
      continue;
    }
    auto [first, last] = index_.equal_range(victim->hash);
    for (auto it = first; it != last; ++it) {
      if (it->second == victim) {
        index_.erase(it);
        break;
      }
    }
    lru_.erase(victim);
    ++counters_.evictions;
    bump_epoch();
  }
}

KernelCache::Entry KernelCache::lookup(const std::string& key) {
  const Hash128 hash = hash_(key);
  std::lock_guard<std::mutex> lock(mutex_);
  return lookup_locked(key, hash);
}

void KernelCache::insert(const std::string& key, Entry kernel) {
  const Hash128 hash = hash_(key);
  std::lock_guard<std::mutex> lock(mutex_);
  insert_locked(key, hash, std::move(kernel));
}

Expected<KernelCache::Result> KernelCache::get_or_compile(const std::string& key,
                                                          const CompileFn& compile) {
  const Hash128 hash = hash_(key);
  std::shared_ptr<Flight> flight;
  bool leader = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // 1. Memory lookup.
    if (Entry hit = lookup_locked(key, hash)) {
      ++counters_.hits;
      return Result{std::move(hit), Source::kMemoryHit};
    }
    // Single flight: join a compile of the same key already under way.
    auto it = in_flight_.find(key);
    if (it != in_flight_.end()) {
      flight = it->second;
      ++counters_.coalesced;
    } else {
      flight = std::make_shared<Flight>();
      in_flight_.emplace(key, flight);
      leader = true;
      ++counters_.misses;
    }
  }

  if (!leader) {
    std::unique_lock<std::mutex> lock(flight->mutex);
    flight->done.wait(lock, [&] { return flight->result.has_value(); });
    if (!flight->result->has_value()) return flight->result->status();
    return Result{flight->result->value(), Source::kCoalesced};
  }

  // 2. Compile, outside every lock (a disk lookup slots in here, before the compile).
  Expected<Entry> compiled = compile();
  if (compiled.has_value() && compiled.value() == nullptr) {
    compiled = internal_error("kernel compile returned no kernel");
  }

  // 3. Insert (successes only) and release the waiters.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (compiled.has_value()) insert_locked(key, hash, compiled.value());
    in_flight_.erase(key);
  }
  {
    std::lock_guard<std::mutex> lock(flight->mutex);
    flight->result.emplace(compiled);
  }
  flight->done.notify_all();
  if (!compiled.has_value()) return compiled.status();
  return Result{std::move(compiled).value(), Source::kCompiled};
}

CacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CacheStats s = counters_;
  s.hits += front_hits_.load(std::memory_order_relaxed);
  s.size = lru_.size();
  s.capacity = capacity_;
  return s;
}

void KernelCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  lru_.clear();
  index_.clear();
  bump_epoch();
}

void KernelCache::set_capacity(std::size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = capacity;
  capacity_seen_.store(capacity, std::memory_order_relaxed);
  // Always, even when nothing is evicted: a memo entry recorded while the capacity was 0 names
  // a kernel that was never inserted, and must not outlive a change to a capacity that keeps it.
  bump_epoch();
  evict_locked();
}

KernelCache& global_kernel_cache() {
  // Leaked on purpose: compiled code must outlive every static that may still run a kernel.
  static KernelCache* cache = new KernelCache(env().cache_capacity);
  return *cache;
}

}  // namespace convjit::runtime
