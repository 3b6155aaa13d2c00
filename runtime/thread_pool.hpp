// convjit's own thread pool, the default implementation of ParallelFor, and the hook through
// which an embedding framework's parallel loop replaces it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "support/parallel.hpp"

namespace convjit::runtime {

/// A fixed set of worker threads. parallel_for() splits [0, n) into chunks that the workers
/// and the calling thread claim one at a time. Many threads may call it at once (their jobs
/// share the workers); a call made from inside a body, on any thread, runs serially on that
/// thread, so nesting never deadlocks and never oversubscribes.
class ThreadPool {
 public:
  /// `num_threads` counts the caller: the pool starts num_threads - 1 workers.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Threads that can work on one call, the caller included.
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls body over chunks covering [0, n) and returns when all are done. At most
  /// `max_threads` threads (caller included) work on this call; <= 0 means size().
  void parallel_for(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body,
                    int max_threads = 0);

  /// True while the calling thread is inside a body run by any ThreadPool.
  static bool in_parallel_region();

 private:
  struct Job;
  void worker_loop();
  static void work_on(Job& job);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::atomic<int> queued_{0};  // queue_.size(), for the workers to spin on without the mutex
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

/// The process-wide pool, sized by CONVJIT_NUM_THREADS (default all cores), started on first use.
ThreadPool& global_thread_pool();

/// Routes every later run's parallel loops through `hook` (an embedding framework's
/// parallel_for); an empty hook restores convjit's pool. Thread-safe.
void set_parallel_for_hook(ParallelFor hook);
/// The hook set by set_parallel_for_hook, or an empty function.
ParallelFor parallel_for_hook();

/// The ParallelFor a run uses: `own` (CompileOptions::parallel_for) if set, else the hook,
/// else the global pool limited to `num_threads` threads.
ParallelFor resolve_parallel_for(const ParallelFor& own, int num_threads);

}  // namespace convjit::runtime
