// hangtrace on-disk trace file format (kVersion below; docs/FORMAT.md).
//
// This is the one header that both the writer (the runtime inside a traced
// process, tracer/) and every reader (merger/, the node-side dump, tests)
// include. docs/FORMAT.md describes the same layout in prose.
//
// Rules that keep old files readable forever:
//   * Every on-disk struct has a fixed size and fixed offsets, pinned below
//     with static_assert. Fields are only ever appended (inside reserved
//     space or at the end of a struct whose size grows with a version bump).
//   * Enums written to disk are never renumbered; new values are appended.
//   * The header names the size of each section's entries, so a reader that
//     knows an older, smaller entry reads the prefix it knows.
//   * `oldest_readable` is the oldest reader version that can still read the
//     file: a writer that only appends sets it lower than `version`.
//
// Layout of one file (one per traced process):
//
//   [FileHeader 4096 B][ProcessInfo][CallInfo x N][CommEntry x N]
//   [member pool: int32 x N][ThreadSlot x T][StackSlot x N][NameEntry x N]
//   [ModuleEntry x N][PyFrame x N][ring: T lanes x 2^k Records]
//
// Each section starts on a 4096-byte boundary. LayOut() below computes the
// offsets; the runtime and the simulator's writer both use it. The ring is split into one
// lane per ThreadSlot: a thread that makes a traced call claims a slot and
// is then the only writer of that slot and its lane, so the record path
// needs no atomic read-modify-write (measured on the 2-core dev VM: 42 ns
// per BEGIN+END with lanes, 85 ns with one shared ring and a claim CAS), and
// a thread flooding kernel launches cannot evict the collectives of another.
//
// Concurrency (the writer is the traced process; a reader may be another
// process reading the shared mapping while the writer runs, or after it died):
//   * Ring records: see tracer/lane.h for the commit protocol. A reader never
//     accepts a record whose `commit` does not equal the value expected for
//     that lane index, checked before and after copying.
//   * ThreadSlot, CommEntry and the clock block are seqlocks: the
//     `version` word is odd while the owner writes; a reader copies, re-reads
//     `version`, and retries (or gives up) when it changed or was odd.
//   * StackSlot has no version word: its `status` is stored (release) after
//     the frames are written, and a reader takes the frames of a slot only
//     when its status is kDone or kTruncated (a kPending slot may be half
//     written: its thread never answered, or is still writing).
//   * Counters (ring head, table counts) are 64/32-bit aligned words written
//     with atomic stores; a reader loads them once and clamps to capacity.
//
// All integers are little-endian (checked with `endian_tag`); times in
// records are raw clock ticks of the writing process, converted to
// nanoseconds with the ClockInfo block of that file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hangtrace::fmt {

inline constexpr char kMagic[8] = {'H', 'N', 'G', 'T', 'R', 'A', 'C', 'E'};
// Files in a job's folder: "host.pid.htrace" (one per traced process), and
// "host.pid.rank3of8.no-room", empty, left by a rank the storage had no
// room for (its trace does not exist; the name is all it says).
inline constexpr char kTraceSuffix[] = ".htrace";
inline constexpr char kNoRoomSuffix[] = ".no-room";
// 2: CommEntry grew created_ticks (120 -> 128 bytes); version 1 readers
// read the prefix they know.
// 3: a thread's current and last calls are named by their places in its
// lane (ThreadSlot.current_at/last_at, kFeatCallPositions), no longer copied
// on every call: a reader of version 2 would take stale copies for them;
// and a record's ticket is its index with the lowest bit set (Ticket).
inline constexpr uint16_t kVersion = 3;
inline constexpr uint16_t kOldestReadable = 3;
inline constexpr uint32_t kEndianTag = 0x01020304u;
inline constexpr uint32_t kHeaderSize = 4096;
inline constexpr uint32_t kRecordSize = 64;
// `ready` holds this once the writer has laid the file out; before that a
// reader sees a file still being created and must not trust the sections.
inline constexpr uint32_t kReadyMagic = 0x52454459u;  // "READ" + Y

// ---------------------------------------------------------------------------
// Enums written to disk. Append only; never renumber.

// Which API family a traced call belongs to.
enum class Api : uint8_t {
  kUnknown = 0,
  kMpi = 1,
  kNccl = 2,  // also RCCL, which exports NCCL's symbols
  kCuda = 3,  // runtime and driver API
  kHip = 4,
  kUser = 5,  // annotations made through the public C API (hangtrace.h)
  kTorch = 6, // torch.distributed, recorded by the Python hook (python/)
};

// The API-neutral operation, the `op` of the JSON contract: one table,
// X(enumerator, value, name). The enum, OpName() and the wrapper generator
// (interpose/gen_wrappers.py: the .spec files name ops by these names) all
// come from it.
#define HANGTRACE_OPS(X)                                       \
  X(kNone, 0, "none")                                          \
  X(kAllreduce, 1, "allreduce")                                \
  X(kBcast, 2, "bcast")                                        \
  X(kReduce, 3, "reduce")                                      \
  X(kAllgather, 4, "allgather")                                \
  X(kReducescatter, 5, "reducescatter")                        \
  X(kAlltoall, 6, "alltoall")                                  \
  X(kGather, 7, "gather")                                      \
  X(kScatter, 8, "scatter")                                    \
  X(kBarrier, 9, "barrier")                                    \
  X(kScan, 10, "scan")                                         \
  X(kSend, 11, "send")                                         \
  X(kRecv, 12, "recv")                                         \
  X(kSendrecv, 13, "sendrecv")                                 \
  X(kWait, 14, "wait")                                         \
  X(kKernel, 15, "kernel")                                     \
  X(kSync, 16, "sync")                                         \
  X(kCompute, 17, "compute")  /* not in any traced call */     \
  X(kProbe, 18, "probe")                                       \
  X(kCommMgmt, 19, "comm")    /* init, split, dup, free, ... */ \
  X(kGroup, 20, "group")      /* NCCL group start/end */       \
  X(kOther, 21, "other")

enum class Op : uint8_t {
#define HT_OP_ENUM(e, v, name) e = v,
  HANGTRACE_OPS(HT_OP_ENUM)
#undef HT_OP_ENUM
};

// CallInfo::flags: how a call is matched across ranks.
enum CallFlags : uint8_t {
  kCallCollective = 1u << 0,  // sequenced per communicator
  kCallP2p = 1u << 1,         // sequenced per (comm, peer, tag)
  kCallRooted = 1u << 2,      // Record::peer is the root
  kCallNonblocking = 1u << 3, // BEGIN at post; END at the completion
  kCallCompletion = 1u << 4,  // Wait/Test: retires requests
  kCallBlocking = 1u << 5,    // may block the host thread
  kCallFinalize = 1u << 6,    // ends the library (MPI_Finalize): collective
                              // over every rank still running
  kCallPerRankCounts = 1u << 7,  // v/w collectives (Gatherv, Alltoallv, ...):
                                 // each rank's count differs by design
};

// Record::kind.
enum class EventKind : uint8_t {
  kEmpty = 0,
  kBegin = 1,     // a traced call was entered (or a nonblocking one posted)
  kEnd = 2,       // it returned (or the request it posted was retired)
  kMark = 3,      // a user annotation (hangtrace_mark)
  kComplete = 4,  // the device finished the work of the kDevicePending
                  // record whose `aux` (track id) it carries; written by
                  // the poller thread, `tid` is the enqueuing thread's
  kWatchdog = 5,  // the watchdog found `aux` ms spent in the call in `seq`
  kDevicePending = 6,  // an event was recorded on the stream (`handle`)
                       // after the call described by this record; `aux` is
                       // its track id (per process, from 1) and `result`
                       // the call's own aux (kernel name index + 1)
};

// Record::flags.
enum RecordFlags : uint8_t {
  kRecAnyPeer = 1u << 0,     // MPI_ANY_SOURCE as posted
  kRecAnyTag = 1u << 1,      // MPI_ANY_TAG as posted
  kRecInGroup = 1u << 2,     // inside an NCCL group (aux: group id)
  kRecSendrecv = 1u << 3,    // an MPI_Sendrecv: `handle` holds its receive's
                             // source (low 32 bits, as `peer`) and tag (high)
  kRecError = 1u << 4,       // result is an error code of the API
  kRecPtsz = 1u << 5,        // a per-thread-default-stream variant (_ptsz,
                             // _spt): a null `handle` is the thread's stream
  kRecNotIssued = 1u << 6,   // END of a framework call refused before it was
                             // issued (hangtrace_call_not_issued): its BEGIN
                             // took no sequence number (the next call has it)
};

// API-neutral datatypes. kOther: a derived or unknown type.
enum class Dtype : uint8_t {
  kNone = 0, kInt8 = 1, kUint8 = 2, kInt16 = 3, kUint16 = 4, kInt32 = 5,
  kUint32 = 6, kInt64 = 7, kUint64 = 8, kFloat16 = 9, kBfloat16 = 10,
  kFloat32 = 11, kFloat64 = 12, kByte = 13, kChar = 14, kBool = 15,
  kFloat8e4m3 = 16, kFloat8e5m2 = 17, kLongDouble = 18, kPair = 19,
  kOther = 255,
};

// API-neutral reduction operations.
enum class Redop : uint8_t {
  kNone = 0, kSum = 1, kProd = 2, kMax = 3, kMin = 4, kAvg = 5, kBand = 6,
  kBor = 7, kBxor = 8, kLand = 9, kLor = 10, kLxor = 11, kMaxloc = 12,
  kMinloc = 13, kReplace = 14, kOther = 255,
};

enum class CommKind : uint8_t {
  kUnknown = 0, kMpi = 1, kNccl = 2, kRccl = 3, kUser = 4,
  kTorch = 5,  // a torch.distributed process group
  // An MPI window or file: its collective calls (MPI_Win_fence, MPI_Win_free,
  // MPI_File_write_all, MPI_File_close, ...) are sequenced on it as on a
  // communicator of the creating communicator's members, made by
  // MPI_Win_create/allocate* or MPI_File_open.
  kMpiWindow = 6,
  kMpiFile = 7,
};

// CommEntry::flags.
enum CommFlags : uint8_t {
  kCommMembersKnown = 1u << 0,  // members_* lists the world ranks
  kCommWorld = 1u << 1,         // the world communicator: member i is rank i
  kCommFreed = 1u << 2,
  kCommInter = 1u << 3,         // an intercommunicator
};

// ProcessInfo::state. A reader combines it with the heartbeat and /proc to
// tell running, wedged, stopped, crashed and exited apart.
enum class ProcState : uint32_t {
  kStarting = 0,
  kRunning = 1,
  kExited = 2,   // exit() ran; exit_code is valid
  kCrashed = 3,  // a fatal signal arrived; signal fields are valid
  kExeced = 4,   // the process exec'ed a new image, which has its own file
};

// Where ProcessInfo::rank came from, most trusted last.
enum class RankSource : uint8_t {
  kNone = 0,
  kEnvOmpi = 1,   // OMPI_COMM_WORLD_RANK
  kEnvPmi = 2,    // PMI_RANK
  kEnvPmix = 3,   // PMIX_RANK
  kEnvSlurm = 4,  // SLURM_PROCID
  kEnvTorch = 5,  // RANK (torchrun and friends)
  kMpi = 6,       // MPI_Comm_rank(MPI_COMM_WORLD) at MPI_Init
  kInherited = 7, // a fork child: the parent's rank, not a rank of its own
  kNccl = 8,      // from the first NCCL communicator when nothing else said
  kTorch = 9,     // torch.distributed's default process group
};

enum class ClockKind : uint32_t {
  kMonotonicNs = 1,  // ticks are CLOCK_MONOTONIC nanoseconds
  kTsc = 2,          // ticks are x86 TSC cycles; see ClockInfo
};

// StackSlot::reason.
enum class StackReason : uint32_t {
  kNone = 0,
  kWatchdog = 1,  // the watchdog found a call in flight past the timeout
  kCrash = 2,     // the thread received a fatal signal
  kRequest = 3,   // hangtrace_capture_stacks() or a dump request
  kIdle = 4,      // no traced call in flight, and none for the watchdog's
                  // timeout: where the threads are (a call not traced?)
};

// StackSlot::status.
enum class StackStatus : uint32_t {
  kEmpty = 0,
  kPending = 1,     // signal sent, handler has not finished (blocked? D state?)
  kDone = 2,
  kTruncated = 3,   // more frames than kMaxFrames
  kBlocked = 4,     // running, and it blocks the capture signal: not asked (it would stay pending)
  kUnread = 5,      // neither blocked in a call nor safely signalled (its
                    // state unreadable, or it kept moving): not captured
};

// StackSlot::method. A capture never interrupts a system call of the
// program (docs/DUMP.md, "How stacks are captured"): a thread blocked in one
// is read, not signalled.
enum class StackMethod : uint8_t {
  kSignal = 0,       // the thread ran (not in a system call): it unwound
                     // itself in the capture signal's handler
  kBlockedRead = 1,  // blocked in a system call: unwound by the tracer's
                     // thread from its stack pointer and pc
                     // (/proc/self/task/TID/syscall), no signal sent
};

// StackSlot::flags.
enum StackFlag : uint8_t {
  // The capture signal met the thread in a system call that then returned
  // EINTR (it entered one between the look that found it running and the
  // signal: a window of microseconds). Said, never hidden.
  kStackInterruptedCall = 1,
  // kBlockedRead: the thread left its call while being read; the frames
  // may mix two instants.
  kStackMoved = 2,
  // kBlockedRead: a frame needed the frame pointer, which /proc does not
  // give; it was found by a scan of the stack and kept because the unwind
  // from it reached the thread's outermost frame (tracer/stacks.cc).
  kStackFramePointerScan = 4,
  // Running at every look of the capture, but not in user mode meanwhile
  // (in the kernel, or not at all): not signalled, since a signal there can
  // cut a call short (a read's count, EINTR). Its stack is not captured.
  kStackNotSignalled = 8,
};

// ProcessInfo::python_status: what the last capture of Python frames found.
enum class PythonStatus : uint32_t {
  kNone = 0,         // no capture yet, or no Python interpreter in the process
  kCaptured = 1,     // PyFrame entries of the current round hold the frames
  kUnsupported = 2,  // a Python version whose frame dump hangtrace does not know
  kNoDumper = 3,     // _Py_DumpTracebackThreads is neither exported nor in the
                     // library's symbol table (a stripped build)
  kNotRunning = 4,   // not initialized yet, or finalizing
  kFailed = 5,       // CPython's dump returned an error, or its output was unreadable
};

// FileHeader::features bits.
enum Features : uint64_t {
  kFeatTscClock = 1ull << 0,
  kFeatStacks = 1ull << 1,   // in-process stack capture is armed
  kFeatDeviceEvents = 1ull << 2,  // device completion is tracked: every
                                  // kDevicePending gets a kComplete when the
                                  // device finishes it
  kFeatCompact = 1ull << 3,  // a compact copy (merger/trace_compact.h): each
                             // lane holds its newest records only, and one
                             // lane owned by no thread the older ones the
                             // analysis needs
  kFeatCallPositions = 1ull << 4,  // ThreadSlot.current_at/last_at name the
                                   // current and last calls (ReadThreadCalls);
                                   // without it, ThreadSlot.current/last are
                                   // the calls themselves
};

// ---------------------------------------------------------------------------
// The file header: fixed at offset 0, 4096 bytes (one page).

// One entry of the section table.
struct Section {
  uint64_t offset;      // from the start of the file
  uint32_t count;       // capacity in entries
  uint32_t entry_size;  // bytes per entry, as written
};
static_assert(sizeof(Section) == 16);

enum SectionId : uint32_t {
  kSecProcess = 0,
  kSecCalls = 1,
  kSecComms = 2,
  kSecMembers = 3,
  kSecThreads = 4,
  kSecStacks = 5,
  kSecRing = 6,
  kSecNames = 7,     // interned strings (kernel names), NameEntry
  kSecModules = 8,   // the executable mappings when stacks were captured
  kSecPyFrames = 9,  // Python frames captured with the native stacks
  kNumSections = 10,
  kMinSections = 7,  // files written before kSecNames existed
  kMaxSections = 16,
};

// Counters that grow while the process runs. Each is written with an atomic
// store (release) by the runtime; readers load them once.
struct Counters {
  uint64_t reserved0;
  uint32_t call_count;      // CallInfo entries published
  uint32_t comm_count;      // CommEntry slots claimed
  uint32_t member_count;    // member-pool entries claimed
  uint32_t thread_count;    // ThreadSlot entries ever claimed (high water)
  uint32_t stack_round;     // increments with each stack capture round
  uint32_t stack_count;     // StackSlot entries filled in the current round
  uint64_t dropped;         // events not recorded: full tables, re-entry
  uint32_t name_count;      // NameEntry slots published
  uint32_t module_count;    // ModuleEntry slots filled in the current round
  uint32_t pyframe_count;   // PyFrame slots filled in the current round
  // A reader (hangtrace dump) that may write the file asks the process for
  // a capture round by storing a new value in `capture_request`; the
  // runtime's background thread captures (native and Python stacks) and
  // then stores the same value in `capture_answered`.
  uint32_t capture_request;
  uint32_t capture_answered;
  // Threads left untraced because the storage refused their lane (a full
  // disk or /dev/shm); also counted in `dropped`. Zero in older files.
  uint32_t lanes_refused;
  // Communicators not recorded because the table was full and none of its
  // communicators had been freed (calls on them carry no communicator).
  uint32_t comms_refused;
  // Framework calls ended kRecNotIssued: a reader sets their BEGINs apart
  // before matching calls (zero: none, the common case; and older files).
  uint32_t calls_not_issued;
};
static_assert(sizeof(Counters) == 72);

struct FileHeader {
  char magic[8];              // kMagic
  uint16_t version;           // kVersion of the writer
  uint16_t oldest_readable;   // oldest reader version that can read this
  uint32_t endian_tag;        // kEndianTag as written by the writer
  uint32_t header_size;       // kHeaderSize
  uint32_t record_size;       // kRecordSize
  uint64_t features;          // Features
  uint64_t file_size;         // bytes; a shorter file is truncated
  uint32_t ready;             // kReadyMagic once the layout is complete
  uint32_t section_count;     // kNumSections
  uint32_t lane_slots;        // records per lane (power of two); the ring
                              // section holds sections[kSecThreads].count lanes
  uint32_t reserved0;
  Section sections[kMaxSections];
  Counters counters;
  uint8_t reserved[kHeaderSize - 56 - 16 * kMaxSections - sizeof(Counters)];
};
static_assert(offsetof(FileHeader, version) == 8);
static_assert(offsetof(FileHeader, endian_tag) == 12);
static_assert(offsetof(FileHeader, record_size) == 20);
static_assert(offsetof(FileHeader, features) == 24);
static_assert(offsetof(FileHeader, file_size) == 32);
static_assert(offsetof(FileHeader, ready) == 40);
static_assert(offsetof(FileHeader, lane_slots) == 48);
static_assert(offsetof(FileHeader, sections) == 56);
static_assert(offsetof(FileHeader, counters) == 312);
static_assert(sizeof(FileHeader) == kHeaderSize);

// ---------------------------------------------------------------------------
// Process facts.

// The clock block: a (ticks, monotonic, realtime) triple read together, and
// the tick rate. For kTsc the runtime's background thread refines `ticks_hz`
// from two triples seconds apart; the reader converts a tick t to
//   mono_ns = ref_mono_ns + (t - ref_ticks) * 1e9 / ticks_hz.
struct ClockInfo {
  uint32_t version;      // seqlock word
  uint32_t kind;         // ClockKind
  uint64_t ref_ticks;
  int64_t ref_mono_ns;   // CLOCK_MONOTONIC at ref_ticks
  int64_t ref_real_ns;   // CLOCK_REALTIME at ref_ticks
  uint64_t ticks_hz;     // ticks per second; 0 until calibrated (TSC)
  uint64_t start_ticks;  // ticks when the runtime started
};
static_assert(sizeof(ClockInfo) == 48);

struct ProcessInfo {
  int32_t pid;
  int32_t ppid;
  int32_t rank;             // global rank; -1 unknown
  int32_t world_size;       // -1 unknown
  uint8_t rank_source;      // RankSource
  uint8_t forked;           // 1: a fork child of a traced process
  uint8_t blocking_mode;    // 0 off, 1 coll, 2 kernels, 3 all
  uint8_t reserved0;
  uint32_t state;           // ProcState (atomic)
  int32_t exit_code;        // with kExited
  int32_t signal;           // with kCrashed: the fatal signal
  int32_t signal_code;      // siginfo si_code
  int32_t signal_tid;       // the thread that received it
  uint64_t fault_addr;      // siginfo si_addr
  uint64_t end_ticks;       // when the exit or crash was recorded
  uint64_t proc_start_time; // /proc/self/stat field 22 (clock ticks since
                            // boot): with boot_id, tells pid reuse apart
  uint8_t boot_id[16];      // /proc/sys/kernel/random/boot_id, binary
  ClockInfo clock;
  uint64_t heartbeat_mono_ns;  // CLOCK_MONOTONIC of the last heartbeat
  int64_t heartbeat_real_ns;   // CLOCK_REALTIME of the last heartbeat
  uint64_t heartbeat_count;
  uint32_t watchdog_timeout_ms;  // 0: watchdog off
  uint32_t watchdog_fires;       // calls the watchdog flagged so far
  int32_t parent_pid;       // with forked: the traced parent
  int32_t mpi_thread_level; // provided level, -1 unknown
  char host[64];
  char job[64];             // job id: SLURM_JOB_ID, launcher id, HANGTRACE_JOB
  char step[32];            // SLURM step id where known
  char exe[256];            // /proc/self/exe
  char cmdline[512];        // argv joined by spaces, truncated
  uint32_t python_version;  // PY_VERSION_HEX of the interpreter in the
                            // process (0: none seen); set by a capture
  uint32_t python_status;   // PythonStatus of the last Python capture
  // The SIGTERM that asked the process to end, as it arrived: who sent it,
  // and when. The process may still exit normally
  // (its own handler); if it dies of it there is no exit record, and this
  // tells a job ended by its launcher or scheduler from a rank killed first.
  int32_t term_signal;      // 0: none received
  int32_t term_sender_pid;  // siginfo si_pid (0: the kernel, or unknown)
  uint64_t term_ticks;      // when it arrived
  char term_sender[16];     // the sender's name (/proc/PID/comm), when readable
  // Which run of the job this process belongs to (HANGTRACE_RUN, else made
  // from the launcher: SLURM's step and restart count, Open MPI's
  // namespace, torchrun's run id and restart count, the launcher's pid and
  // start time). Concurrent steps of one allocation and reruns share a job
  // id; their files are never merged into one diagnosis. "": unknown (older
  // writers, no launcher): one run.
  char run[64];
  uint8_t reserved[152];
};
static_assert(offsetof(ProcessInfo, state) == 20);
static_assert(offsetof(ProcessInfo, fault_addr) == 40);
static_assert(offsetof(ProcessInfo, boot_id) == 64);
static_assert(offsetof(ProcessInfo, clock) == 80);
static_assert(offsetof(ProcessInfo, heartbeat_mono_ns) == 128);
static_assert(offsetof(ProcessInfo, host) == 168);
static_assert(offsetof(ProcessInfo, python_version) == 1096);
static_assert(offsetof(ProcessInfo, term_signal) == 1104);
static_assert(offsetof(ProcessInfo, run) == 1136);
static_assert(sizeof(ProcessInfo) == 1352);

// ---------------------------------------------------------------------------
// The call table: the runtime writes the name and matching rules of every
// call it may record, so a file describes itself and a reader needs no copy
// of the wrapper tables. Record::call indexes this table.
struct CallInfo {
  char name[40];    // "MPI_Allreduce", "ncclAllReduce", "cuLaunchKernel"
  uint8_t api;      // Api
  uint8_t op;       // Op
  uint8_t flags;    // CallFlags
  uint8_t reserved[5];
};
static_assert(sizeof(CallInfo) == 48);

// ---------------------------------------------------------------------------
// The communicator table.
struct CommEntry {
  uint32_t version;      // seqlock word; 0: slot never published
  uint8_t kind;          // CommKind
  uint8_t flags;         // CommFlags
  uint16_t creator_call; // CallInfo index of the creating call; 0xffff none
  uint64_t id;           // global id, identical on every member
  uint64_t parent_id;    // 0: none
  int32_t size;          // members
  int32_t my_index;      // this process's rank in the communicator
  int32_t color;         // split color, or -1
  int32_t key;           // split key, or -1
  uint32_t parent_counter;  // the parent's creation counter at creation
  uint32_t members_offset;  // into the member pool, with kCommMembersKnown
  uint64_t coll_seq;     // collectives entered on it so far (atomic)
  uint64_t handle;       // the native handle in this process (MPI_Comm ...)
  int32_t device;        // CUDA/HIP device, or -1
  uint32_t children;     // comms derived from it so far (creation counter)
  char label[48];        // MPI_Comm_set_name, ncclConfig_t.commName, ...
  // (version 2) When this communicator took the slot (clock ticks). Once
  // the table is full, a freed communicator's slot is reused: records on
  // the slot from before this time are a former occupant's. 0 in files
  // of version 1 (whose slots were never reused).
  uint64_t created_ticks;
};
static_assert(offsetof(CommEntry, id) == 8);
static_assert(offsetof(CommEntry, coll_seq) == 48);
static_assert(offsetof(CommEntry, label) == 72);
static_assert(offsetof(CommEntry, created_ticks) == 120);
static_assert(sizeof(CommEntry) == 128);
inline constexpr uint32_t kCommEntryV1Size = 120;  // what a version 1 file's entries hold

// ---------------------------------------------------------------------------
// The event record: 64 bytes, written once into the ring.
struct Record {
  uint64_t ticks;     // clock ticks (see ClockInfo) when it happened
  uint64_t seq;       // collective: per-comm sequence number (1-based);
                      // p2p: per-(comm, peer, tag) sequence number
  uint64_t count;     // element count as passed (bytes where no datatype)
  uint64_t handle;    // stream, request or other opaque handle; with a
                      // nonblocking call BEGIN and END carry the same one
  uint32_t tid;       // kernel thread id of the caller
  uint16_t call;      // CallInfo index
  uint16_t comm;      // CommEntry index; kNoComm when none
  int32_t peer;       // root of rooted collectives, peer of p2p (the
                      // communicator's rank); kAnyPeer, kNullPeer, kNoPeer
  int32_t tag;        // p2p tag; kAnyTag
  int32_t result;     // END: the call's return code
  uint8_t kind;       // EventKind
  uint8_t dtype;      // Dtype
  uint8_t redop;      // Redop
  uint8_t flags;      // RecordFlags
  uint32_t aux;       // kind-specific: group id, ring index, milliseconds
  uint32_t commit;    // written last: (uint32_t)(lane index + 1), never 0
};
static_assert(offsetof(Record, seq) == 8);
static_assert(offsetof(Record, handle) == 24);
static_assert(offsetof(Record, tid) == 32);
static_assert(offsetof(Record, call) == 36);
static_assert(offsetof(Record, comm) == 38);
static_assert(offsetof(Record, peer) == 40);
static_assert(offsetof(Record, result) == 48);
static_assert(offsetof(Record, kind) == 52);
static_assert(offsetof(Record, aux) == 56);
static_assert(offsetof(Record, commit) == 60);
static_assert(sizeof(Record) == kRecordSize);

// The reader's side of the seqlocks (ThreadSlot, CommEntry, ClockInfo; the
// writer's side is tracer/lane.h): copies sizeof(T) bytes from `src` until
// `version` was even and unchanged around the copy, at most `attempts`
// times. False when it never settled (a writer storming, or one that died
// mid-write): `out` then holds the last, best-effort copy.
template <typename T>
inline bool SeqRead(const void* src, T* out, const uint32_t* version, int attempts) {
  for (int attempt = 0; attempt < attempts; ++attempt) {
    uint32_t v1 = __atomic_load_n(version, __ATOMIC_ACQUIRE);
    memcpy(static_cast<void*>(out), src, sizeof(T));
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (!(v1 & 1) && __atomic_load_n(version, __ATOMIC_RELAXED) == v1) return true;
  }
  return false;
}

// The same for the first `bytes` of an entry (an older file's shorter one);
// the rest of `out` is zeroed.
template <typename T>
inline bool SeqReadPrefix(const void* src, T* out, size_t bytes, const uint32_t* version, int attempts) {
  if (bytes > sizeof(T)) bytes = sizeof(T);
  memset(static_cast<void*>(out), 0, sizeof(T));
  for (int attempt = 0; attempt < attempts; ++attempt) {
    uint32_t v1 = __atomic_load_n(version, __ATOMIC_ACQUIRE);
    memcpy(static_cast<void*>(out), src, bytes);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (!(v1 & 1) && __atomic_load_n(version, __ATOMIC_RELAXED) == v1) return true;
  }
  return false;
}

// The `commit` value of the record at `index` of its lane: never 0, so a
// zeroed slot is never accepted, and different for the records one slot
// holds in turn (index, index + lane_slots, ...; lane_slots >= 2), so a
// record of another lap is never taken for this one. One instruction on the
// record path.
inline uint32_t Ticket(uint64_t index) { return uint32_t(index) | 1u; }
// The ticket in a file of `version`: files of version 2 and older wrote
// uint32_t(index + 1), or 1 where that wraps to 0.
inline uint32_t TicketOfVersion(uint64_t index, uint16_t version) {
  if (version >= 3) return Ticket(index);
  const uint32_t t = uint32_t(index + 1);
  return t ? t : 1;
}

// The reader's side of the lane protocol (tracer/lane.h) for the lane slot
// that should hold the record whose ticket is `want`: kAbsent when it held
// another record (or none) before the copy, kTorn when it changed during
// the copy (`out` is then no record).
enum class LaneRead { kRead, kAbsent, kTorn };
inline LaneRead ReadLaneSlot(const Record* slot, uint32_t want, Record* out) {
  if (__atomic_load_n(&slot->commit, __ATOMIC_ACQUIRE) != want) return LaneRead::kAbsent;
  memcpy(static_cast<void*>(out), slot, sizeof(Record));
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return __atomic_load_n(&slot->commit, __ATOMIC_RELAXED) == want ? LaneRead::kRead : LaneRead::kTorn;
}

// The global id of MPI_COMM_WORLD ("WORLD" ... 1): the same on every rank
// of every job, with no communication.
inline constexpr uint64_t kWorldCommId = 0x574f524c44000001ull;

inline constexpr uint16_t kNoComm = 0xffff;
inline constexpr uint16_t kNoCall = 0xffff;
inline constexpr int32_t kNoPeer = -1;
inline constexpr int32_t kAnyPeer = -2;   // MPI_ANY_SOURCE
inline constexpr int32_t kAnyTag = -2;    // MPI_ANY_TAG
inline constexpr int32_t kNullPeer = -3;  // MPI_PROC_NULL: completes at once

// ---------------------------------------------------------------------------
// Per-thread "current call" slots: the call a thread is blocked in stays
// readable here after the ring has wrapped past its BEGIN.
//
// Slot i owns lane i of the ring. A slot freed by an exiting thread is
// reused by the next new thread; the lane continues (its head never goes
// back), so tickets stay unique and old records stay readable until
// overwritten.
//
// With kFeatCallPositions (the runtime's files), the record path does not
// copy its records here: a call's BEGIN publishes its lane index + 1 in
// `current_at`, its END in `last_at` (one store each). The thread is in a
// call when current_at > last_at (kAtCopy masked off): an END, later in the
// lane than its BEGIN, ends it with no second store. Before any other write
// of the lane could overwrite one of those records (a long call's
// completions and marks; tracer/runtime.cc KeepCallsVisible), the owner
// copies it into `current` or `last` under the seqlock and sets kAtCopy in
// the index: the record is then read from the copy. A poll (never in the
// lane) is published the same way, as a copy. ReadThreadCalls reads both.
// Without the feature (older files, the simulator's and compact copies),
// `current` and `last` are the calls, kind kBegin/kEnd, kEmpty when none.
inline constexpr uint64_t kAtCopy = 1ull << 63;
// Whether a thread whose slot holds these two words is in a call.
inline bool InCall(uint64_t current_at, uint64_t last_at) { return (current_at & ~kAtCopy) > (last_at & ~kAtCopy); }
struct ThreadSlot {
  uint32_t version;     // seqlock word over current/last (owner writes)
  uint32_t tid;         // owner's kernel tid; 0: free
  uint64_t head;        // records ever written to this lane (release store
                        // after each record's commit)
  uint32_t watchdog_fires;  // calls of this slot the watchdog flagged
  uint32_t flags;           // ThreadFlags
  uint64_t watchdog_ticks;  // `current.ticks` of the call last flagged:
                            // equal to current.ticks => current is flagged
  Record current;       // BEGIN of the outermost open call; kind 0: idle
  Record last;          // END of the last outermost call that returned
  char name[16];        // thread name when it attached (PR_GET_NAME)
  uint64_t current_at;  // kFeatCallPositions: lane index + 1 of the open
                        // call's BEGIN, | kAtCopy when in `current`; 0: none
  uint64_t last_at;     // the same for the last call's END and `last`
};

enum ThreadFlags : uint32_t {
  kThreadTracer = 1u << 0,  // hangtrace's own background thread
};
static_assert(offsetof(ThreadSlot, current) == 32);
static_assert(offsetof(ThreadSlot, last) == 96);
static_assert(offsetof(ThreadSlot, current_at) == 176);
static_assert(sizeof(ThreadSlot) == 192);

// A thread's current and last calls, as a reader sees them.
struct ThreadCalls {
  bool in_call = false;   // `current` is the BEGIN of the call it is in
  Record current{};
  bool has_last = false;  // `last` is the END of the last call it left
  Record last{};
};
// Reads them from slot `s`, live or not, and with kFeatCallPositions from
// the thread's lane (`lane`, of `lane_slots` records; null when lost). False
// when they kept changing for `attempts` tries (the owner busy entering and
// leaving calls) or could not be read (a lost lane, a writer that died
// mid-write): `out` then holds what was read, and no call it could not read.
inline bool ReadThreadCalls(const ThreadSlot* s, const Record* lane, uint64_t lane_slots, uint64_t features,
                            ThreadCalls* out, int attempts) {
  *out = ThreadCalls{};
  if (!(features & kFeatCallPositions)) {
    struct Copies {
      Record current, last;
    } copies;
    static_assert(offsetof(ThreadSlot, last) == offsetof(ThreadSlot, current) + sizeof(Record));
    const bool stable = SeqRead(&s->current, &copies, &s->version, attempts);
    out->in_call = copies.current.kind == uint8_t(EventKind::kBegin);
    out->current = copies.current;
    out->has_last = copies.last.kind == uint8_t(EventKind::kEnd);
    out->last = copies.last;
    return stable;
  }
  auto read = [&](uint64_t at, const Record* copy, EventKind kind, Record* rec) {
    const bool got = (at & kAtCopy) ? SeqRead(copy, rec, &s->version, 1)
                                    : lane && ReadLaneSlot(&lane[(at - 1) & (lane_slots - 1)], Ticket(at - 1),
                                                           rec) == LaneRead::kRead;
    return got && rec->kind == uint8_t(kind);
  };
  for (int attempt = 0; attempt < attempts; ++attempt) {
    // The last call first: an END stored after its BEGIN's index is seen
    // with that index or a later one, never a call open after it ended.
    const uint64_t l = __atomic_load_n(&s->last_at, __ATOMIC_ACQUIRE);
    const uint64_t c = __atomic_load_n(&s->current_at, __ATOMIC_ACQUIRE);
    ThreadCalls got;
    const bool in_call = InCall(c, l), has_last = (l & ~kAtCopy) != 0;
    got.in_call = in_call && read(c, &s->current, EventKind::kBegin, &got.current);
    got.has_last = has_last && read(l, &s->last, EventKind::kEnd, &got.last);
    const bool whole = got.in_call == in_call && got.has_last == has_last;
    *out = got;
    if (whole && __atomic_load_n(&s->last_at, __ATOMIC_ACQUIRE) == l &&
        __atomic_load_n(&s->current_at, __ATOMIC_ACQUIRE) == c) {
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// Captured native stacks (watchdog, crash, request).
inline constexpr uint32_t kMaxFrames = 48;
inline constexpr uint32_t kSymbolLen = 52;

// Frames hold raw program counters (the return address minus one for every
// frame but the innermost, so each points into its call instruction). The
// analyzer names them from the ModuleEntry table and the files on disk.
// Files of older writers carry the nearest dynamic symbol in `symbol`.
struct StackFrame {
  uint64_t pc;
  uint32_t offset;         // pc - symbol start, when symbol is known
  char symbol[kSymbolLen]; // mangled name as found, "" when unknown
};
static_assert(sizeof(StackFrame) == 64);

struct StackSlot {
  uint32_t status;     // StackStatus (atomic)
  uint32_t tid;
  uint32_t reason;     // StackReason
  uint32_t round;      // Counters::stack_round when captured
  uint64_t ticks;      // when captured
  uint32_t nframes;
  int32_t lock_holder_pid;  // blocked waiting for a file lock: the process
                            // holding it (/proc/locks); 0: none or unknown
  char thread_name[16];
  uint64_t pthread_id;  // pthread_self() of the thread: CPython names its
                        // threads by it (PyFrame::thread_id); 0 when read
                        // while blocked (its own code never ran)
  uint8_t method;       // StackMethod: how the frames were taken (0 in
                        // files of older writers: the signal)
  uint8_t flags;        // StackFlag bits
  uint16_t syscall_nr;  // kBlockedRead: the system call it was blocked in
                        // (/proc/self/task/TID/syscall); 0xffff: none
  uint8_t reserved[4];
  StackFrame frames[kMaxFrames];
};
static_assert(offsetof(StackSlot, pthread_id) == 48);
static_assert(offsetof(StackSlot, frames) == 64);
static_assert(sizeof(StackSlot) == 64 + 64 * kMaxFrames);

// ---------------------------------------------------------------------------
// Interned strings: kernel names. A launch record's `aux` is the index + 1
// of its kernel's name here (0: unknown).
struct NameEntry {
  char text[64];  // NUL-terminated, truncated
};
static_assert(sizeof(NameEntry) == 64);

// ---------------------------------------------------------------------------
// The executable mappings of the process (from /proc/self/maps) when its
// stacks were captured: with them the analyzer turns a pc into a module and
// an offset in its file, and names it from that file's symbols and debug
// information, whatever the address-space layout of the process was.
struct ModuleEntry {
  uint64_t start;        // mapping [start, end) in the process
  uint64_t end;
  uint64_t file_offset;  // offset in the file of `start`
  uint32_t round;        // Counters::stack_round when captured
  uint32_t reserved;
  char path[224];        // the mapped file, NUL-terminated (truncated: unusable)
};
static_assert(sizeof(ModuleEntry) == 256);

// One Python frame of one thread, innermost first (depth 0), captured with
// the native stacks by CPython's own traceback dumper. A thread's frames
// are consecutive entries of the same round.
struct PyFrame {
  uint32_t tid;          // kernel tid (matched through thread_id); 0 unknown
  uint16_t depth;        // 0: the innermost frame
  uint16_t flags;        // PyFrameFlags
  int32_t line;          // -1 unknown
  uint32_t round;        // Counters::stack_round when captured
  uint64_t thread_id;    // CPython's thread id (pthread_self of the thread)
  char function[80];     // co_name (truncated)
  char file[152];        // co_filename; its end is kept when too long
};
static_assert(sizeof(PyFrame) == 256);

enum PyFrameFlags : uint16_t {
  kPyFrameTruncated = 1u << 0,  // the thread had more frames than were kept
  kPyFrameNone = 1u << 1,       // a Python thread with no Python frame now
};

// ---------------------------------------------------------------------------
// Defaults of the runtime (the reader never relies on them: it reads the
// section table).
inline constexpr uint32_t kMaxCalls = 1024;
inline constexpr uint32_t kMaxComms = 4096;
inline constexpr uint32_t kMaxMembers = 1u << 18;
inline constexpr uint32_t kMaxThreads = 64;
inline constexpr uint32_t kMaxStacks = 128;
inline constexpr uint32_t kMaxNames = 4096;
inline constexpr uint32_t kMaxModules = 512;
inline constexpr uint32_t kMaxPyFrames = 4096;

// ---------------------------------------------------------------------------
// The layout of a file: the section table for the given capacities, in file
// order, each section on a 4096-byte boundary. Used by every writer (the
// runtime, the simulator) so that there is one layout. `prealloc_end` is
// where the sections that a writer fills at start end: the modules, Python
// frames and ring after it are allocated only when written.
struct Capacities {
  uint32_t calls = kMaxCalls;
  uint32_t comms = kMaxComms;
  uint32_t members = kMaxMembers;
  uint32_t threads = kMaxThreads;
  uint32_t stacks = kMaxStacks;
  uint32_t names = kMaxNames;
  uint32_t modules = kMaxModules;
  uint32_t pyframes = kMaxPyFrames;
  uint32_t lane_slots = 0;  // records per lane: a power of two
};
struct Layout {
  Section sections[kNumSections];
  uint64_t prealloc_end;
  uint64_t file_size;
};
// `align`: 4096 for files mapped by a running process; a writer of finished
// files (the simulator) may pack sections closer (8), which readers accept.
Layout LayOut(const Capacities& c, uint32_t align = 4096);
// A header for that layout: magic, versions, sizes, section table; `ready`
// is left 0 for the writer to set last.
void FillHeader(FileHeader* h, const Layout& layout, uint32_t lane_slots, uint64_t features);

// Neutral names, for readers and reports.
const char* OpName(Op op);
const char* ApiName(Api api);
const char* DtypeName(Dtype d);
const char* RedopName(Redop r);
const char* CommKindName(CommKind k);
const char* ProcStateName(ProcState s);
const char* RankSourceName(RankSource s);
const char* EventKindName(EventKind k);
const char* PythonStatusName(PythonStatus s);

}  // namespace hangtrace::fmt
