#include "tracer/file_locks.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hangtrace {
namespace {

// This architecture's numbers of the calls that wait for a lock.
#if defined(__x86_64__)
constexpr long kFcntl = 72, kFlock = 73;
#elif defined(__aarch64__)
constexpr long kFcntl = 25, kFlock = 32;
#else
constexpr long kFcntl = -1, kFlock = -1;
#endif
// fcntl's waiting commands: F_SETLKW, F_OFD_SETLKW.
constexpr long kSetLkW = 7, kOfdSetLkW = 38;

}  // namespace

// With stdio only: the runtime reads this in the traced process too
// (stacks.cc), where hangtrace brings no iostreams.
LockWait FindLockWait(int pid, const std::string& syscall_line) {
  LockWait out;
  long nr = -1;
  unsigned long fd = 0, cmd = 0;
  if (sscanf(syscall_line.c_str(), "%ld %lx %lx", &nr, &fd, &cmd) != 3) return out;
  if (nr < 0 || !(nr == kFlock || (nr == kFcntl && (cmd == kSetLkW || cmd == kOfdSetLkW)))) return out;
  const std::string link = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  struct stat st;
  if (stat(link.c_str(), &st) != 0) return out;
  char target[4096];
  const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
  if (n > 0) out.file.assign(target, size_t(n));
  char key[64];
  snprintf(key, sizeof(key), "%02x:%02x:%lu", major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino);
  // "1: POSIX  ADVISORY  WRITE 1234 08:02:131074 0 EOF"; a waiter's line
  // has "->" after the number.
  FILE* locks = fopen("/proc/locks", "re");
  if (!locks) return out;
  char line[512];
  while (fgets(line, sizeof(line), locks)) {
    char f[6][64];
    if (sscanf(line, "%63s %63s %63s %63s %63s %63s", f[0], f[1], f[2], f[3], f[4], f[5]) != 6) continue;
    if (!strcmp(f[1], "->") || strcmp(f[5], key) != 0) continue;
    const int holder = atoi(f[4]);
    if (holder > 0 && holder != pid) {
      out.holder_pid = holder;
      break;
    }
  }
  fclose(locks);
  return out;
}

}  // namespace hangtrace
