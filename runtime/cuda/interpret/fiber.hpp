// Cooperative fibers for the interpret mode: each CUDA thread of a block runs on its own stack
// and gives control back at every __syncthreads() and warp-level operation, so those can wait
// for the other threads exactly as on a GPU. ucontext-based, with the switches announced to
// AddressSanitizer and ThreadSanitizer when the library is built with them.
#pragma once

#include <ucontext.h>

#include <cstddef>

namespace convjit::runtime::interpret {

/// A stack from mmap with a guard page below it (an overflow faults instead of corrupting).
class FiberStack {
 public:
  explicit FiberStack(std::size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  bool ok() const { return base_ != nullptr; }
  void* bottom() const { return bottom_; }
  std::size_t size() const { return size_; }

 private:
  void* base_ = nullptr;  // the mapping, guard page included
  std::size_t mapped_ = 0;
  void* bottom_ = nullptr;  // the usable part
  std::size_t size_ = 0;
};

/// One fiber of a scheduler (the OS thread that resumes it).
class Fiber {
 public:
  Fiber() = default;
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  /// Prepares the fiber to call entry(arg) on `stack` when first resumed.
  void start(FiberStack* stack, void (*entry)(void*), void* arg);
  /// From the scheduler: runs the fiber until it yields or its entry returns.
  void resume();
  /// From inside the fiber: back to the scheduler.
  void yield();
  bool finished() const { return finished_; }
  bool started() const { return started_; }

 private:
  static void trampoline();
  void switch_to_scheduler(bool finishing);

  ucontext_t context_{};
  ucontext_t scheduler_{};
  FiberStack* stack_ = nullptr;
  void (*entry_)(void*) = nullptr;
  void* arg_ = nullptr;
  bool started_ = false;
  bool finished_ = false;
  // Sanitizer bookkeeping (used only in builds with AddressSanitizer or ThreadSanitizer).
  [[maybe_unused]] void* fake_stack_ = nullptr;
  [[maybe_unused]] const void* scheduler_stack_bottom_ = nullptr;
  [[maybe_unused]] std::size_t scheduler_stack_size_ = 0;
  [[maybe_unused]] void* tsan_fiber_ = nullptr;
  [[maybe_unused]] void* tsan_scheduler_ = nullptr;
};

}  // namespace convjit::runtime::interpret
