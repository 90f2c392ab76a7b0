// Facts about processes from /proc, shared by the runtime (about itself) and
// the readers (about the process that wrote a file). Async-signal-safe: raw
// open/read, no allocation.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace hangtrace {

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
