// Runtime pieces shared between the files of tracer/ and nothing else (what
// the wrappers of interpose/ use is in tracer/runtime.h).
#pragma once

#include <signal.h>

#include <cstddef>
#include <string>

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

// Loads libunwind (stacks.cc) for the stack recorders; false with the reason
// when it cannot be (the stacks captured then hold no frames).
bool LoadUnwinder(std::string* err);

// Signals (signals.cc, handlers in stacks.cc).
int StackSignal();  // the stack-capture signal
void StackSignalHandler(int sig, siginfo_t* info, void* uc);
void FatalSignalHandler(int sig, siginfo_t* info, void* uc);
void TermSignalHandler(int sig, siginfo_t* info, void* uc);
// Hands `sig` to the disposition the runtime's handler stands in front of.
void ChainToPrevious(int sig, siginfo_t* info, void* uc, bool resend);
// The kernel's disposition of `sig` now (not the program's view).
int CurrentSigaction(int sig, struct sigaction* out);

// The trace file (trace_file.cc).
struct Config;
struct TraceFile;

// The automatic report (auto_report.cc): the node's round of `hangtrace
// auto-report` reports for the job.
bool AutoReportOn();
// Each background tick: `fired` (a call past the timeout was flagged now,
// or, with `blocked_only`, the process was found blocked outside any traced
// call: a round it starts says nothing when the job moved), `idle` (no
// traced call in flight, and none for the timeout). True when
// the automatic report covers this fire (the watchdog prints no line per
// rank); false when it is off or cannot be made (its folder refused, full,
// read-only: said once), and the watchdog's lines are printed.
// blocked_why: the round is wanted because the process was found blocked
// outside traced calls (no call fired), and what was found; null otherwise.
bool AutoReportTick(TraceFile* f, bool fired, bool idle, double timeout_s, const char* blocked_why = nullptr);
// The round this process started as blocked found no hang (background.cc):
// it may find itself blocked again, a timeout later.
void RearmBlockedProbe();
// The process exits: a report round it started and that is not done yet
// gets one line saying where its report will be (no one is left to print it).
void AutoReportAtExit();
// Copies `src` into a field of `cap` bytes: at most cap - 1 of it, and a NUL.
void CopyString(char* dst, size_t cap, const char* src);
// Whether the file is named at start (a launcher's rank, HANGTRACE_KEEP)
// rather than at the process's first traced call.
bool NameAtStart(const Config& c);
bool LaunchedRank();
// Lays out and maps a new trace file into `f` (anonymous unless `named`);
// false with the reason in `err`.
bool CreateTraceFile(const Config& c, TraceFile* f, bool named, std::string* err);
// The file's name within its folder (after NameTraceFile).
const char* TraceFileBaseName(const TraceFile* f);

}  // namespace hangtrace
