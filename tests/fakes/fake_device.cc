// FAKE GPU for tests only (see fake_device.h).
#include "fake_device.h"

#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace fake {

struct Stream {
  uint64_t id = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  int busy = 0;  // queued + running
};

namespace {

std::mutex g_streams_mu;
std::vector<Stream*> g_streams;  // never freed: workers may block forever
std::atomic<uint64_t> g_last_launch{0};
std::atomic<uint64_t> g_launches{0};

void Worker(Stream* s) {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait(lock, [s] { return !s->queue.empty(); });
      work = std::move(s->queue.front());
      s->queue.pop_front();
    }
    work();
    std::lock_guard<std::mutex> lock(s->mu);
    --s->busy;
    s->cv.notify_all();
  }
}

Stream* Make() {
  auto* s = new Stream();
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    s->id = g_streams.size() + 1;
    g_streams.push_back(s);
  }
  std::thread(Worker, s).detach();
  return s;
}

}  // namespace

Stream* NewStream() { return Make(); }

Stream* ResolveStream(uintptr_t handle, bool per_thread) {
  static Stream* legacy = Make();
  thread_local Stream* mine = nullptr;
  if (handle == 2 || (handle == 0 && per_thread)) {
    if (!mine) mine = Make();
    return mine;
  }
  if (handle == 0 || handle == 1) return legacy;
  return reinterpret_cast<Stream*>(handle);
}

uint64_t StreamId(const Stream* s) { return s->id; }

void Enqueue(Stream* s, std::function<void()> work) {
  std::lock_guard<std::mutex> lock(s->mu);
  ++s->busy;
  s->queue.push_back(std::move(work));
  s->cv.notify_all();
}

bool Idle(Stream* s) {
  std::lock_guard<std::mutex> lock(s->mu);
  return s->busy == 0;
}

void Drain(Stream* s) {
  std::unique_lock<std::mutex> lock(s->mu);
  s->cv.wait(lock, [s] { return s->busy == 0; });
}

void DrainAll() {
  std::vector<Stream*> all;
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    all = g_streams;
  }
  for (Stream* s : all) Drain(s);
}

void RecordEvent(Event* e, Stream* s) {
  e->state.store(1);
  Enqueue(s, [e] { e->state.store(0); });
}

void Launch(const Kernel* k, Stream* s) {
  g_last_launch.store(s->id);
  g_launches.fetch_add(1);
  int ms = k ? k->ms : 0;
  Enqueue(s, [ms] {
    if (ms < 0) {
      for (;;) pause();  // the kernel that never finishes
    }
    if (ms > 0) usleep(useconds_t(ms) * 1000);
  });
}

uint64_t LastLaunchStream() { return g_last_launch.load(); }
uint64_t Launches() { return g_launches.load(); }

}  // namespace fake
