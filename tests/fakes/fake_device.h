// FAKE GPU for tests only: a device emulated by host threads, behind the
// fake libcuda.so.1, libcudart.so and libamdhip64.so of this folder. Each
// stream is a worker thread running its queue in order; kernels sleep for
// their duration, or forever ("a kernel that never finishes"); events fire
// when the stream reaches them. Device memory is host memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace fake {

struct Stream;

// Handles as the real APIs spell them: 0 and 1 the legacy default stream,
// 2 the calling thread's per-thread stream; a null handle from a _ptsz /
// _spt variant is also the per-thread stream.
Stream* ResolveStream(uintptr_t handle, bool per_thread);
Stream* NewStream();
uint64_t StreamId(const Stream* s);  // 1: legacy default, then in creation order
void Enqueue(Stream* s, std::function<void()> work);
bool Idle(Stream* s);
void Drain(Stream* s);  // blocks until the stream is idle
void DrainAll();

struct Event {
  std::atomic<int> state{0};  // 0: fired (or never recorded), 1: pending
};
void RecordEvent(Event* e, Stream* s);

// A kernel: sleeps `ms` (never returns when ms < 0). Every launch is
// remembered, so tests can check which stream a launch went to.
struct Kernel {
  std::string name;
  int ms = 0;
};
void Launch(const Kernel* k, Stream* s);
uint64_t LastLaunchStream();      // StreamId of the last launch
uint64_t Launches();

}  // namespace fake
