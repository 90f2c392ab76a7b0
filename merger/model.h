// The analyzer's view of a job: what each rank is doing, the communicators
// rebuilt from every file, and the collective signatures seen at each
// (comm, seq). Built by LoadJob in one pass over the trace files; the
// records themselves are not kept, so memory is per rank, not per record.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "merger/frames.h"
#include "merger/rank_set.h"
#include "merger/trace_reader.h"
#include "tracer/format.h"

namespace hangtrace {

enum class RankState : uint8_t {
  kInCall,    // blocked (or busy) inside a call: traced, or seen on its stacks
  kCompute,   // alive, not in any traced call
  kExited,    // exited (normally or not) and recorded it
  kCrashed,   // a fatal signal was recorded
  kGone,      // no exit record, and the process is gone (SIGKILL, OOM)
  kStopped,   // the process exists but is stopped (dump: state T)
  kMissing,   // no trace file at all
};
const char* RankStateName(RankState s);

// How a process ended, as its file and /proc (or a dump's photograph of it)
// tell. The facts the rank's state is decided from (rank_state.cc).
enum class Ending : uint8_t {
  kRunning,     // not known to have ended (alive, or on another machine)
  kExited,      // exit() ran and was recorded
  kCrashed,     // a fatal signal was recorded
  kTerminated,  // gone without an exit record after a SIGTERM arrived
  kKilled,      // gone without any record: SIGKILL, the OOM killer
};
const char* EndingName(Ending e);

// What a rank's position stands on, best first: its trace (the call it is
// in, with communicator and sequence number), its stacks (the innermost
// communication or waiting frame, captured by its watchdog or a dump), or
// its liveness alone (alive, stopped, gone: nothing says where it is).
enum class Basis : uint8_t { kTrace, kStacks, kLiveness };
const char* BasisName(Basis b);

// A call a rank is in (or was last in), resolved to global names.
// What a rank's ring shows of its point-to-point traffic with one peer on
// one tag of one communicator. A send whose peer received fewer on that
// tag is unreceived (a tag or source mismatch).
struct P2pTraffic {
  int32_t comm = -1, peer = -1, tag = 0;  // global comm; peer as the comm's rank
  uint32_t wildcard_taken = 0;  // of the received, how many an MPI_ANY_SOURCE receive took
  uint64_t sent = 0;            // the highest send sequence posted to the peer
  uint64_t received = 0;        // the highest receive sequence completed from it
  // Persistent sends made (MPI_Send_init, ...): a send made and never
  // started shows here and not in `sent`.
  uint64_t persistent_sends = 0;
  bool operator<(const P2pTraffic& o) const {
    return std::tie(comm, peer, tag) < std::tie(o.comm, o.peer, o.tag);
  }
};

struct CallPoint {
  bool valid = false;
  uint16_t name = 0;       // interned call name (Job::names)
  fmt::Op op = fmt::Op::kNone;
  uint8_t call_flags = 0;  // fmt::CallFlags
  int32_t comm = -1;       // global comm index (Job::comms), -1 none
  uint64_t seq = 0;
  int32_t peer = -1;       // as recorded: the comm's rank (root or peer)
  int32_t tag = 0;
  // An MPI_Sendrecv's receive half (fmt::kRecSendrecv): the comm's rank it
  // receives from (kAnyPeer, kNullPeer; kNoPeer: not recorded) and the tag.
  int32_t recv_peer = fmt::kNoPeer;
  int32_t recv_tag = 0;
  uint64_t recv_seq = 0;   // its sequence number among receives from that peer
  uint64_t count = 0;
  uint8_t dtype = 0, redop = 0;
  uint64_t handle = 0;
  uint64_t ticks = 0;      // its BEGIN's raw clock ticks, as recorded (what progress compares)
  int64_t begin_real_ns = 0;
  double seconds = 0;      // from its begin to the last moment the file vouches for
  // The host returned (the work was enqueued on a stream) but the device
  // never finished it: the rank's position is on the device, not the host.
  bool on_device = false;
  int32_t kernel = -1;     // interned kernel name of a launch (Job::names), -1 none
  // Seen on the rank's stacks, not in its trace (a call hangtrace does not
  // wrap: torch.distributed on gloo, Fortran, another MPI): `name` and `op`
  // only; whom it waits for is not known.
  bool from_stacks = false;
  // A wait for a file lock (fcntl, flock) another process holds: that
  // holder's world rank (-1 none, or not a rank of the job).
  int32_t lock_holder = -1;
};

// One thread's stack: ids into Job::frames, innermost first. Stacks a
// process captured itself come in two parts (native program counters and
// CPython's frames) and are mixed into `frames` once the native frames have
// names (FinishStacks).
struct ThreadStack {
  uint32_t tid = 0;
  std::string name;                   // the thread's name ("" unknown)
  std::vector<uint32_t> frames;
  std::vector<uint32_t> python;       // until mixed: its Python frames
  std::vector<bool> python_entry;     // their entry marks (frames.h)
  bool entries_known = false;         // marked by the dump, not guessed
  // As a dump read it from /proc (empty: the process's own capture).
  std::string state;                  // "S", "R", "D", "T", ...
  std::string syscall;                // the system call it is in (its number)
  // Blocked on a file lock: the process holding it, and the file.
  int32_t lock_holder_pid = 0;
  std::string lock_file;
  // Why its native stack was not read, as the capture said ("" read, or
  // not said): its Python and kernel frames may still be known.
  std::string not_read;
};

// Thread `tid` of a process's stacks (its main thread: tid = pid), else
// the first thread read; null when none was read.
inline const ThreadStack* ThreadOrFirst(const std::vector<ThreadStack>& stacks, int32_t tid) {
  for (const ThreadStack& t : stacks) {
    if (t.tid == uint32_t(tid)) return &t;
  }
  return stacks.empty() ? nullptr : &stacks.front();
}

// A rank's own process that is no rank, as a dump found it (a DataLoader's
// worker, a multiprocessing pool, a subprocess): what the rank may wait for.
struct ChildProcess {
  int32_t pid = 0;
  std::string name;       // its program, from its command line ("python3")
  std::string cmdline;
  std::string state;      // /proc state when dumped ("S", "R", "T", ...)
  std::string error;      // why its stacks could not be read, if so
  std::vector<ThreadStack> stacks;
  // Decided with the ranks' stacks (FinishStacks): where its main thread
  // is: the innermost frame of the user's code, the communication or
  // waiting call its stacks show ("" none), else its innermost named frame.
  int64_t user_frame = -1;
  std::string call;
  int64_t idle_frame = -1;
};

// One rank: the facts its file (and a dump) give, read by the loader's
// stages, and its state, decided once from them (DecideRankStates).
struct RankView {
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  std::string path;

  // --- decided (rank_state.cc), read by the diagnosis ---
  RankState state = RankState::kMissing;
  Basis basis = Basis::kTrace;  // what `state` and `current` stand on
  // Its process is gone without an exit record (in a call or not): killed.
  bool dead = false;
  // It ended (exit, signal, killed) while inside `current`, which never
  // returned: it is analyzed where it was (a hung job torn down later).
  bool ended_in_call = false;
  double silent_s = 0;            // heartbeat age against the job's newest one
  // In a dump: its heartbeat's age when the dump found it (-1: not dumped).
  // The snapshots of a node are copied one after another, seconds apart on
  // a loaded node: against the newest snapshot's heartbeat, the first ones
  // copied would look silent.
  double dump_heartbeat_age_s = -1;

  // --- facts of the file (the snapshot stage) ---
  Ending ending = Ending::kRunning;
  Liveness liveness = Liveness::kUnknown;  // /proc when read, or the dump's photograph
  int32_t exit_code = 0, signal = 0;
  uint32_t signal_tid = 0;        // the thread that received the fatal signal
  bool watchdog = false;          // the watchdog flagged `current`
  double watchdog_timeout_s = 0;  // the watchdog's timeout (0: off)
  int64_t heartbeat_real_ns = 0;  // the runtime's last sign of life
  int32_t term_signal = 0;        // the SIGTERM it received (0: none), from whom
  std::string term_sender;        // "mpirun (pid 42)", "" unknown
  // When it ended, or its last sign of life: the SIGTERM's arrival, the
  // exit or crash, else the later of its last heartbeat and its last record
  // (realtime ns).
  int64_t end_real_ns = 0;
  int64_t last_record_real_ns = 0;  // its program threads' newest record (0: none)
  uint8_t rank_source = 0;        // fmt::RankSource: where its rank came from
  uint64_t start_time = 0;        // /proc start time (clock ticks since boot)
  int32_t ppid = 0;
  bool initialized = false;       // it initialized a communication library (MPI_Init, a communicator)
  // Why its trace cannot say where it is, "" when it can, as what it is:
  // "not traced (...)" when the storage had no room for its file (a
  // *.no-room marker) or for some of its threads' lanes; "missing from the
  // dump (...)" when a dump does not hold it. Such a rank outside any
  // traced call is never read as computing, and never a culprit alone.
  std::string blind;

  // --- the record scan ---
  CallPoint current;        // the call it is in (kInCall)
  // How long `current`'s call (the same call on the same communicator, on
  // the same thread) took before, as far as its ring shows: how many
  // completed and the longest of them. What one look at a live job weighs
  // its wait against (a slow job waits as long as it always did).
  uint32_t usual_calls = 0;
  double usual_longest_s = 0;
  CallPoint previous;       // the last call it returned from before that
  bool traced_call = false; // `current` came from its trace (a thread's open call)
  // With device completion: where the host thread is while `current` is
  // the oldest work its device never finished (cudaStreamSynchronize,
  // a later launch; invalid when the host is outside any traced call).
  CallPoint host_call;
  uint32_t device_pending = 0;  // operations enqueued and not finished
  std::vector<std::pair<int32_t, uint64_t>> entered;  // (global comm, collectives entered)
  std::vector<CallPoint> pending;   // nonblocking posts never completed
  // Point-to-point traffic the ring shows, one entry per (global comm, peer
  // as the comm's rank, tag), sorted by them (Traffic() finds one).
  std::vector<P2pTraffic> p2p;
  uint32_t call_tid = 0;          // the thread in `current` (0 unknown)
  // The name of that thread when it is not the main one ("worker5", a
  // Python thread's "Thread-2"), "" when it is the main thread or unknown.
  std::string call_thread;
  uint64_t records = 0;     // records its program threads ever wrote (lane heads): moves with any call
  // Outside any call: when its main thread left its last traced call
  // (realtime ns), which another thread's calls (a heartbeat's) do not
  // make recent; `previous` is that call. 0: its program threads' newest
  // record says (no main thread's call known).
  int64_t outside_since_real_ns = 0;
  uint64_t outside_since_ticks = 0;  // the same as raw ticks (what progress compares)
  // A thread not the main one in a call younger than a second while the
  // main thread has been outside calls for longer (a heartbeat thread's
  // all-reduce, a progress thread's wait): said beside the rank, never its
  // position. Invalid when none.
  CallPoint side_call;
  uint32_t worker = 0;      // which loader's signature table holds its calls

  // --- stacks ---
  std::vector<ThreadStack> stacks;
  uint32_t python_version = 0;    // PY_VERSION_HEX when the process runs Python
  // Where in the program the rank waits: the innermost frame of the user's
  // own code (FrameOwner::kUser, Python or native) on the thread in
  // `current` (Job::frames id); a Python program with none there, its
  // innermost Python frame; -1 when there is none.
  int64_t user_frame = -1;
  // The communication or waiting call its stacks show (StackCall): where it
  // is when its trace is silent.
  CallPoint stack_call;
  uint32_t stack_call_tid = 0;
  // Outside any call: the innermost frame of its main thread, where it
  // computes or sleeps ("clock_nanosleep"), -1 unknown (Job::frames).
  int64_t idle_frame = -1;
  // Its main thread's native stack was not read (the capture left a thread
  // running in the kernel alone, or could not reach it; its kernel and
  // Python frames may be known): where the rank is stays unknown, and its
  // other threads' stacks do not stand in for it.
  bool main_stack_unread = false;
  std::string dump_state;   // /proc state when `hangtrace dump` read it ("" not dumped)
  // Untraced: known only from a dump (its rank from its environment, its
  // call from its stacks). No communicator, sequence number or history.
  bool from_stacks = false;
  std::string rank_from;    // with from_stacks: the variable its rank came from
  // Other processes that claimed this rank (a child that inherited its
  // environment, a wrapper shell): shown beside it, never instead of it.
  std::vector<std::string> also;
  // Its own processes that are no ranks (ChildProcess), when a dump took them.
  std::vector<ChildProcess> children;

  // Since when it has been outside any traced call (realtime ns, 0 unknown).
  int64_t OutsideSince() const { return outside_since_real_ns ? outside_since_real_ns : last_record_real_ns; }
  uint64_t Entered(int32_t comm) const {
    for (const auto& [c, n] : entered) {
      if (c == comm) return n;
    }
    return 0;
  }
  // Its traffic with `peer` on `tag` of `comm` (nullptr: none in the ring).
  const P2pTraffic* Traffic(int32_t comm, int32_t peer, int32_t tag) const {
    P2pTraffic key;
    key.comm = comm, key.peer = peer, key.tag = tag;
    auto it = std::lower_bound(p2p.begin(), p2p.end(), key);
    return it != p2p.end() && !(key < *it) ? &*it : nullptr;
  }
};

struct GlobalComm {
  uint64_t id = 0;
  std::string label;        // set name, or the id in hex
  std::string family;       // label without its trailing index: "pp1" -> "pp"
  fmt::CommKind kind = fmt::CommKind::kUnknown;
  int32_t size = 0;
  std::vector<int32_t> members;  // world rank of comm rank i (-1 unknown)
  bool world = false;
  // How it was made: its parent's id (0 none), the creating call and the
  // parent's creation counter. Communicators made by one call of a parent
  // (the halves of an MPI_Comm_split) run the same code: one family.
  uint64_t parent_id = 0;
  uint32_t parent_counter = 0;
  uint16_t creator_call = 0xffff;
};

// What a rank passed to a collective: compared across ranks at (comm, seq).
struct CollSig {
  uint16_t name = 0;
  uint8_t dtype = 0, redop = 0;
  int32_t root = -1;
  uint64_t count = 0;
  bool operator==(const CollSig& o) const {
    return name == o.name && dtype == o.dtype && redop == o.redop && root == o.root && count == o.count;
  }
};

// The first signature seen at each sequence number of one communicator, for
// the sequence numbers the rings hold: a dense window (one array index per
// record, the linear-time check) that grows to cover them, and a hash map for
// the rare number far outside it. Memory follows the records read, never the
// sequence numbers: a job at seq 208,000,000 costs what its rings hold.
class SigWindow {
 public:
  using Entry = std::pair<int32_t, CollSig>;  // (rank, sig); rank -1: unset
  // The entry for `seq` (created unset), or null when seq is 0. Inline for
  // the common case, a sequence number inside the window (once per
  // collective record read).
  Entry* Slot(uint64_t seq) {
    if (base_ && seq >= base_ && seq - base_ < dense_.size()) {
      Entry* e = &dense_[seq - base_];
      if (e->first < 0) ++filled_;  // the caller fills an unset entry
      return e;
    }
    return SlotOutside(seq);
  }
  const Entry* Find(uint64_t seq) const;
  // Entries held (the memory it takes, in entries).
  size_t Held() const { return dense_.size() + far_.size(); }
  // Calls f(seq, entry) for every set entry.
  template <typename F>
  void ForEach(F f) const {
    for (size_t i = 0; i < dense_.size(); ++i) {
      if (dense_[i].first >= 0) f(base_ + i, dense_[i]);
    }
    for (const auto& [seq, e] : far_) f(seq, e);
  }

 private:
  Entry* SlotOutside(uint64_t seq);  // grows the window, or the hash map
  uint64_t base_ = 0;           // seq of dense_[0]; 0: empty
  std::vector<Entry> dense_;
  std::unordered_map<uint64_t, Entry> far_;
  size_t filled_ = 0;
};

// The files of one job id among the paths given.
struct JobFiles {
  size_t files = 0;
  std::string example;  // one of them
};

// The files of one run of the job (fmt::ProcessInfo::run): concurrent
// steps of one allocation, or reruns under one job id.
struct RunFiles {
  size_t files = 0;
  std::string example;         // one of them
  int64_t start_real_ns = 0;   // its newest process start: runs are told newest first
};

struct Job {
  int32_t world_size = 0;
  // Every job id the files name: more than one, and the paths mix jobs
  // (analyze refuses: their ranks and sequence numbers mean nothing together).
  std::map<std::string, JobFiles> jobs;
  // Every run the files name ("" where unknown). More than one: the files
  // of several launches under one job id, analyzed run by run (LoadOptions::run).
  std::map<std::string, RunFiles> runs;
  std::vector<RankView> ranks;        // index = world rank; kMissing when absent
  std::vector<GlobalComm> comms;
  std::unordered_map<uint64_t, int32_t> comm_index;
  std::vector<std::string> names;     // interned call names
  std::unordered_map<std::string, uint16_t> name_index;
  std::vector<Frame> frames;          // distinct stack frames
  FrameOwners owners;                 // whose code each frame is (LoadOptions::user_paths)
  std::unordered_map<std::string, uint32_t> frame_index;
  uint32_t InternFrame(const Frame& f);
  // Per loader thread, the first signature it saw at each (comm, seq):
  // sig_tables[worker][comm].Find(seq) = (rank, sig). A rank's signature
  // there is its worker's first one, unless `odd` holds its own.
  using SigTable = std::vector<SigWindow>;
  std::vector<SigTable> sig_tables;
  struct Odd {
    int32_t comm;
    uint64_t seq;
    int32_t rank;
    CollSig sig;
  };
  std::vector<Odd> odd;
  // The same, by (comm, seq, rank), for SigOf (built once after loading).
  std::unordered_map<std::string, CollSig> odd_index;
  static std::string OddKey(int32_t comm, uint64_t seq, int32_t rank);
  // (comm, seq) where some rank's signature differs from another's.
  std::vector<std::pair<int32_t, uint64_t>> flagged;
  // The signature `rank` passed at (comm, seq), if it is known.
  bool SigOf(int32_t rank, int32_t comm, uint64_t seq, CollSig* out) const;
  std::vector<std::string> warnings;
  // Ranks claimed by two files (a rerun in the same folder, a copied file):
  // said with the verdict, since they change what it stands on.
  std::vector<std::string> duplicates;
  size_t files = 0;
  uint64_t records = 0;

  uint16_t Intern(const std::string& name);
  int32_t CommByRank(int32_t comm, int32_t comm_rank) const;  // world rank or -1
  // The world ranks of a communicator's members that are in the job.
  std::vector<int32_t> Members(int32_t comm) const;
};

// What tells classes of ranks apart by place (RankView::user_frame): a
// Python frame, the program's line a Python rank waits at, which CPython's
// own structures give whole; -1 for a native one, which a stack read
// partly may lack: ranks are not split on it, and their class shows it
// only when all of them agree.
inline int64_t PlaceKey(const Job& job, int64_t user_frame) {
  return user_frame >= 0 && size_t(user_frame) < job.frames.size() &&
                 job.frames[size_t(user_frame)].lang == Frame::Lang::kPython
             ? user_frame
             : -1;
}

// The most ranks a job may have, ten times the largest jobs hangtrace is
// built for. A file claiming more is damaged or crafted: the analysis keeps
// about 540 bytes per world rank, traced or not, so one 6 KB file claiming
// 3 million ranks cost 1.7 GB (found by scripts/fuzz.sh).
inline constexpr int32_t kMaxRanks = 1 << 20;

struct LoadOptions {
  int threads = 0;  // 0: hardware concurrency
  // Only the files of this run (Job::runs), when set; the others are
  // counted in Job::runs and left out.
  std::optional<std::string> run;
  // Folders of the user's own code (HANGTRACE_USER_PATHS): FrameOwners.
  std::vector<std::string> user_paths;
  // Called about twice a second while files are read (from one reader
  // thread): files read so far, files in all.
  std::function<void(size_t done, size_t total)> progress;
};

// Reads every trace file under `paths` into a Job. Damaged files become
// warnings; files of fork children and exec'ed images are skipped.
Job LoadJob(const std::vector<std::string>& paths, const LoadOptions& options = {});

// Names the native frames of every stack (once per distinct frame, from
// the files on disk) and mixes in the Python frames. LoadJob calls it.
void FinishStacks(Job* job);

}  // namespace hangtrace
