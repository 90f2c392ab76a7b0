#include "dump/file_locks.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

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

LockWait FindLockWait(int pid, const std::string& syscall_line) {
  LockWait out;
  std::istringstream in(syscall_line);
  std::string nr_text, fd_text, cmd_text;
  if (!(in >> nr_text >> fd_text >> cmd_text)) return out;
  const long nr = strtol(nr_text.c_str(), nullptr, 10);
  const long fd = strtol(fd_text.c_str(), nullptr, 16);
  const long cmd = strtol(cmd_text.c_str(), nullptr, 16);
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
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream l(line);
    std::vector<std::string> f;
    for (std::string w; l >> w;) f.push_back(w);
    if (f.size() < 6 || f[1] == "->") continue;
    if (f[5] != key) continue;
    const int holder = atoi(f[4].c_str());
    if (holder > 0 && holder != pid) {
      out.holder_pid = holder;
      break;
    }
  }
  return out;
}

}  // namespace hangtrace
