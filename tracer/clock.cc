#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "tracer/clock.h"
#include "tracer/internal.h"
#include "tracer/lane.h"

namespace hangtrace {

bool DetectInvariantTsc() {
#if defined(__x86_64__)
  // The kernel's view: it only lists these flags when they hold on every CPU.
  int fd = open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8192];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* flags = strstr(buf, "\nflags");
  if (!flags) return false;
  const char* eol = strchr(flags + 1, '\n');
  std::string line(flags, eol ? size_t(eol - flags) : strlen(flags));
  return line.find(" constant_tsc") != std::string::npos &&
         line.find(" nonstop_tsc") != std::string::npos;
#else
  return false;
#endif
}

void InitClock(fmt::ClockInfo* c) {
  SeqBegin(&c->version);
  c->kind = uint32_t(g_clock_is_tsc ? fmt::ClockKind::kTsc : fmt::ClockKind::kMonotonicNs);
  // Take the triple as close together as we can: ticks between two reads.
  uint64_t t0 = NowTicks();
  c->ref_mono_ns = MonotonicNs();
  c->ref_real_ns = RealtimeNs();
  uint64_t t1 = NowTicks();
  c->ref_ticks = t0 + (t1 - t0) / 2;
  c->ticks_hz = g_clock_is_tsc ? 0 : 1000000000ull;
  c->start_ticks = c->ref_ticks;
  SeqEnd(&c->version);
}

void UpdateClock(fmt::ClockInfo* c) {
  if (c->kind != uint32_t(fmt::ClockKind::kTsc)) return;
  uint64_t ticks = NowTicks();
  int64_t mono = MonotonicNs();
  int64_t dns = mono - c->ref_mono_ns;
  // Under 10 us the two reads' own jitter dominates; the background thread
  // refines the rate from longer baselines later.
  if (dns < 10000) return;
  unsigned __int128 hz = (unsigned __int128)(ticks - c->ref_ticks) * 1000000000u / uint64_t(dns);
  SeqBegin(&c->version);
  c->ticks_hz = uint64_t(hz);
  SeqEnd(&c->version);
}

}  // namespace hangtrace
