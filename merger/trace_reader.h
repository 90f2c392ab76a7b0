// Reading one trace file (live, dead or copied) into a consistent snapshot.
//
// The reader trusts nothing in the file: every size, offset and count is
// checked against the bytes present, every string is bounded, and only
// committed records are accepted (tracer/lane.h). A file that cannot be used
// at all gives an error naming what is wrong; a file that is partly damaged
// gives a snapshot plus warnings saying what was skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tracer/format.h"

namespace hangtrace {

struct CallDesc {
  std::string name;
  fmt::Api api = fmt::Api::kUnknown;
  fmt::Op op = fmt::Op::kNone;
  uint8_t flags = 0;
};

struct CommInfo {
  fmt::CommEntry entry{};       // as written; label bounded
  std::vector<int32_t> members; // world ranks, when the file lists them
};

struct ThreadInfo {
  uint32_t slot = 0;
  uint32_t tid = 0;
  std::string name;             // thread name when it attached
  bool tracer = false;          // hangtrace's own background thread
  uint64_t head = 0;            // records ever written to its lane
  bool in_call = false;         // `current` is an open call
  fmt::Record current{};
  bool has_last = false;
  fmt::Record last{};
  bool watchdog_flagged = false;  // the watchdog flagged `current`
  bool unstable = false;        // kept changing or was mid-write: best effort
};

struct StackInfo {
  uint32_t tid = 0;
  uint64_t pthread_id = 0;      // pthread_self() of the thread (0: old writer)
  std::string thread_name;
  fmt::StackReason reason = fmt::StackReason::kNone;
  fmt::StackStatus status = fmt::StackStatus::kEmpty;
  uint64_t ticks = 0;
  int32_t lock_holder_pid = 0;  // blocked on a file lock this process holds
  fmt::StackMethod method = fmt::StackMethod::kSignal;  // how it was taken
  uint8_t flags = 0;            // fmt::StackFlag bits
  int syscall_nr = -1;          // kBlockedRead: the system call it was blocked in
  std::vector<fmt::StackFrame> frames;
};
// Why a thread's stack slot holds no frames, as a person reads it: "" for
// a stack that was read (done or truncated). The one place inspect and the
// reports take it from.
std::string WhyStackNotRead(const StackInfo& st);

// An executable mapping of the process when its stacks were captured.
struct ModuleInfo {
  uint64_t start = 0, end = 0, file_offset = 0;
  std::string path;
};

// One Python frame of a thread, innermost first within the thread.
struct PyFrameInfo {
  uint32_t tid = 0;          // kernel tid; 0 when it could not be matched
  uint64_t thread_id = 0;    // CPython's id of the thread (its pthread_t)
  uint32_t depth = 0;
  int32_t line = -1;
  uint16_t flags = 0;        // fmt::PyFrameFlags
  std::string function, file;
};

struct Event {
  fmt::Record rec{};
  uint32_t lane = 0;
  uint64_t index = 0;  // index within its lane
};

struct TraceSnapshot {
  std::string path;
  uint64_t bytes = 0;  // size of the file as read
  fmt::FileHeader header{};
  fmt::ProcessInfo process{};
  std::vector<CallDesc> calls;
  std::vector<CommInfo> comms;      // index = CommEntry index in the file
  std::vector<bool> comm_valid;     // false: slot never published / unreadable
  std::vector<ThreadInfo> threads;  // slots with an owner
  std::vector<StackInfo> stacks;    // the latest capture round, plus crashes
  std::vector<Event> events;        // every lane, ordered by time (but see lanes_in_place)
  uint64_t events_lost = 0;         // overwritten by the ring wrapping
  uint64_t events_rejected = 0;     // being written, or torn: not accepted
  // Lanes whose records were left where they were read (ReadOptions::
  // events_in_place): slots [first, first + span) of the lane, those whose
  // ticket is their index accepted (already checked: a copy does not change).
  struct LaneInPlace {
    const fmt::Record* slots = nullptr;
    uint64_t slot_mask = 0;
    uint64_t first = 0, span = 0;
    uint32_t lane = 0;
    uint16_t version = 0;
  };
  std::vector<LaneInPlace> lanes_in_place;
  uint64_t events_in_place = 0;  // records accepted in lanes_in_place

  // Every record read, as visit(record, lane, index): `events`, then those
  // left in place, lane by lane (read where they are: no copy).
  template <class F>
  void ForEachRecord(F&& visit) const {
    for (const Event& e : events) visit(e.rec, e.lane, e.index);
    for (const LaneInPlace& l : lanes_in_place) {
      for (uint64_t idx = l.first; idx < l.first + l.span; ++idx) {
        const fmt::Record& r = l.slots[idx & l.slot_mask];
        if (r.commit == fmt::TicketOfVersion(idx, l.version)) visit(r, l.lane, idx);
      }
    }
  }
  uint64_t EventCount() const { return events.size() + events_in_place; }
  std::vector<std::string> names;   // interned strings (kSecNames)
  std::vector<ModuleInfo> modules;  // the module map of the capture round
  std::vector<PyFrameInfo> py_frames;  // Python frames of the capture round
  std::vector<std::string> warnings;

  // Clock conversion (ClockInfo of the file).
  int64_t TicksToMonoNs(uint64_t ticks) const;
  int64_t TicksToRealNs(uint64_t ticks) const;
  // Seconds from `from` to `to` ticks of this file.
  double Seconds(uint64_t from, uint64_t to) const;
  // The last moment the file vouches for: the exit or crash, else the last
  // heartbeat (CLOCK_MONOTONIC ns of the writer's machine).
  int64_t LastKnownMonoNs() const;
  // How long the call that began at `begin_ticks` had been running then.
  double SecondsInCall(uint64_t begin_ticks) const;

  // When the stacks were captured: the newest time of a thread that
  // answered (one that blocks the capture signal, or never answered, has
  // none); 0 when none did.
  uint64_t CaptureTicks() const;

  std::string CallName(uint16_t call) const;
  // The kernel name of a launch record (aux = name index + 1), or "".
  std::string KernelName(const fmt::Record& r) const {
    bool device = r.kind == uint8_t(fmt::EventKind::kDevicePending) || r.kind == uint8_t(fmt::EventKind::kComplete);
    uint64_t n = device ? uint64_t(uint32_t(r.result)) : r.aux;
    return n > 0 && n <= names.size() ? names[n - 1] : std::string();
  }
  // Inline: the analysis asks once per record.
  const CallDesc* Call(uint16_t call) const { return call < calls.size() ? &calls[call] : nullptr; }
  const CommInfo* Comm(uint16_t comm) const;
  // The communicator's label, or its id in hex.
  std::string CommLabel(uint16_t comm) const;
};

struct ReadOptions {
  bool events = true;       // false: skip the ring (fast: header, tables, stacks)
  bool sort_events = true;  // false: lane by lane, each in time order
  // ReadTraceFile may leave a file's records where it read them (a whole
  // small file read into the reading thread's buffer): TraceSnapshot::
  // lanes_in_place names them, valid until the thread reads its next file,
  // and ForEachRecord visits them with `events`, lane by lane (sort_events is
  // then ignored). Copying them (80 bytes each, 258 M at 131,072 ranks)
  // was the loader's largest cost.
  bool events_in_place = false;
};

// Reads bytes of a trace file (a mapping or a copy). On failure returns
// nullopt and sets `error` to one sentence naming the problem.
std::optional<TraceSnapshot> ReadTraceBytes(const uint8_t* data, size_t size,
                                            const std::string& path, std::string* error,
                                            const ReadOptions& options = {});

// Maps and reads the file at `path` (read-only; the writer may be running).
std::optional<TraceSnapshot> ReadTraceFile(const std::string& path, std::string* error,
                                           const ReadOptions& options = {});

// The trace files under `path`: the file itself, or the regular files named
// *.htrace in a folder and its subfolders (job folders, dump folders),
// sorted by name. Links inside are not followed; what is skipped (links,
// fifos, devices, folders that cannot be read) is described in `warnings`.
// `error`: the path itself cannot be used.
// Who may own the folders found inside a folder `top` given to the tools:
// top's owner (this user where others may write in top: /tmp, a shared
// dump folder) and root. What another user planted there (a job folder in
// /dev/shm/hangtrace-<me>, a node folder in a shared dump folder) is
// skipped, with its owner named.
class FolderTrust {
 public:
  explicit FolderTrust(const std::string& top);
  // "" when the folder `dir` inside top is trusted, else one sentence why not.
  std::string Distrust(const std::string& dir) const;

 private:
  std::string top_;
  int64_t uid_ = -1;  // -1: top could not be read (then nothing is judged)
};

// A rank the storage had no room for leaves an empty file named
// "host.pid.rank3of8.no-room" in its job's folder (tracer/format.h).
struct NoRoomMarker {
  std::string path, host;
  int32_t pid = 0, rank = -1, world_size = -1;
};
// The marker a file name describes; false when it is none.
bool ParseNoRoomMarker(const std::string& path, NoRoomMarker* out);

// `no_room`, when given, collects the markers found beside the files;
// `dump_folders` the folders that hold a dump's node.json (the path itself
// and its subfolders one level down, as FindNodeDumps finds them), from the
// same listing.
std::vector<std::string> FindTraceFiles(const std::string& path, std::string* error,
                                        std::vector<std::string>* warnings = nullptr,
                                        std::vector<NoRoomMarker>* no_room = nullptr,
                                        std::vector<std::string>* dump_folders = nullptr);

// What /proc says of the process that wrote a snapshot. Only decidable for a
// file written on this machine since its last boot: otherwise kUnknown (a
// copied file, another node). A pid now used by another process counts as
// gone: start times differ.
enum class Liveness { kUnknown, kRunning, kStopped, kZombie, kGone };
Liveness ProcessLiveness(const TraceSnapshot& s);

// A runtime beats ten times a second: this much silence means its process is
// stopped or wedged below the tracer (used by inspect, dump and analyze).
inline constexpr double kHeartbeatStaleSeconds = 5.0;

// A communicator id as the reports print it: 16 hex digits.
std::string HexId(uint64_t id);

// Copies a string field of fixed capacity, stopping at NUL or capacity, as
// text to print: a control byte or a byte that is not valid UTF-8 becomes
// '?' (a damaged or planted file must not write escape sequences to the
// terminal of whoever reads its report). Names, labels, hosts, Python
// frames, command lines.
std::string BoundedString(const char* s, size_t cap);
// The same bytes unchanged: a file's path that is opened, not only shown
// (a module's, whose symbols name the frames).
std::string BoundedBytes(const char* s, size_t cap);

}  // namespace hangtrace
