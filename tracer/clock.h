// The record path's only clock read.
//
// On x86-64 with an invariant TSC (constant_tsc + nonstop_tsc) a record
// carries raw TSC ticks: one `rdtsc`, no syscall, no vDSO page walk. The
// runtime's background thread publishes the (ticks, monotonic, realtime)
// reference and the tick rate in the file's ClockInfo, so readers convert.
// Elsewhere ticks are CLOCK_MONOTONIC nanoseconds (vDSO).
#pragma once

#include <time.h>

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

// Hidden, as tracer/runtime.h: reached directly from the wrappers.
#pragma GCC visibility push(hidden)
namespace hangtrace {

// Set once at start-up by the runtime: true when ticks are TSC cycles.
extern bool g_clock_is_tsc;

inline int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

__attribute__((always_inline)) inline uint64_t NowTicks() {
#if defined(__x86_64__)
  if (__builtin_expect(g_clock_is_tsc, 1)) return __rdtsc();
#endif
  return uint64_t(MonotonicNs());
}

// The record clock where the caller knows it is the TSC
// (ThreadState::fast_generation): no test of g_clock_is_tsc.
__attribute__((always_inline)) inline uint64_t TscTicks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return NowTicks();
#endif
}

// True when this CPU's TSC is invariant and usable as the record clock.
bool DetectInvariantTsc();

}  // namespace hangtrace
#pragma GCC visibility pop
