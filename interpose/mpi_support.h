// What the generated MPI wrappers (mpi_wrappers.gen.cc, from mpi.spec) call:
// communicator identity, sequence numbers, the table of pending requests,
// datatype and reduction names, and finding the real PMPI_* functions.
//
// Communicator ids are computed locally, with no communication, and agree on
// every member (ARCHITECTURE principle 3):
//   MPI_COMM_WORLD  fmt::kWorldCommId
//   MPI_COMM_SELF   H("self", world rank)
//   derived         H(parent id, creating call, color, parent's creation
//                     counter, members' world ranks)
// where the counter counts the comms derived from the parent so far on this
// rank. Every member of the parent calls the creating call, in the same order
// (MPI requires it), so the counters agree. MPI_Comm_create_group is
// collective over the group only: it counts per (parent, group) instead.
#pragma once

// One MPI ABI per build of these files. Open MPI's by default (namespace
// hangtrace::mpi, mpi.h from the include path, exported wrappers). Where
// MPICH's headers are installed they are built a second time for MPICH's
// ABI, which Intel MPI, Cray MPICH and MVAPICH share (HT_MPICH=1,
// HT_MPI_NS=mpich, HT_MPI_HEADER its mpi.h); each build's wrappers then get
// a prefix (HT_MPI_PREFIX: ht_ompi_, ht_mpich_) and the exported symbols
// jump to one or the other (mpi_abi.cc).
#ifndef HT_MPI_NS
#define HT_MPI_NS mpi
#endif
#define HT_MPI_CAT2(a, b) a##b
#define HT_MPI_CAT(a, b) HT_MPI_CAT2(a, b)
#ifdef HT_MPI_PREFIX
#define HT_MPI_SYMBOL(name) HT_MPI_CAT(HT_MPI_PREFIX, name)
#define HT_MPI_EXPORT extern "C" __attribute__((visibility("hidden")))
#else
#define HT_MPI_SYMBOL(name) name
#define HT_MPI_EXPORT extern "C" __attribute__((visibility("default")))
#endif

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#ifdef HT_MPI_HEADER
#include HT_MPI_HEADER
#else
#include <mpi.h>
#endif

#include <cstdint>
#include <string>
#include <type_traits>

#include "tracer/hash.h"
#include "tracer/runtime.h"

// Hidden, as tracer/runtime.h: reached directly from the wrappers.
#pragma GCC visibility push(hidden)
namespace hangtrace::HT_MPI_NS {


// Whether the MPI library in the process is the one this build is for.
// Decided at the first MPI call, not at load: mpi4py, torch and any plugin
// load libmpi with dlopen long after start-up, and a program without MPI
// must load us without it.
enum class MpiLibrary : int {
  kUnknown = 0,  // not looked for yet, or no MPI library loaded yet
  kReady = 1,    // found: its predefined handles are resolved
  kOther = 2,    // another MPI: calls pass through
};
extern int g_mpi_library;  // MpiLibrary, atomic
// Slow path of MpiReady: looks for the MPI of this build and resolves its
// handles once.
bool FindMpi();
__attribute__((always_inline)) inline bool MpiReady() {
  int s = __atomic_load_n(&g_mpi_library, __ATOMIC_ACQUIRE);
  return s == int(MpiLibrary::kReady) || (s == int(MpiLibrary::kUnknown) && FindMpi());
}

// True when this call should be recorded: the process is traced, the thread
// is not already inside a traced call, and its MPI is this build's. The first
// such call of a process started lazily makes its file.
__attribute__((always_inline)) inline bool Tracing() {
  if (__builtin_expect(g_trace != nullptr, 1)) return t_thread.depth == 0 && MpiReady();
  return g_start_pending && t_thread.depth == 0 && MpiReady() && StartAtFirstCall();
}


// A non-zero 64-bit key for any MPI handle type (pointers in OpenMPI,
// integers in MPICH).
template <typename H>
uint64_t HandleKey(H h) {
  uint64_t k;
  if constexpr (std::is_pointer_v<H>) {
    k = reinterpret_cast<uintptr_t>(h);
  } else {
    k = uint64_t(uint32_t(h)) | (1ull << 62);
  }
  return k < 3 ? k + (1ull << 63) : k;  // 0, 1, 2 are the tables' markers
}

// --- datatypes, reductions, peers ------------------------------------------
uint8_t DtypeSlow(MPI_Datatype d);
uint8_t RedopSlow(MPI_Op op);

// A small direct-mapped cache from handle to neutral enum, filled from the
// lists in mpi_support.cc on a miss; one 64-bit word per entry (key << 8 |
// value), so a lookup is one load and no lock. Here, inline in every
// wrapper: a hit is a handful of instructions and no call. A pointer
// handle is its own key (user addresses are below 2^56); an empty slot
// reads as the null pointer's, kNone, which is what a null handle is.
struct EnumCache {
  uint64_t slots[256] = {};
  template <typename H>
  static uint64_t Key(H handle) {
    if constexpr (std::is_pointer_v<H>) {
      return reinterpret_cast<uintptr_t>(handle);
    } else {
      return HandleKey(handle) & 0x00ffffffffffffffull;
    }
  }
  __attribute__((always_inline)) int Lookup(uint64_t key) const {
    uint64_t v = __atomic_load_n(&slots[Bucket<8>(key)], __ATOMIC_RELAXED);
    return (v >> 8) == key ? int(v & 0xff) : -1;
  }
  void Store(uint64_t key, uint8_t value) {
    if (key >> 56) return;  // not a user address: never cached
    __atomic_store_n(&slots[Bucket<8>(key)], (key << 8) | value, __ATOMIC_RELAXED);
  }
  // The handle a thread looked up last, with its value, in front of the
  // table: a loop that reduces one type with one operation is answered by
  // one compare. (The values never change: a handle names a predefined
  // type or operation, or is kOther.) Zero-initialized: the null handle.
  struct Last {
    uint64_t key;
    uint8_t value;
  };
  // The cached value of `handle`, computed by `slow` on a miss.
  template <typename H>
  __attribute__((always_inline)) uint8_t Get(H handle, uint8_t (*slow)(H), Last& last) {
    uint64_t key = Key(handle);
    if (__builtin_expect(last.key == key, 1)) return last.value;
    int v = Lookup(key);
    if (__builtin_expect(v < 0, 0)) {
      v = slow(handle);
      Store(key, uint8_t(v));
    }
    last = {key, uint8_t(v)};
    return uint8_t(v);
  }
};
extern EnumCache g_dtype_cache, g_redop_cache;

// The communicator this thread used last (CommIndex), by its C handle or
// its Fortran integer. Empty: an epoch not reached (kNoEpoch), as a
// Fortran handle may be any integer, 0 included.
template <typename H>
struct LastCommOf {
  H handle;
  uint32_t epoch;
  uint16_t index;
  uint64_t where;  // StreamWhere(index): a slot's reuses change only with the epoch
};
inline constexpr uint32_t kNoEpoch = ~0u;
using LastComm = LastCommOf<MPI_Comm>;
using LastFortranComm = LastCommOf<MPI_Fint>;
// What each thread remembers of its last calls, in one block: the wrappers
// reach all of it from one TLS offset.
struct MpiThread {
  LastComm comm = {MPI_Comm{}, kNoEpoch, fmt::kNoComm, 0};
  EnumCache::Last dtype = {0, 0};
  EnumCache::Last redop = {0, 0};
  LastFortranComm fortran_comm = {0, kNoEpoch, fmt::kNoComm, 0};
  EnumCache::Last fortran_dtype = {0, 0};
  EnumCache::Last fortran_redop = {0, 0};
};
extern constinit thread_local MpiThread t_mpi __attribute__((tls_model("initial-exec")));
__attribute__((always_inline)) inline uint8_t Dtype(MPI_Datatype d) {
  return g_dtype_cache.Get(d, DtypeSlow, t_mpi.dtype);
}
__attribute__((always_inline)) inline uint8_t Redop(MPI_Op op) { return g_redop_cache.Get(op, RedopSlow, t_mpi.redop); }
// MPI_ANY_SOURCE -> fmt::kAnyPeer (and the record flag), MPI_PROC_NULL ->
// fmt::kNullPeer, other negatives (MPI_ROOT) -> fmt::kNoPeer.
__attribute__((always_inline)) inline void SetPeer(fmt::Record& r, int peer) {
  if (__builtin_expect(peer >= 0, 1)) {
    r.peer = peer;
  } else if (peer == MPI_ANY_SOURCE) {
    r.peer = fmt::kAnyPeer;
    r.flags |= fmt::kRecAnyPeer;
  } else if (peer == MPI_PROC_NULL) {
    r.peer = fmt::kNullPeer;
  } else {
    r.peer = fmt::kNoPeer;
  }
}
__attribute__((always_inline)) inline void SetTag(fmt::Record& r, int tag) {
  if (__builtin_expect(tag == MPI_ANY_TAG, 0)) {
    r.tag = fmt::kAnyTag;
    r.flags |= fmt::kRecAnyTag;
  } else {
    r.tag = tag;
  }
}
// An MPI_Sendrecv's record carries its receive half's source and tag (the
// rank it waits to hear from) in `handle`, marked kRecSendrecv.
inline void SendrecvSource(fmt::Record& r, const fmt::Record& recv) {
  r.handle = uint64_t(uint32_t(recv.peer)) | uint64_t(uint32_t(recv.tag)) << 32;
  r.flags |= fmt::kRecSendrecv;
}

// --- communicators -----------------------------------------------------------
// The comm's index in the file's table; registers a comm seen for the first
// time (created by a call we do not wrap, or before tracing began).
uint16_t CommIndexSlow(MPI_Comm comm);
// The communicator this thread used last: a program calls on a few
// communicators over and over, and this answers with two compares. It
// holds only for the epoch it was read in (g_comm_epoch is bumped whenever
// a handle leaves the map or maps anew), so a handle that MPI recycles for
// a new communicator is never taken for the old one.
extern uint32_t g_comm_epoch;
// A communicator's index, with its streams' StreamWhere (point-to-point
// calls), both from the thread's last communicator when it is that.
struct CommStreams {
  uint16_t index;
  uint64_t where;
};
// From `last` when it holds `comm` (a C handle or a Fortran integer), else
// from `slow`.
template <typename H>
__attribute__((always_inline)) inline CommStreams FromLastComm(const LastCommOf<H>& last, H comm,
                                                               uint16_t (*slow)(H)) {
  if (__builtin_expect(last.handle == comm && last.epoch == __atomic_load_n(&g_comm_epoch, __ATOMIC_ACQUIRE), 1)) {
    return {last.index, last.where};
  }
  const uint16_t index = slow(comm);
  return {index, StreamWhere(index)};
}
__attribute__((always_inline)) inline CommStreams CommForStreams(MPI_Comm comm) {
  return FromLastComm(t_mpi.comm, comm, CommIndexSlow);
}
// (`where` unused: the compiler drops its reads)
__attribute__((always_inline)) inline uint16_t CommIndex(MPI_Comm comm) { return CommForStreams(comm).index; }
// After a creating call returned `newcomm` (may be MPI_COMM_NULL on ranks
// that are not members): registers it. `parent` is the comm it came from.
// `facts_from_parent`: the new comm is not usable yet (MPI_Comm_idup), so
// its size, rank and members are the parent's.
void CommCreated(uint16_t call, MPI_Comm parent, MPI_Comm newcomm, int color, int key,
                 bool collective_over_parent, bool facts_from_parent);
// Before MPI_Comm_free: the handle may be reused by a later comm.
void CommFreeing(MPI_Comm comm);
// A window or file made collectively over `comm` (MPI_Win_create and
// allocate*, MPI_File_open), by its handle's key (HandleKey): registered in
// the communicator table as one of `kind`, with comm's members, so that its
// collective calls (fences, MPI_Win_free, the `_all` accesses, closing) are
// sequenced on it. HandleIndex: its index, kNoComm for one not made by a
// traced call. HandleFreeing: before MPI_Win_free or MPI_File_close (the
// handle may be reused).
void HandleCreated(uint16_t call, MPI_Comm comm, uint64_t handle, fmt::CommKind kind);
uint16_t HandleIndex(uint64_t handle);
void HandleFreeing(uint64_t handle);
void CommNamed(MPI_Comm comm, const char* name);

// --- sequence numbers --------------------------------------------------------
// A receive whose source and tag are known now gets its sequence number;
// with a wildcard it gets 0 here and one at completion (ResolveReceive).
__attribute__((always_inline)) inline void SequenceReceive(fmt::Record& r) {
  if (r.peer >= 0 && !(r.flags & fmt::kRecAnyTag)) r.seq = NextP2pSeq(r.comm, r.peer, r.tag, false);
}
// The same in a wrapper, which has the communicator's StreamWhere and the
// call's own source and tag (so the tests are SetPeer's and SetTag's own,
// on values in registers).
__attribute__((always_inline)) inline void SequenceReceive(fmt::Record& r, uint64_t comm_where, int source, int tag) {
  if (__builtin_expect(source >= 0 && tag != MPI_ANY_TAG, 1)) r.seq = NextP2pSeqAt(comm_where, source, tag, false);
}
// A send's sequence number, in a wrapper (as SequenceReceive).
__attribute__((always_inline)) inline void SequenceSend(fmt::Record& r, uint64_t comm_where, int dest, int tag) {
  if (__builtin_expect(dest >= 0, 1)) r.seq = NextP2pSeqAt(comm_where, dest, tag == MPI_ANY_TAG ? fmt::kAnyTag : tag, true);
}
// Completes a receive record from its status: resolves a wildcard source or
// tag and assigns the sequence number then.
__attribute__((always_inline)) inline void ResolveReceive(fmt::Record& r, const MPI_Status* status) {
  if (!status || r.seq != 0) return;
  if (r.flags & fmt::kRecAnyPeer) r.peer = status->MPI_SOURCE;
  if (r.flags & fmt::kRecAnyTag) r.tag = status->MPI_TAG;
  if (r.peer >= 0) r.seq = NextP2pSeq(r.comm, r.peer, r.tag, false);
}
// After a receive returned `ret`: one with no sequence number yet (a
// wildcard's, a matched message's) is completed from its status (out of
// line); the others look at nothing.
void ReceiveUnsequenced(fmt::Record& r, int ret, const MPI_Status* status);
__attribute__((always_inline)) inline void ReceiveReturned(fmt::Record& r, int ret, const MPI_Status* status) {
  if (__builtin_expect(r.seq == 0, 0)) ReceiveUnsequenced(r, ret, status);
}

// --- nonblocking requests ----------------------------------------------------
uint64_t RequestKey(MPI_Request request);
// After a nonblocking call posted `request`: writes its BEGIN (handle =
// request) and remembers it until a completion call retires the request.
void Posted(fmt::Record& r, MPI_Request request);
// A persistent request made (MPI_Send_init, MPI_Recv_init): recorded as a
// MARK with its parameters (readers see a request made and never started),
// and kept, so that each MPI_Start posts it like an Isend or Irecv.
void PersistentMade(fmt::Record& r, MPI_Request request);
void PersistentStarted(MPI_Request request);
// A receive of a message matched earlier (MPI_Mrecv): source and tag come
// from the status at completion; the communicator (MPI_Mrecv names none)
// from the probe that matched it (MessageMatched), when this thread made it.
inline uint64_t MessageKey(MPI_Message message) { return HandleKey(message); }
void MessageMatched(uint64_t message, uint16_t comm);
void MatchedReceive(fmt::Record& r, uint64_t message);
// Completion calls overwrite retired requests with MPI_REQUEST_NULL, so the
// wrapper saves them first (a thread-local copy).
MPI_Request* SaveRequests(int count, const MPI_Request* requests);
// The caller's statuses, or a thread-local buffer when it passed
// MPI_STATUS(ES)_IGNORE: a wildcard receive is resolved from its status.
MPI_Status* StatusBuffer(MPI_Status* given, bool ignored, int count);
// Writes the END of a request a traced call posted (nothing otherwise).
void Retire(MPI_Request saved, const MPI_Status* status);

// --- Fortran -------------------------------------------------------------------
// A Fortran handle as the C handle the MPI's own *_f2c makes of it.
MPI_Comm FortranComm(MPI_Fint comm);
MPI_Datatype FortranType(MPI_Fint type);
MPI_Op FortranOp(MPI_Fint op);
// The record's fields from Fortran handles, without a call into the MPI
// when the handle was seen before: the communicator this thread used last
// (by its Fortran integer, for the epoch it was read in, as MpiThread::comm),
// datatypes and reductions in caches of their own keyed by the integer
// (an integer a freed derived type or user op leaves to another maps to
// kOther either way: only predefined ones have names, and they live on).
uint16_t FortranCommIndexSlow(MPI_Fint comm);
__attribute__((always_inline)) inline CommStreams FortranCommForStreams(MPI_Fint comm) {
  return FromLastComm(t_mpi.fortran_comm, comm, FortranCommIndexSlow);
}
__attribute__((always_inline)) inline uint16_t FortranCommIndex(MPI_Fint comm) {
  return FortranCommForStreams(comm).index;
}
uint8_t FortranDtypeSlow(MPI_Fint type);
uint8_t FortranRedopSlow(MPI_Fint op);
extern EnumCache g_fortran_dtype_cache, g_fortran_redop_cache;
__attribute__((always_inline)) inline uint8_t FortranDtype(MPI_Fint type) {
  return g_fortran_dtype_cache.Get(type, FortranDtypeSlow, t_mpi.fortran_dtype);
}
__attribute__((always_inline)) inline uint8_t FortranRedop(MPI_Fint op) {
  return g_fortran_redop_cache.Get(op, FortranRedopSlow, t_mpi.fortran_redop);
}
MPI_Request FortranRequest(MPI_Fint request);
MPI_Message FortranMessage(MPI_Fint message);
// Status k of a Fortran status array (k = 0: a single status) as a C status
// in `out`; null when the array is MPI_STATUS(ES)_IGNORE (whose storage
// holds no status, and which MPI_Status_f2c refuses through the error
// handler, fatal by default).
const MPI_Status* FortranStatus(const MPI_Fint* statuses, int k, MPI_Status* out);
// ResolveReceive from a Fortran status, unless it is ignored.
void ResolveFortranReceive(fmt::Record& r, const MPI_Fint* status);
// MPI_Comm_set_name from Fortran: `name` is `len` characters, blank-padded.
void FortranCommNamed(MPI_Fint comm, const char* name, int len);
// Fortran requests as C requests, saved before a completion call overwrites
// them (a buffer of the thread's, as SaveRequests).
MPI_Request* SaveFortranRequests(int count, const MPI_Fint* requests);

// --- life cycle ----------------------------------------------------------------
// After MPI_Init/MPI_Init_thread: rank, world, self, signal handlers.
void Initialized(int provided_level);

// Finds PMPI_<name> the first time it is needed: RTLD_NEXT, then the global
// scope, then an MPI library loaded with RTLD_LOCAL; where no library has
// it, the program's own MPI_<name> (the next definition after this
// library's: called untraced below the wrapper); where nothing defines it,
// NoSuchMpiFunction. Never aborts: tracing fails open.
void* ResolveReal(const char* name);
// Stands in for an MPI function nothing defines (a weak reference made
// non-null by this library's exports): says so once, returns an MPI error.
int NoSuchMpiFunction();
// The same lookup without the abort: null when no loaded library has it.
void* FindReal(const char* name);
// The MPI library that defines PMPI_Init, opened without loading it again
// (dlclose it after), its file in `path`; null (and `path` empty) when no
// MPI is loaded.
void* OpenMpiLibrary(std::string* path);
// A data symbol of the MPI library: the global scope first, because a
// program linked with libmpi has its own copy of every handle it names
// (a copy relocation: MPI_COMM_WORLD in the program is that copy, and
// libmpi uses it too); then `library` (OpenMpiLibrary), however it was
// opened (mpi4py's libmpi is in no global scope).
void* MpiData(const char* symbol, void* library);

// A real function's slot starts at a stub of the generated wrappers', which
// calls this at the first call: the real function, put in the slot, so the
// wrappers call through it with no test (as a PLT entry binds lazily).
template <typename F>
F* Resolve(F*& slot, const char* name) {
  F* f = reinterpret_cast<F*>(ResolveReal(name));
  __atomic_store_n(&slot, f, __ATOMIC_RELEASE);
  return f;
}

// The generated table (mpi_wrappers.gen.cc): one entry per mpi.spec line,
// and each one's index in this process's call table.
struct CallSpec {
  const char* name;
  fmt::Op op;
  uint8_t flags;
};
extern const CallSpec kMpiCalls[];
extern const int kNumMpiCalls;
extern uint16_t g_mpi_call[];
// Registers kMpiCalls into the trace file's call table (at start-up).
void RegisterMpiCalls();

}  // namespace hangtrace::HT_MPI_NS
#pragma GCC visibility pop
