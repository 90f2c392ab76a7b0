// Facts about processes from /proc, shared by the runtime (about itself) and
// the readers (about the process that wrote a file). Async-signal-safe: raw
// open/read, no allocation.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "tracer/format.h"

namespace hangtrace {

// The environment variables a launcher gives a rank its rank and world size
// in, most specific first: under srun+Open MPI both OMPI_ and SLURM_ are set
// and agree; RANK is the least specific (torchrun, but also user code). Read
// by the runtime from its own environment, by the dump from
// /proc/PID/environ of a process nobody traced.
struct RankVariable {
  const char* rank;
  const char* size;
  fmt::RankSource source;
};
inline constexpr RankVariable kRankVariables[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", fmt::RankSource::kEnvOmpi},
    {"PMI_RANK", "PMI_SIZE", fmt::RankSource::kEnvPmi},
    {"PMIX_RANK", "PMIX_SIZE", fmt::RankSource::kEnvPmix},
    {"SLURM_PROCID", "SLURM_NTASKS", fmt::RankSource::kEnvSlurm},
    {"RANK", "WORLD_SIZE", fmt::RankSource::kEnvTorch},
};

// Reads a small file into buf (NUL-terminated); returns bytes read or -1.
ssize_t ReadSmallFile(const char* path, char* buf, size_t cap);

// Where thread `tid` of this process is, from /proc/self/task/TID/syscall:
// running, or blocked in system call `nr` (-1: in none) with its stack and
// program counters. Read by the stack capture (stacks.cc) and by the
// watchdog's look at a process outside traced calls (background.cc).
struct TaskState {
  bool read = false;     // the file could be read
  bool running = false;
  long nr = -1;          // the system call; -1: blocked in none
  uint64_t sp = 0, pc = 0;
  char line[160] = {};   // as read: a second look compares it whole
};
TaskState ReadTaskState(int tid);

struct ProcStat {
  char state = '?';         // R, S, D, T, t, Z, ...
  int32_t ppid = 0;         // field 4
  uint64_t start_time = 0;  // field 22: clock ticks since boot
};
// /proc/<pid>/stat (pid 0: this process). False when the process is gone.
bool ReadProcStat(pid_t pid, ProcStat* out);

// What a thread has run, in clock ticks: in user mode and in the kernel
// (/proc/PID/task/TID/stat fields 14 and 15; pid 0: this process; tid 0:
// the whole process, every thread it ever ran included).
struct ThreadCpu {
  uint64_t user = 0, kernel = 0;
  // Fields 16 and 17: what its children that were waited for ran (the
  // process's, also in a thread's file).
  uint64_t waited_children = 0;
  char state = '?';  // field 3: R running or runnable, S sleeping, D uninterruptible, T, Z, ...
};
bool ReadThreadCpu(pid_t pid, int tid, ThreadCpu* out);

// Whether a thread that /proc called running at every look of a window
// (from `first` to `last`) may be interrupted (signalled, or stopped by
// ptrace): only when it ran in user mode during the window. A thread that
// runs only in the kernel (a long read of a file or a device, getrandom,
// a large write) would see the interruption inside its call and return a
// short count; one that did not run at all is not known to be anywhere.
// The split is the kernel's: its timer ticks (4 ms) sample where the
// thread is, and stat reports its exact run time split in that ratio, in
// 10 ms units. A thread in one long call is never sampled in user mode.
// An MPI rank spinning in its progress loop spends most of its time in
// the kernel too (sched_yield beside oversubscribed ranks: 80 to 90%
// measured, 89% beside busy processes), but also in user mode, where its
// stack is what a hang report needs: up to 19 kernel ticks for one in user
// mode pass. Counting how often it ran (schedstat's slices) does not tell:
// a long read is cut into short slices by every thread that wakes beside it. What remains is a thread
// that mixes user-mode work with long kernel calls: the interruption may
// land in one (docs/DUMP.md says so). The one place this is decided
// (tracer/stacks.cc inside the process, dump/native_stacks.cc from outside).
inline bool SafeToInterrupt(const ThreadCpu& first, const ThreadCpu& last) {
  const uint64_t user = last.user - first.user, kernel = last.kernel - first.kernel;
  return user > 0 && kernel <= 19 * user;
}
// How often and how long a capture looks at a running thread before it
// decides: as soon as it is safe to interrupt, or has run 40 ticks in the
// kernel (0.4 s on a CPU) without being so, else at the last look, 1 s on
// (a rank starved beside busy processes may show no tick at all).
inline constexpr uint64_t kTicksToCallItKernelBound = 40;
inline constexpr int kMaxRunningLooks = 200;
inline constexpr int kRunningLookGapUs = 5000;
inline bool EnoughToDecide(const ThreadCpu& first, const ThreadCpu& last) {
  return SafeToInterrupt(first, last) || last.kernel - first.kernel >= kTicksToCallItKernelBound;
}
// The verdict on a thread running at this look, `now` its CPU time (when
// `known`: read at both ends), `last` whether this is the last look.
enum class RunningVerdict { kLookAgain, kInterrupt, kLeave };
inline RunningVerdict JudgeRunning(bool known, bool last, const ThreadCpu& first, const ThreadCpu& now) {
  if (known && !last && !EnoughToDecide(first, now)) return RunningVerdict::kLookAgain;
  return known && SafeToInterrupt(first, now) ? RunningVerdict::kInterrupt : RunningVerdict::kLeave;
}

// /proc/sys/kernel/random/boot_id as 16 bytes (zeros when unreadable).
void ReadBootId(uint8_t out[16]);

}  // namespace hangtrace
