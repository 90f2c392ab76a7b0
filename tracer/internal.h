// Runtime pieces shared between the files of tracer/ and nothing else.
#pragma once

#include "tracer/format.h"

namespace hangtrace {

// Clock block (clock.cc). InitClock takes the reference triple; UpdateClock
// refines ticks_hz from the time elapsed since. Both are async-signal-safe.
void InitClock(fmt::ClockInfo* c);
void UpdateClock(fmt::ClockInfo* c);

// The background thread: heartbeat, clock calibration, watchdog.
void StartBackgroundThread();
// Starts a detached thread of the tracer's own with every signal blocked
// (signals meant for the program never land there); false on failure.
bool StartTracerThread(void* (*main)(void*));
// Whether `tid` is one of those threads (they are left out of captures).
inline constexpr int kMaxTracerThreads = 8;
bool IsTracerThread(int tid);

// The stack-capture signal and the fatal-signal recorders (stacks.cc).
void InstallSignalHandlers();

// One line on stderr with write(2); never blocks on stdio locks.
void WriteStderrLine(const char* line);

}  // namespace hangtrace
