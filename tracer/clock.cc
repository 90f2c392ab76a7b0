#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <unistd.h>

#include <cstring>

#include "tracer/clock.h"
#include "tracer/internal.h"
#include "tracer/lane.h"

namespace hangtrace {

bool DetectInvariantTsc() {
#if defined(__x86_64__)
  // CPUID 0x80000007, EDX bit 8: the invariant TSC (constant rate, running
  // in every C- and P-state), the bit the kernel reads for its constant_tsc
  // and nonstop_tsc flags. A hypervisor that cannot keep it so hides it.
  // Read here rather than from /proc/cpuinfo, which the kernel formats for
  // every CPU on each read: 0.2 ms of every traced process's start on two
  // CPUs, more on a node with hundreds.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) || eax < 0x80000007u) return false;
  if (!__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx)) return false;
  return (edx >> 8) & 1u;
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
