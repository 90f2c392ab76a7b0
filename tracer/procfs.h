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

struct ProcStat {
  char state = '?';         // R, S, D, T, t, Z, ...
  int32_t ppid = 0;         // field 4
  uint64_t start_time = 0;  // field 22: clock ticks since boot
};
// /proc/<pid>/stat (pid 0: this process). False when the process is gone.
bool ReadProcStat(pid_t pid, ProcStat* out);

// What a thread has run, in clock ticks: in user mode and in the kernel
// (/proc/PID/task/TID/stat fields 14 and 15; pid 0: this process).
struct ThreadCpu {
  uint64_t user = 0, kernel = 0;
};
bool ReadThreadCpu(pid_t pid, int tid, ThreadCpu* out);

// Whether a thread that /proc called running at every look of a window
// (from `first` to `last`) may be interrupted (signalled, or stopped by
// ptrace): only when it ran in user mode during the window. A thread that
// runs only in the kernel (a long read of a file or a device, getrandom,
// a large write) would see the signal inside its call and return a short
// count; one that did not run at all is not known to be anywhere safe.
// An MPI rank spinning in its progress loop spends most of its time in
// the kernel too (sched_yield, beside oversubscribed ranks: 85% measured),
// but also runs in user mode, where its stack is what a hang report needs:
// up to nine kernel ticks for one of user mode pass. What remains is a
// thread that mixes user-mode work with long kernel calls: the signal may
// land in one (docs/DUMP.md says so). The one place this is decided
// (tracer/stacks.cc inside the process, dump/native_stacks.cc from outside).
inline bool SafeToInterrupt(const ThreadCpu& first, const ThreadCpu& last) {
  const uint64_t user = last.user - first.user, kernel = last.kernel - first.kernel;
  return user > 0 && kernel <= 9 * user;
}
// How long and how often a capture looks at a running thread before it
// decides (SafeToInterrupt): the clock's ticks are 10 ms, so a thread that
// runs shows some of them in 0.2 s.
inline constexpr int kRunningLooks = 40;
inline constexpr int kRunningLookGapUs = 5000;

// /proc/sys/kernel/random/boot_id as 16 bytes (zeros when unreadable).
void ReadBootId(uint8_t out[16]);

}  // namespace hangtrace
