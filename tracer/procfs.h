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

// /proc/sys/kernel/random/boot_id as 16 bytes (zeros when unreadable).
void ReadBootId(uint8_t out[16]);

}  // namespace hangtrace
