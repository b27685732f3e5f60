// Happens-before annotations for ThreadSanitizer; no-ops in other builds.
//
// Debian's gRPC is not built with -fsanitize=thread, so TSan cannot see the
// synchronisation gRPC performs when it hands one of our objects from the
// thread that started an operation to the thread that runs its callback
// (gRPC documents the order: a reactor's callbacks run one at a time, OnDone
// last; a server interceptor's hooks run one after another and before it is
// destroyed; a client call's completion runs after the call was started).
// Code that relies on such an order says so with a pair of annotations on the
// same address:
//   HappensBefore(obj);   // before handing `obj` to gRPC / at the end of a callback
//   HappensAfter(obj);    // first thing in the callback that receives it
// Everything done before HappensBefore(obj) on one thread is then ordered, for
// TSan, before everything after a later HappensAfter(obj) on another. They
// model gRPC's guarantee only; shared state of our own keeps its own mutexes.
#ifndef VOCABD_LIB_CORE_HAPPENS_BEFORE_H_
#define VOCABD_LIB_CORE_HAPPENS_BEFORE_H_

#if defined(__SANITIZE_THREAD__)
#define VOCABD_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VOCABD_TSAN 1
#endif
#endif

#ifdef VOCABD_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace vocabd {

inline void HappensBefore(const void* addr) {
#ifdef VOCABD_TSAN
  __tsan_release(const_cast<void*>(addr));
#else
  (void)addr;
#endif
}

inline void HappensAfter(const void* addr) {
#ifdef VOCABD_TSAN
  __tsan_acquire(const_cast<void*>(addr));
#else
  (void)addr;
#endif
}

// A gRPC callback of `obj` (a reactor, interceptor, ...): HappensAfter(obj)
// on entry, HappensBefore(obj) on exit, so that consecutive callbacks of one
// object are ordered for TSan the way gRPC runs them.
class CallbackScope {
 public:
  explicit CallbackScope(const void* obj) : obj_(obj) { HappensAfter(obj_); }
  ~CallbackScope() { HappensBefore(obj_); }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

 private:
  const void* obj_;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_HAPPENS_BEFORE_H_
