// The API-neutral half of the GPU wrappers: see gpu_support.h.
#include "interpose/gpu_support.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "tracer/hash.h"

namespace hangtrace::gpu {
namespace {

// --- the symbol table ---------------------------------------------------------------

// The generated tables (and the lookup wrappers'), known from start-up,
// before any lookup: a few words written, so a process that never calls
// touches no more of this library's memory than that.
struct SymbolTable {
  const GpuSymbol* symbols;
  int count;
};
constexpr int kMaxTables = 8;
SymbolTable g_tables[kMaxTables];
int g_table_count = 0;

// The libraries a real function may live in when RTLD_NEXT cannot see it
// (loaded with RTLD_LOCAL, as PyTorch wheels load NCCL).
const char* const kNcclLibs[] = {"libnccl.so.2", "librccl.so.1", "libnccl.so", "librccl.so", nullptr};
const char* const kCudaLibs[] = {"libcuda.so.1", "libcudart.so.13", "libcudart.so.12", "libcudart.so", nullptr};
const char* const kHipLibs[] = {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so", nullptr};

const char* const* LibsOf(fmt::Api api) {
  switch (api) {
    case fmt::Api::kNccl: return kNcclLibs;
    case fmt::Api::kHip: return kHipLibs;
    default: return kCudaLibs;
  }
}

// `name` in one of `api`'s libraries that is already loaded (RTLD_NOLOAD:
// nothing is loaded here), RTLD_LOCAL ones included.
void* FromLoadedLibrary(const char* name, fmt::Api api);

// --- groups (one per thread, as NCCL's are) ---------------------------------------

constexpr int kMaxGroupOps = 1024;
struct GroupState {
  int depth = 0;
  uint32_t id = 0;
  int count = 0;
  fmt::Record* ops = nullptr;  // allocated at the thread's first group
};
thread_local GroupState t_group;
uint32_t g_group_counter = 0;

// --- device completion --------------------------------------------------------------

enum SlotState : uint32_t { kFree = 0, kClaimed = 1, kPending = 2 };
struct TrackSlot {
  uint32_t state;
  void* event;      // from its pool's backend
  fmt::Record rec;  // the DEVICE_PENDING record
};

constexpr int kMaxPools = 16;
constexpr uint32_t kPoolSize = 1024;
struct Pool {
  uint64_t context;  // 0: unused
  const Backend* backend;
  uint32_t cursor;
  TrackSlot* slots;
};
Pool g_pools[kMaxPools];
int g_pool_count = 0;  // published with release after a pool is complete
pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
uint32_t g_track_ids = 0;
bool g_poller_started = false;
bool g_device_dead = false;  // after fork: the child has no device

const Backend* BackendFor(Device api) {
  if (api == Device::Hip) return HipBackend();
  if (api == Device::Cuda) return CudaBackend();
  // NCCL: RCCL runs on HIP; NCCL on CUDA.
  if (const Backend* b = CudaBackend()) return b;
  return HipBackend();
}

void SleepNs(long ns) {
  struct timespec ts = {ns / 1000000000, ns % 1000000000};
  nanosleep(&ts, nullptr);
}

void* PollerMain(void*) {
  prctl(PR_SET_NAME, "hangtrace-dev", 0, 0, 0);
  for (;;) {
    bool any = false;
    int pools = __atomic_load_n(&g_pool_count, __ATOMIC_ACQUIRE);
    for (int p = 0; p < pools; ++p) {
      Pool& pool = g_pools[p];
      for (uint32_t i = 0; i < kPoolSize; ++i) {
        TrackSlot& s = pool.slots[i];
        if (__atomic_load_n(&s.state, __ATOMIC_ACQUIRE) != kPending) continue;
        any = true;
        int q = pool.backend->query_event(s.event);  // may block on a broken device: no lock held
        if (q == 1) continue;
        if (q == 0) {
          fmt::Record done = s.rec;
          RecordEvent(done, fmt::EventKind::kComplete);
        }
        __atomic_store_n(&s.state, kFree, __ATOMIC_RELEASE);
      }
    }
    if (!g_trace) return nullptr;
    SleepNs(any ? 1000000 : 5000000);
  }
}

void StartPoller() {
  if (!StartTracerThread(PollerMain)) {
    WriteStderrLine("hangtrace: cannot start the device poller thread; device completion is not tracked");
  } else {
    __atomic_fetch_or(&g_trace->header->features, uint64_t(fmt::kFeatDeviceEvents), __ATOMIC_RELEASE);
  }
}

// The pool of the current context, created (with all its events) the first
// time the context is seen: while the device still works, never later.
Pool* PoolFor(const Backend* b) {
  uint64_t ctx = b->context();
  if (!ctx) return nullptr;
  int n = __atomic_load_n(&g_pool_count, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; ++i) {
    if (g_pools[i].context == ctx && g_pools[i].backend == b) return &g_pools[i];
  }
  pthread_mutex_lock(&g_pool_lock);
  Pool* found = nullptr;
  n = g_pool_count;
  for (int i = 0; i < n && !found; ++i) {
    if (g_pools[i].context == ctx && g_pools[i].backend == b) found = &g_pools[i];
  }
  if (!found && n < kMaxPools) {
    auto* slots = new TrackSlot[kPoolSize]();
    uint32_t made = 0;
    for (; made < kPoolSize; ++made) {
      if (b->create_event(&slots[made].event) != 0) break;
    }
    if (made == kPoolSize) {
      g_pools[n] = Pool{ctx, b, 0, slots};
      __atomic_store_n(&g_pool_count, n + 1, __ATOMIC_RELEASE);
      found = &g_pools[n];
      if (!g_poller_started) {
        g_poller_started = true;
        StartPoller();
      }
    } else {
      WriteStderrLine("hangtrace: cannot create device events; device completion is not tracked here");
      g_device_dead = true;  // events leak: the context is unusable anyway
    }
  }
  pthread_mutex_unlock(&g_pool_lock);
  return found;
}

// Records an event after `r`'s work on its stream and writes DEVICE_PENDING.
void Track(const fmt::Record& r, const Backend* b) {
  if (g_device_dead || !b) return;
  Pool* pool = PoolFor(b);
  if (!pool) return;
  TrackSlot* slot = nullptr;
  for (int tries = 0; tries < 16 && !slot; ++tries) {
    TrackSlot& s = pool->slots[__atomic_fetch_add(&pool->cursor, 1, __ATOMIC_RELAXED) % kPoolSize];
    uint32_t expected = kFree;
    if (__atomic_compare_exchange_n(&s.state, &expected, kClaimed, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      slot = &s;
    }
  }
  if (!slot) {  // a thousand operations in flight: this one goes untracked
    __atomic_fetch_add(&g_trace->header->counters.dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  void* stream = EffectiveStream(r.handle, r.flags & fmt::kRecPtsz);
  if (b->record_event(slot->event, stream) != 0) {
    __atomic_store_n(&slot->state, kFree, __ATOMIC_RELEASE);
    return;
  }
  slot->rec = r;
  slot->rec.result = int32_t(r.aux);  // the call's own aux (kernel name, group id)
  slot->rec.aux = __atomic_add_fetch(&g_track_ids, 1, __ATOMIC_RELAXED);
  slot->rec.flags &= uint8_t(~fmt::kRecInGroup);
  RecordEvent(slot->rec, fmt::EventKind::kDevicePending);
  __atomic_store_n(&slot->state, kPending, __ATOMIC_RELEASE);
}

// Blocking-launch mode: waits for the stream to drain, polling, so the call
// stays open (and visible as the current call) until the device finished
// it. Never while the stream captures a graph: nothing runs then.
void Drain(const fmt::Record& r, const Backend* b) {
  if (!b || g_device_dead) return;
  void* stream = EffectiveStream(r.handle, r.flags & fmt::kRecPtsz);
  if (b->capturing(stream)) return;
  // Short work finishes within microseconds: yield first (a sleep costs the
  // timer slack, 50 us by default), then sleep, longer and longer, up to
  // 1 ms, so a hung operation costs no CPU.
  const int64_t start = MonotonicNs();
  long wait_ns = 50000;
  while (b->query_stream(stream) == 1) {
    if (MonotonicNs() - start < 200000) {
      sched_yield();
      continue;
    }
    SleepNs(wait_ns);
    if (wait_ns < 1000000) wait_ns *= 2;
  }
}

bool TrackColl() { return RuntimeConfig().device_events != DeviceEvents::kOff; }
bool TrackKernels() { return RuntimeConfig().device_events == DeviceEvents::kAll; }
bool BlockColl() {
  BlockingMode m = RuntimeConfig().blocking;
  return m == BlockingMode::kColl || m == BlockingMode::kAll;
}
bool BlockKernels() {
  BlockingMode m = RuntimeConfig().blocking;
  return m == BlockingMode::kKernels || m == BlockingMode::kAll;
}

// --- kernel names ------------------------------------------------------------------------

constexpr size_t kNameCacheSize = 1 << 14;
struct NameSlot {
  uintptr_t key;  // 0: empty
  uint32_t name;
};
NameSlot g_name_cache[kNameCacheSize];

void ForgetDevicesInChild() {
  // CUDA and HIP do not survive fork: the child's copies of the pools refer
  // to a context it does not have, and no poller runs there.
  g_device_dead = true;
  t_group = GroupState{};
}

}  // namespace

// --- symbol table --------------------------------------------------------------------------

void KnowSymbols(const GpuSymbol* table, int count) {
  if (g_table_count < kMaxTables) g_tables[g_table_count++] = {table, count};
  static bool once = false;
  if (!once) {
    once = true;
    pthread_atfork(nullptr, nullptr, ForgetDevicesInChild);
  }
}

void RegisterGpuCalls() {
  for (int t = 0; t < g_table_count; ++t) {
    for (int i = 0; i < g_tables[t].count; ++i) {
      const GpuSymbol& s = g_tables[t].symbols[i];
      if (s.call) *s.call = RegisterCall(s.name, s.api, s.op, s.flags);
    }
  }
}

const GpuSymbol* FindSymbol(const char* name) {
  if (!name) return nullptr;
  // Most lookups are for other libraries' symbols: reject them on the prefix.
  if (strncmp(name, "nccl", 4) && strncmp(name, "cu", 2) && strncmp(name, "hip", 3) && strncmp(name, "__cuda", 6)) {
    return nullptr;
  }
  for (int t = 0; t < g_table_count; ++t) {
    for (int i = 0; i < g_tables[t].count; ++i) {
      if (strcmp(g_tables[t].symbols[i].name, name) == 0) return &g_tables[t].symbols[i];
    }
  }
  return nullptr;
}

void* WrapLookup(const char* name, void* real) {
  const GpuSymbol* s = FindSymbol(name);
  if (!s || !real || real == s->wrapper) return real;
  void* expected = nullptr;
  __atomic_compare_exchange_n(s->real, &expected, real, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  return s->wrapper;
}

namespace {
void* FromLoadedLibrary(const char* name, fmt::Api api) {
  void* p = nullptr;
  for (const char* const* lib = LibsOf(api); !p && *lib; ++lib) {
    if (void* h = dlopen(*lib, RTLD_LAZY | RTLD_NOLOAD)) {
      p = RealDlsym(h, name);
      dlclose(h);  // NOLOAD took a reference; the library stays loaded
    }
  }
  return p;
}
}  // namespace

void* ResolveReal(const GpuSymbol& s) {
  if (void* p = __atomic_load_n(s.real, __ATOMIC_ACQUIRE)) return p;
  void* p = RealDlsym(RTLD_NEXT, s.name);
  if (!p) p = FromLoadedLibrary(s.name, s.api);
  if (!p && s.api == fmt::Api::kNccl) {  // NCCL exports every call again as pnccl*
    std::string alias = std::string("p") + s.name;
    p = RealDlsym(RTLD_NEXT, alias.c_str());
    if (!p) p = FromLoadedLibrary(alias.c_str(), s.api);
  }
  if (p == s.wrapper) p = nullptr;
  if (!p) {
    std::string line = std::string("hangtrace: ") + s.name +
                       " was called but no library defines it (is it linked statically?); the call fails";
    WriteStderrLine(line.c_str());
  }
  return p;
}

void* FindLoaded(const char* name, fmt::Api api) {
  void* p = RealDlsym(RTLD_DEFAULT, name);
  if (!p) p = FromLoadedLibrary(name, api);
  // Our own exported wrapper is not the library's function: ask for the real one.
  if (const GpuSymbol* s = FindSymbol(name); s && p == s->wrapper) p = ResolveReal(*s);
  return p;
}

// --- groups ----------------------------------------------------------------------------------

void GroupOpened() {
  GroupState& g = t_group;
  if (g.depth++ == 0) {
    g.id = __atomic_add_fetch(&g_group_counter, 1, __ATOMIC_RELAXED);
    g.count = 0;
  }
}

void InGroup(fmt::Record& r) {
  if (t_group.depth > 0) {
    r.flags |= fmt::kRecInGroup;
    r.aux = t_group.id;
  }
}

void GroupClosed(bool accepted) {
  GroupState& g = t_group;
  if (g.depth == 0 || --g.depth > 0) return;
  if (!accepted) {
    g.count = 0;
    return;
  }
  const Backend* b = BackendFor(Device::Nccl);
  if (TrackColl()) {
    for (int i = 0; i < g.count; ++i) Track(g.ops[i], b);
  }
  if (BlockColl()) {
    for (int i = 0; i < g.count; ++i) {
      bool seen = false;  // each stream once
      for (int j = 0; j < i && !seen; ++j) seen = g.ops[j].handle == g.ops[i].handle;
      if (!seen) Drain(g.ops[i], b);
    }
  }
  g.count = 0;
}

void NcclEnqueued(const fmt::Record& r) {
  GroupState& g = t_group;
  if (g.depth > 0) {
    if (!g.ops) g.ops = new fmt::Record[kMaxGroupOps];
    if (g.count < kMaxGroupOps) g.ops[g.count++] = r;
    return;
  }
  const Backend* b = BackendFor(Device::Nccl);
  if (TrackColl()) Track(r, b);
  if (BlockColl()) Drain(r, b);
}

// --- kernels ------------------------------------------------------------------------------------

uint32_t CachedName(const void* key, const char* (*lookup)(const void*)) {
  uintptr_t k = reinterpret_cast<uintptr_t>(key);
  if (!k || !g_trace) return 0;
  for (size_t i = Mix(k) & (kNameCacheSize - 1), n = 0; n < 64; i = (i + 1) & (kNameCacheSize - 1), ++n) {
    uintptr_t have = __atomic_load_n(&g_name_cache[i].key, __ATOMIC_ACQUIRE);
    if (have == k) return __atomic_load_n(&g_name_cache[i].name, __ATOMIC_RELAXED);
    if (have != 0) continue;
    // Miss: look the name up (once per function, off the steady state) and
    // claim the slot; a racing thread that loses the claim probes on.
    const char* text = lookup(key);
    uint32_t name = text && *text ? InternName(text) : 0;
    __atomic_store_n(&g_name_cache[i].name, name, __ATOMIC_RELAXED);
    uintptr_t expected = 0;
    if (__atomic_compare_exchange_n(&g_name_cache[i].key, &expected, k, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      return name;
    }
    if (expected == k) return name;
  }
  return 0;  // the neighbourhood is full: unnamed, but never slow
}

uint32_t HostFuncName(const void* func) {
  return CachedName(func, [](const void* f) -> const char* {
    // A kernel's host stub carries the kernel's (mangled) name; accept the
    // symbol only when it starts exactly at the stub, or it names a neighbour.
    Dl_info info;
    if (dladdr(f, &info) && info.dli_sname && info.dli_saddr == f) return info.dli_sname;
    return nullptr;
  });
}

void Launched(const fmt::Record& r, Device api) {
  if (!TrackKernels() && !BlockKernels()) return;
  const Backend* b = BackendFor(api);
  if (TrackKernels()) Track(r, b);
  if (BlockKernels()) Drain(r, b);
}

#if !HANGTRACE_HAVE_CUDA
const Backend* CudaBackend() { return nullptr; }
uint32_t CudaFunctionName(const void*) { return 0; }
uint32_t CudaKernelName(const void*) { return 0; }
#endif
#if !HANGTRACE_HAVE_HIP
const Backend* HipBackend() { return nullptr; }
uint32_t HipFunctionName(const void*) { return 0; }
#endif

}  // namespace hangtrace::gpu
