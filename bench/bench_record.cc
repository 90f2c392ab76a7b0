// The record path: one BEGIN+END pair (CallBegin/CallEnd), as every traced
// call pays it, next to its parts, so the figure can be read against its
// floor on the machine at hand. Figures: bench/README.md.
#include <benchmark/benchmark.h>
#include <x86intrin.h>

#include <cstdlib>
#include <string>

#include "tracer/runtime.h"

namespace hangtrace {
namespace {

uint16_t g_call = fmt::kNoCall;

void StartOnce() {
  static bool started = [] {
    Config c;
    c.dir = "/tmp/hangtrace-bench-" + std::to_string(getpid());
    c.job = "bench";
    c.timeout_s = 0;
    c.stacks = false;
    if (!StartRuntime(c) || !Traced()) abort();
    g_call = RegisterCall("bench_call", fmt::Api::kUser, fmt::Op::kOther, 0);
    return true;
  }();
  (void)started;
}

// What every wrapper does around the real call.
void BM_BeginEndPair(benchmark::State& state) {
  StartOnce();
  fmt::Record r{};
  r.call = g_call;
  r.comm = fmt::kNoComm;
  r.peer = fmt::kNoPeer;
  uint64_t n = 0;
  for (auto _ : state) {
    r.seq = ++n;
    Recorded rec = CallBegin(r);
    CallEnd(r, 0, rec);
  }
  benchmark::DoNotOptimize(r);
}
BENCHMARK(BM_BeginEndPair);

// The same with the tracer off (g_trace null): the cost left in an
// untraced process that has the library loaded.
void BM_BeginEndPairUntraced(benchmark::State& state) {
  fmt::Record r{};
  ThreadState saved = t_thread;
  t_thread.slot = nullptr;
  t_thread.generation = __atomic_load_n(&g_generation, __ATOMIC_RELAXED);
  for (auto _ : state) {
    Recorded rec = CallBegin(r);
    CallEnd(r, 0, rec);
    benchmark::DoNotOptimize(rec);
  }
  t_thread = saved;
}
BENCHMARK(BM_BeginEndPairUntraced);

// The floor: the two clock reads a pair needs.
void BM_TwoClockReads(benchmark::State& state) {
  StartOnce();
  for (auto _ : state) {
    benchmark::DoNotOptimize(NowTicks());
    benchmark::DoNotOptimize(NowTicks());
  }
}
BENCHMARK(BM_TwoClockReads);

void BM_TwoVdsoMonotonicReads(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(MonotonicNs());
    benchmark::DoNotOptimize(MonotonicNs());
  }
}
BENCHMARK(BM_TwoVdsoMonotonicReads);

}  // namespace
}  // namespace hangtrace

BENCHMARK_MAIN();
