// Whose file lock a blocked thread waits for: a thread in fcntl(F_SETLKW)
// or flock() names the file by its descriptor (/proc/PID/task/TID/syscall);
// /proc/locks names the process that holds a lock on that file. A rank
// waiting for a lock another rank holds is an edge of the wait-for graph.
#pragma once

#include <string>

namespace hangtrace {

struct LockWait {
  int holder_pid = 0;   // 0: not a lock wait, or no holder found
  std::string file;     // the file, as /proc/PID/fd/N links to it
};

// `syscall_line` is the whole of /proc/PID/task/TID/syscall ("72 0x3 0x7
// ..."). Reads /proc/PID/fd and /proc/locks; never blocks.
LockWait FindLockWait(int pid, const std::string& syscall_line);

}  // namespace hangtrace
