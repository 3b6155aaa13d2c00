#include "runtime/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>

#include <pthread.h>

#include "runtime/env.hpp"

namespace convjit::runtime {
namespace {

// Set while this thread runs a body: a nested parallel_for then runs serially instead of
// waiting on workers that may all be busy with the outer loop (the deadlock to avoid).
thread_local bool t_in_body = false;

// More chunks than threads so uneven chunk costs (border regions) balance out.
constexpr std::int64_t kChunksPerThread = 4;

// How long a thread with nothing to do keeps checking before it sleeps: a worker waiting for
// the next job, and a caller waiting for the workers to finish its chunks. Kernels run back to
// back (a training step's ops, a benchmark's repetitions), and waking a sleeping thread costs
// tens to hundreds of microseconds (on a virtual machine the idle core itself must be woken
// first): a two-slice filter gradient of 0.5 ms ran at the one-thread rate because its worker
// woke after the caller had claimed both slices. After a few pauses the waiting thread yields
// at every check, so another runtime's threads on the same core (a framework's pool, OpenMP)
// get it at once instead of after a time slice.
constexpr auto kSpin = std::chrono::microseconds(200);
constexpr int kPausesBeforeYielding = 64;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Checks `ready()` until it holds or kSpin has passed; returns ready().
template <typename Ready>
bool spin_until(const Ready& ready) {
  for (int i = 0; i < kPausesBeforeYielding; ++i) {
    if (ready()) return true;
    cpu_relax();
  }
  const auto until = std::chrono::steady_clock::now() + kSpin;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return ready();
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

struct ThreadPool::Job {
  const std::function<void(std::int64_t, std::int64_t)>* body = nullptr;
  std::int64_t n = 0;
  std::int64_t chunks = 0;
  std::atomic<std::int64_t> next_chunk{0};
  std::atomic<int> helpers_left{0};  // workers that may still join
  std::atomic<std::int64_t> chunks_done{0};
  std::mutex done_mutex;  // the caller sleeps on done_cv once it stops spinning on chunks_done
  std::condition_variable done_cv;

  // Chunk c covers [c*n/chunks, (c+1)*n/chunks): sizes differ by at most one.
  std::int64_t chunk_begin(std::int64_t c) const {
    return static_cast<std::int64_t>(static_cast<__int128>(c) * n / chunks);
  }
};

ThreadPool::ThreadPool(int num_threads) {
  const int workers = std::max(0, num_threads - 1);
  workers_.reserve(static_cast<std::size_t>(workers));
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this] { worker_loop(); });
    // Named so that top -H, perf and a framework adapter's tests can tell convjit's threads from
    // the host's; named here, not by the worker, so the name is there once the pool exists.
    pthread_setname_np(workers_.back().native_handle(), "convjit-pool");
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool ThreadPool::in_parallel_region() { return t_in_body; }

void ThreadPool::work_on(Job& job) {
  std::int64_t finished = 0;
  const bool was_in_body = t_in_body;
  t_in_body = true;
  for (;;) {
    const std::int64_t c = job.next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.chunks) break;
    (*job.body)(job.chunk_begin(c), job.chunk_begin(c + 1));
    ++finished;
  }
  t_in_body = was_in_body;
  if (finished > 0 && job.chunks_done.fetch_add(finished) + finished == job.chunks) {
    // Under the mutex, so a caller between its last check and its wait cannot miss it.
    std::lock_guard<std::mutex> lock(job.done_mutex);
    job.done_cv.notify_all();
  }
}

void ThreadPool::worker_loop() {
  for (;;) {
    spin_until([this] { return queued_.load(std::memory_order_acquire) > 0; });
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = queue_.front();
      // A job leaves the queue once its helper slots are taken or its chunks are all claimed.
      if (job->helpers_left.fetch_sub(1) <= 1 ||
          job->next_chunk.load(std::memory_order_relaxed) >= job->chunks) {
        queue_.pop_front();
        queued_.fetch_sub(1, std::memory_order_release);
      }
    }
    work_on(*job);
  }
}

void ThreadPool::parallel_for(std::int64_t n,
                              const std::function<void(std::int64_t, std::int64_t)>& body,
                              int max_threads) {
  if (n <= 0) return;
  int threads = max_threads <= 0 ? size() : std::min(max_threads, size());
  if (t_in_body || threads <= 1 || n == 1) {
    const bool was_in_body = t_in_body;
    t_in_body = true;
    body(0, n);
    t_in_body = was_in_body;
    return;
  }
  auto job = std::make_shared<Job>();
  job->body = &body;
  job->n = n;
  job->chunks = std::min<std::int64_t>(n, kChunksPerThread * threads);
  job->helpers_left.store(threads - 1);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(job);
    queued_.fetch_add(1, std::memory_order_release);
  }
  if (threads - 1 >= static_cast<int>(workers_.size())) {
    wake_.notify_all();
  } else {
    for (int i = 0; i < threads - 1; ++i) wake_.notify_one();
  }
  work_on(*job);
  {
    // Every chunk is claimed now; drop the job so no worker picks it up for nothing.
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find(queue_.begin(), queue_.end(), job);
    if (it != queue_.end()) {
      queue_.erase(it);
      queued_.fetch_sub(1, std::memory_order_release);
    }
  }
  auto done = [&] { return job->chunks_done.load(std::memory_order_acquire) == job->chunks; };
  if (spin_until(done)) return;
  std::unique_lock<std::mutex> lock(job->done_mutex);
  job->done_cv.wait(lock, done);
}

ThreadPool& global_thread_pool() {
  // Deliberately leaked: kernels may run from other static destructors at exit.
  static ThreadPool* pool = new ThreadPool(env().num_threads);
  return *pool;
}

namespace {

std::mutex g_hook_mutex;
ParallelFor g_hook;  // guarded by g_hook_mutex

}  // namespace

void set_parallel_for_hook(ParallelFor hook) {
  std::lock_guard<std::mutex> lock(g_hook_mutex);
  g_hook = std::move(hook);
}

ParallelFor parallel_for_hook() {
  std::lock_guard<std::mutex> lock(g_hook_mutex);
  return g_hook;
}

ParallelFor resolve_parallel_for(const ParallelFor& own, int num_threads) {
  if (own) return own;
  if (ParallelFor hook = parallel_for_hook()) return hook;
  if (num_threads <= 1) return serial_for;
  return [num_threads](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& body) {
    global_thread_pool().parallel_for(n, body, num_threads);
  };
}

}  // namespace convjit::runtime
