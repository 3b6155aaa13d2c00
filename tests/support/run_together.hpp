// Starting test threads at the same instant, so concurrency tests really overlap.
#pragma once

#include <latch>
#include <thread>
#include <vector>

namespace convjit::testing {

/// Runs `body(i)` for i in [0, threads) on `threads` threads released together by a latch.
template <typename Body>
void run_together(int threads, Body body) {
  std::latch start(threads);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      start.arrive_and_wait();
      body(i);
    });
  }
  for (std::thread& t : pool) t.join();
}

}  // namespace convjit::testing
