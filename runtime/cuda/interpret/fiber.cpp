#include "runtime/cuda/interpret/fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONVJIT_FIBER_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define CONVJIT_FIBER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CONVJIT_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define CONVJIT_FIBER_TSAN 1
#endif

#ifdef CONVJIT_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef CONVJIT_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace convjit::runtime::interpret {
namespace {

thread_local Fiber* t_starting = nullptr;

}  // namespace

FiberStack::FiberStack(std::size_t bytes) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  size_ = (bytes + page - 1) / page * page;
  mapped_ = size_ + page;
  void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  if (::mprotect(p, page, PROT_NONE) != 0) {
    ::munmap(p, mapped_);
    return;
  }
  base_ = p;
  bottom_ = static_cast<char*>(p) + page;
}

FiberStack::~FiberStack() {
  if (base_ != nullptr) ::munmap(base_, mapped_);
}

Fiber::~Fiber() {
#ifdef CONVJIT_FIBER_TSAN
  if (tsan_fiber_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
#endif
}

void Fiber::start(FiberStack* stack, void (*entry)(void*), void* arg) {
  stack_ = stack;
  entry_ = entry;
  arg_ = arg;
  started_ = false;
  finished_ = false;
  ::getcontext(&context_);
  context_.uc_stack.ss_sp = stack->bottom();
  context_.uc_stack.ss_size = stack->size();
  context_.uc_link = nullptr;
  ::makecontext(&context_, &Fiber::trampoline, 0);
#ifdef CONVJIT_FIBER_TSAN
  if (tsan_fiber_ == nullptr) tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

void Fiber::trampoline() {
  Fiber* self = t_starting;
#ifdef CONVJIT_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &self->scheduler_stack_bottom_,
                                  &self->scheduler_stack_size_);
#endif
  self->entry_(self->arg_);
  self->finished_ = true;
  self->switch_to_scheduler(/*finishing=*/true);
  std::abort();  // a finished fiber is never resumed
}

void Fiber::resume() {
  if (!started_) {
    started_ = true;
    t_starting = this;
  }
#ifdef CONVJIT_FIBER_TSAN
  tsan_scheduler_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
#ifdef CONVJIT_FIBER_ASAN
  void* scheduler_fake = nullptr;
  __sanitizer_start_switch_fiber(&scheduler_fake, stack_->bottom(), stack_->size());
#endif
  ::swapcontext(&scheduler_, &context_);
#ifdef CONVJIT_FIBER_ASAN
  __sanitizer_finish_switch_fiber(scheduler_fake, nullptr, nullptr);
#endif
}

void Fiber::yield() { switch_to_scheduler(/*finishing=*/false); }

void Fiber::switch_to_scheduler(bool finishing) {
#ifdef CONVJIT_FIBER_TSAN
  __tsan_switch_to_fiber(tsan_scheduler_, 0);
#endif
#ifdef CONVJIT_FIBER_ASAN
  __sanitizer_start_switch_fiber(finishing ? nullptr : &fake_stack_, scheduler_stack_bottom_,
                                 scheduler_stack_size_);
#else
  (void)finishing;
#endif
  ::swapcontext(&context_, &scheduler_);
#ifdef CONVJIT_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_, &scheduler_stack_bottom_, &scheduler_stack_size_);
#endif
}

}  // namespace convjit::runtime::interpret
