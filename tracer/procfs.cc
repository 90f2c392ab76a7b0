#include "tracer/procfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hangtrace {

ssize_t ReadSmallFile(const char* path, char* buf, size_t cap) {
  if (cap == 0) return -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t got = 0;
  while (got < cap - 1) {
    ssize_t n = read(fd, buf + got, cap - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  close(fd);
  buf[got] = '\0';
  return ssize_t(got);
}

TaskState ReadTaskState(int tid) {
  TaskState t;
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
  const ssize_t n = ReadSmallFile(path, t.line, sizeof(t.line));
  if (n <= 0) return t;
  if (!strncmp(t.line, "running", 7)) return t.read = t.running = true, t;
  // The last two fields are SP and PC, whatever comes before them.
  char* end = nullptr;
  t.nr = strtol(t.line, &end, 10);
  uint64_t fields[8];
  int count = 0;
  for (const char* p = end; count < 8;) {
    while (*p == ' ') ++p;
    if (*p == '\0' || *p == '\n') break;
    char* next = nullptr;
    fields[count++] = strtoull(p, &next, 16);
    if (next == p) break;
    p = next;
  }
  if (count < 2) return t;
  t.sp = fields[count - 2];
  t.pc = fields[count - 1];
  t.read = t.sp != 0 && t.pc != 0;
  return t;
}

bool ReadProcStat(pid_t pid, ProcStat* out) {
  char path[64], buf[1024];
  if (pid) snprintf(path, sizeof(path), "/proc/%d/stat", int(pid));
  else snprintf(path, sizeof(path), "/proc/self/stat");
  if (ReadSmallFile(path, buf, sizeof(buf)) <= 0) return false;
  const char* p = strrchr(buf, ')');  // comm may contain spaces and ')'
  if (!p || p[1] != ' ') return false;
  p += 2;
  out->state = *p;
  out->ppid = p[1] == ' ' ? int32_t(strtol(p + 2, nullptr, 10)) : 0;
  for (int field = 3; *p && field < 22; ++p) {
    if (*p == ' ') ++field;
  }
  out->start_time = strtoull(p, nullptr, 10);
  return true;
}

bool ReadThreadCpu(pid_t pid, int tid, ThreadCpu* out) {
  char path[96], buf[1024];
  if (tid == 0 && pid) snprintf(path, sizeof(path), "/proc/%d/stat", int(pid));
  else if (tid == 0) snprintf(path, sizeof(path), "/proc/self/stat");
  else if (pid) snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", int(pid), tid);
  else snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
  if (ReadSmallFile(path, buf, sizeof(buf)) <= 0) return false;
  const char* p = strrchr(buf, ')');  // comm may contain spaces and ')'
  if (!p || p[1] != ' ') return false;
  p += 2;  // field 3
  out->state = *p;
  for (int field = 3; *p && field < 14; ++p) {
    if (*p == ' ') ++field;
  }
  char* end = nullptr;
  out->user = strtoull(p, &end, 10);
  out->kernel = end && *end == ' ' ? strtoull(end + 1, &end, 10) : 0;
  out->waited_children = 0;
  for (int field = 16; field <= 17 && end && *end == ' '; ++field) out->waited_children += strtoull(end + 1, &end, 10);
  return true;
}

void ReadBootId(uint8_t out[16]) {
  char buf[64];
  memset(out, 0, 16);
  if (ReadSmallFile("/proc/sys/kernel/random/boot_id", buf, sizeof(buf)) <= 0) return;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int k = 0;
  for (size_t i = 0; buf[i] && buf[i + 1] && k < 16; ++i) {
    int hi = hex(buf[i]), lo = hex(buf[i + 1]);
    if (hi < 0 || lo < 0) continue;
    out[k++] = uint8_t(hi << 4 | lo);
    ++i;
  }
}

}  // namespace hangtrace
