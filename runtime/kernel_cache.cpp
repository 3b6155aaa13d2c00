#include "runtime/kernel_cache.hpp"

#include <algorithm>
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

KernelCache::KernelCache(std::size_t capacity, HashFn hash, std::size_t byte_limit)
    : hash_(hash),
      capacity_(capacity),
      byte_limit_(byte_limit),
      capacity_seen_(capacity),
      byte_limit_seen_(byte_limit) {}

namespace {

std::size_t resident_of(const CompiledKernel* kernel) {
  return kernel != nullptr && kernel->code ? kernel->code->resident_bytes() : 0;
}

}  // namespace

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

void KernelCache::insert_locked(const std::string& key, const Hash128& hash, Entry kernel,
                                Dropped* dropped) {
  if (capacity_ == 0) return;
  const CompiledKernel* inserted = kernel.get();
  if (kernel) kernel->residence.in_cache.store(true, std::memory_order_relaxed);
  auto [first, last] = index_.equal_range(hash);
  bool replaced = false;
  for (auto it = first; it != last; ++it) {
    if (it->second->key == key) {
      Entry old = std::exchange(it->second->kernel, std::move(kernel));
      if (old && old.get() != inserted) {
        old->residence.in_cache.store(false, std::memory_order_relaxed);
        dropped->push_back(std::move(old));
      }
      lru_.splice(lru_.begin(), lru_, it->second);
      bump_epoch();  // the replaced kernel left the cache
      replaced = true;
      break;
    }
  }
  if (!replaced) {
    lru_.push_front(Node{key, hash, std::move(kernel)});
    index_.emplace(hash, lru_.begin());
    evict_locked(dropped);
  }
  trim_bytes_locked(inserted, dropped);
}

void KernelCache::erase_locked(std::list<Node>::iterator victim, Dropped* dropped) {
  auto [first, last] = index_.equal_range(victim->hash);
  for (auto it = first; it != last; ++it) {
    if (it->second == victim) {
      index_.erase(it);
      break;
    }
  }
  if (victim->kernel) {
    victim->kernel->residence.in_cache.store(false, std::memory_order_relaxed);
    dropped->push_back(std::move(victim->kernel));
  }
  lru_.erase(victim);
  ++counters_.evictions;
  bump_epoch();
}

void KernelCache::evict_locked(Dropped* dropped) {
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
    erase_locked(victim, dropped);
  }
}

void KernelCache::trim_bytes_locked(const CompiledKernel* spare, Dropped* dropped) {
  // Grown bytes counted before this point are in the exact sum below.
  const std::size_t grown = grown_since_trim_.load(std::memory_order_relaxed);
  std::size_t total = 0;
  for (const Node& n : lru_) total += resident_of(n.kernel.get());
  if (total > byte_limit_) {
    // Idle scratch first, least recently used first: the next run of that kernel allocates
    // again, which costs far less than compiling it again.
    for (auto it = lru_.rbegin(); it != lru_.rend() && total > byte_limit_; ++it) {
      const CompiledKernel* k = it->kernel.get();
      if (k == nullptr || k == spare || !k->code) continue;
      const std::size_t before = resident_of(k);
      k->code->release_idle_memory();
      const std::size_t after = resident_of(k);
      k->residence.resident_seen.store(after, std::memory_order_relaxed);
      if (after < before) {
        total -= before - after;
        ++counters_.idle_releases;
      }
    }
    // Then whole kernels, least recently used first; the spared one (the newest, or the one
    // that just ran) stays even when it alone is over the bound.
    for (auto it = lru_.end(); total > byte_limit_ && it != lru_.begin();) {
      --it;
      if (it->kernel.get() == spare) continue;
      total -= std::min(total, resident_of(it->kernel.get()));
      const auto victim = it++;
      erase_locked(victim, dropped);
    }
  }
  resident_at_trim_.store(total, std::memory_order_relaxed);
  grown_since_trim_.fetch_sub(std::min(grown, grown_since_trim_.load(std::memory_order_relaxed)),
                              std::memory_order_relaxed);
}

void KernelCache::after_unlock(Dropped dropped) {
  if (dropped.empty()) return;
  EvictionListener listener;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    listener = listener_;
  }
  const std::uint64_t now = epoch();
  dropped.clear();  // the cache's references go first; the memo's next
  if (listener) listener(now);
}

void KernelCache::note_run(const CompiledKernel& kernel) {
  if (!kernel.code || !kernel.residence.in_cache.load(std::memory_order_relaxed)) return;
  const std::size_t now = kernel.code->resident_bytes();
  const std::size_t before =
      kernel.residence.resident_seen.exchange(now, std::memory_order_relaxed);
  if (now <= before) return;  // only growth can push the cache past its bound
  const std::size_t grown =
      grown_since_trim_.fetch_add(now - before, std::memory_order_relaxed) + (now - before);
  const std::size_t limit = byte_limit_seen_.load(std::memory_order_relaxed);
  if (resident_at_trim_.load(std::memory_order_relaxed) + grown <= limit) return;
  Dropped dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    trim_bytes_locked(&kernel, &dropped);
  }
  after_unlock(std::move(dropped));
}

KernelCache::Entry KernelCache::lookup(const std::string& key) {
  const Hash128 hash = hash_(key);
  std::lock_guard<std::mutex> lock(mutex_);
  return lookup_locked(key, hash);
}

void KernelCache::insert(const std::string& key, Entry kernel) {
  const Hash128 hash = hash_(key);
  Dropped dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    insert_locked(key, hash, std::move(kernel), &dropped);
  }
  after_unlock(std::move(dropped));
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
  Dropped dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (compiled.has_value()) insert_locked(key, hash, compiled.value(), &dropped);
    in_flight_.erase(key);
  }
  after_unlock(std::move(dropped));
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
  for (const Node& n : lru_) s.resident_bytes += resident_of(n.kernel.get());
  s.byte_limit = byte_limit_;
  return s;
}

void KernelCache::clear() {
  Dropped dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Node& n : lru_) {
      if (n.kernel) {
        n.kernel->residence.in_cache.store(false, std::memory_order_relaxed);
        dropped.push_back(std::move(n.kernel));
      }
    }
    lru_.clear();
    index_.clear();
    resident_at_trim_.store(0, std::memory_order_relaxed);
    bump_epoch();
  }
  after_unlock(std::move(dropped));
}

void KernelCache::set_capacity(std::size_t capacity) {
  Dropped dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = capacity;
    capacity_seen_.store(capacity, std::memory_order_relaxed);
    // Always, even when nothing is evicted: a memo entry recorded while the capacity was 0
    // names a kernel that was never inserted, and must not outlive a change to a capacity that
    // keeps it.
    bump_epoch();
    evict_locked(&dropped);
  }
  after_unlock(std::move(dropped));
}

void KernelCache::set_byte_limit(std::size_t bytes) {
  Dropped dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    byte_limit_ = bytes;
    byte_limit_seen_.store(bytes, std::memory_order_relaxed);
    trim_bytes_locked(lru_.empty() ? nullptr : lru_.front().kernel.get(), &dropped);
  }
  after_unlock(std::move(dropped));
}

void KernelCache::set_eviction_listener(EvictionListener listener) {
  std::lock_guard<std::mutex> lock(mutex_);
  listener_ = std::move(listener);
}

KernelCache& global_kernel_cache() {
  // Leaked on purpose: compiled code must outlive every static that may still run a kernel.
  static KernelCache* cache = new KernelCache(env().cache_capacity, &hash128, env().cache_bytes);
  return *cache;
}

}  // namespace convjit::runtime
