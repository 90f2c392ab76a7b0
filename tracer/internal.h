// Runtime pieces shared between the files of tracer/ and nothing else (what
// the wrappers of interpose/ use is in tracer/runtime.h).
#pragma once

#include "tracer/format.h"

namespace hangtrace {

// Clock block (clock.cc). InitClock takes the reference triple; UpdateClock
// refines ticks_hz from the time elapsed since. Both are async-signal-safe.
void InitClock(fmt::ClockInfo* c);
void UpdateClock(fmt::ClockInfo* c);

// The background thread: heartbeat, clock calibration, watchdog.
void StartBackgroundThread();
// Whether `tid` is one of the tracer's own threads (left out of captures).
inline constexpr int kMaxTracerThreads = 8;
bool IsTracerThread(int tid);

// An alternate signal stack for the calling thread (stacks.cc), so that a
// stack overflow's SIGSEGV can still run the fatal-signal recorder. Left
// alone when the thread has one already; ReleaseAltStack at thread exit.
void EnsureAltStack();
void ReleaseAltStack();

}  // namespace hangtrace
