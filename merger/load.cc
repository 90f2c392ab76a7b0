// LoadJob: one pass over every trace file, in parallel, into a Job.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <unistd.h>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "merger/model.h"
#include "merger/node_dump.h"
#include "merger/symbolize.h"
#include "merger/trace_reader.h"

namespace hangtrace {

const char* RankStateName(RankState s) {
  switch (s) {
    case RankState::kInCall: return "in_call";
    case RankState::kCompute: return "compute";
    case RankState::kExited: return "exited";
    case RankState::kCrashed: return "crashed";
    case RankState::kGone: return "gone";
    case RankState::kStopped: return "stopped";
    case RankState::kMissing: return "missing";
  }
  return "unknown";
}

uint32_t Job::InternFrame(const Frame& f) {
  std::string key;
  key.reserve(f.func.size() + f.file.size() + f.module.size() + 32);
  key.push_back(char('0' + int(f.lang)));
  key += f.func;
  key.push_back('\0');
  key += f.file;
  key.push_back('\0');
  key += std::to_string(f.line);
  key.push_back('\0');
  key += f.module;
  key.push_back('\0');
  key += std::to_string(f.offset);
  auto [it, fresh] = frame_index.emplace(std::move(key), uint32_t(frames.size()));
  if (fresh) {
    frames.push_back(f);
    frames.back().entry = false;
  }
  return it->second;
}

uint16_t Job::Intern(const std::string& name) {
  auto it = name_index.find(name);
  if (it != name_index.end()) return it->second;
  uint16_t id = uint16_t(names.size());
  names.push_back(name);
  name_index.emplace(name, id);
  return id;
}

std::vector<int32_t> Job::Members(int32_t comm) const {
  std::vector<int32_t> out;
  if (comm < 0) return out;
  const GlobalComm& c = comms[size_t(comm)];
  int32_t n = c.world ? world_size : int32_t(c.members.size());
  for (int32_t i = 0; i < n; ++i) {
    int32_t r = c.world ? i : c.members[size_t(i)];
    if (r >= 0 && r < world_size) out.push_back(r);
  }
  return out;
}

namespace {
std::string OddKey(int32_t comm, uint64_t seq, int32_t rank) {
  std::string k(16, '\0');
  memcpy(&k[0], &comm, 4);
  memcpy(&k[4], &seq, 8);
  memcpy(&k[12], &rank, 4);
  return k;
}
// A dense window may span at most this many entries per entry it holds
// (plus a floor): beyond, a sequence number goes to the hash map.
constexpr size_t kWindowSlack = 4, kWindowFloor = 4096;
}  // namespace

SigWindow::Entry* SigWindow::SlotOutside(uint64_t seq) {
  if (seq == 0) return nullptr;
  if (base_ == 0) {
    base_ = seq;
    dense_.assign(1, {-1, CollSig{}});
  }
  const size_t limit = kWindowFloor + kWindowSlack * filled_;
  Entry* e = nullptr;
  if (seq >= base_ && seq - base_ < dense_.size()) {
    e = &dense_[seq - base_];
  } else if (seq >= base_ && seq - base_ < limit) {
    dense_.resize(seq - base_ + 1, {-1, CollSig{}});
    e = &dense_[seq - base_];
  } else if (seq < base_ && base_ - seq + dense_.size() <= limit) {
    // Grow the front with headroom, so that many ranks a little behind
    // each other do not each move the whole window.
    uint64_t grow = std::max<uint64_t>(base_ - seq, dense_.size());
    grow = std::min<uint64_t>({grow, limit - dense_.size(), base_ - 1});
    dense_.insert(dense_.begin(), size_t(grow), {-1, CollSig{}});
    base_ -= grow;
    e = &dense_[seq - base_];
  } else {
    auto [it, fresh] = far_.emplace(seq, Entry{-1, CollSig{}});
    e = &it->second;
  }
  if (e->first < 0) ++filled_;  // the caller fills an unset entry
  return e;
}

const SigWindow::Entry* SigWindow::Find(uint64_t seq) const {
  if (base_ && seq >= base_ && seq - base_ < dense_.size()) {
    return dense_[seq - base_].first >= 0 ? &dense_[seq - base_] : nullptr;
  }
  auto it = far_.find(seq);
  return it != far_.end() && it->second.first >= 0 ? &it->second : nullptr;
}

bool Job::SigOf(int32_t rank, int32_t comm, uint64_t seq, CollSig* out) const {
  if (!odd_index.empty()) {
    auto it = odd_index.find(OddKey(comm, seq, rank));
    if (it != odd_index.end()) {
      *out = it->second;
      return true;
    }
  }
  const RankView& v = ranks[size_t(rank)];
  if (v.worker >= sig_tables.size()) return false;
  const auto& table = sig_tables[v.worker];
  if (size_t(comm) >= table.size()) return false;
  const SigWindow::Entry* e = table[size_t(comm)].Find(seq);
  if (!e) return false;
  *out = e->second;
  return true;
}

int32_t Job::CommByRank(int32_t comm, int32_t comm_rank) const {
  if (comm < 0 || comm_rank < 0) return -1;
  const GlobalComm& c = comms[size_t(comm)];
  if (c.world) return comm_rank;
  return size_t(comm_rank) < c.members.size() ? c.members[size_t(comm_rank)] : -1;
}

namespace {

std::string Family(const std::string& label) {
  size_t end = label.size();
  while (end > 0 && label[end - 1] >= '0' && label[end - 1] <= '9') --end;
  return end == 0 ? label : label.substr(0, end);
}

// Builds a rank's point-to-point traffic (RankView::p2p) from its records.
// A rank talks to few peers on few tags: up to kScanned entries are
// scanned (a few ns), beyond that a hash index takes over (a program with a
// tag per step); Finish() sorts them for RankView::Traffic().
class TrafficTable {
 public:
  explicit TrafficTable(std::vector<P2pTraffic>* out) : out_(out) {}
  P2pTraffic& Of(int32_t comm, int32_t peer, int32_t tag) {
    std::vector<P2pTraffic>& v = *out_;
    if (v.size() <= kScanned) {
      for (P2pTraffic& t : v) {
        if (t.comm == comm && t.peer == peer && t.tag == tag) return t;
      }
      if (v.size() == kScanned) {
        for (size_t i = 0; i < v.size(); ++i) index_.emplace(Key{v[i].comm, v[i].peer, v[i].tag}, i);
      }
    }
    size_t at = v.size();
    if (v.size() >= kScanned) at = index_.try_emplace(Key{comm, peer, tag}, v.size()).first->second;
    if (at == v.size()) {
      P2pTraffic& t = v.emplace_back();
      t.comm = comm, t.peer = peer, t.tag = tag;
    }
    return v[at];
  }
  void Finish() { std::sort(out_->begin(), out_->end()); }

 private:
  struct Key {
    int32_t comm, peer, tag;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      const uint64_t a = uint64_t(uint32_t(k.comm)) << 32 | uint32_t(k.peer);
      return size_t((a ^ (uint64_t(uint32_t(k.tag)) * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull >> 17);
    }
  };
  static constexpr size_t kScanned = 8;
  std::vector<P2pTraffic>* out_;
  std::unordered_map<Key, size_t, KeyHash> index_;
};

// Per-worker tables, merged at the end (no lock on the per-record path).
struct Partial {
  std::vector<RankView> ranks;
  std::vector<SigWindow> first_sig;
  std::vector<Job::Odd> odd;
  std::vector<std::string> warnings;
  uint64_t records = 0;
  size_t files = 0;
  std::map<std::string, JobFiles> jobs;
  // The node.json processes of the folder of this worker's last file.
  std::string dump_folder;
  const std::unordered_map<int32_t, NodeProcess>* dump = nullptr;
};

class Loader {
 public:
  explicit Loader(Job* job) : job_(job) {}

  void LoadFile(const std::string& path, Partial* out) {
    std::string err;
    ReadOptions opts;
    opts.sort_events = false;
    auto snap = ReadTraceFile(path, &err, opts);
    if (!snap) {
      out->warnings.push_back(err + "; skipped");
      return;
    }
    const TraceSnapshot& s = *snap;
    for (const std::string& w : s.warnings) out->warnings.push_back(path + ": " + w);
    const fmt::ProcessInfo& p = s.process;
    JobFiles& of_job = out->jobs[BoundedString(p.job, sizeof(p.job))];
    if (of_job.files++ == 0) of_job.example = path;
    if (p.forked || fmt::ProcState(p.state) == fmt::ProcState::kExeced) return;  // not a rank
    if (p.rank >= kMaxRanks || p.world_size > kMaxRanks) {
      out->warnings.push_back(path + ": rank " + std::to_string(p.rank) + " of " + std::to_string(p.world_size) +
                              " is beyond the " + std::to_string(kMaxRanks) + " ranks hangtrace analyzes (a damaged "
                              "file?); skipped");
      return;
    }
    if (p.rank < 0) {
      out->warnings.push_back(path + ": no rank known (pid " + std::to_string(p.pid) + " on " + p.host +
                              " was not started by an MPI launcher); skipped");
      return;
    }
    ++out->files;
    out->records += s.events.size();

    // Map the file's calls and comms to global ones (one lock per file).
    std::vector<uint16_t> call_map(s.calls.size());
    std::vector<int32_t> comm_map(s.comms.size(), -1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < s.calls.size(); ++i) call_map[i] = job_->Intern(s.calls[i].name);
      for (size_t i = 0; i < s.comms.size(); ++i) {
        if (!s.comm_valid[i]) continue;
        const fmt::CommEntry& e = s.comms[i].entry;
        if (e.size < 0 || e.size > kMaxRanks || e.my_index >= e.size) {
          out->warnings.push_back(path + ": communicator " + HexId(e.id) + " claims " + std::to_string(e.size) +
                                  " members (index " + std::to_string(e.my_index) + "): damaged; ignored");
          continue;
        }
        comm_map[i] = AddComm(s.comms[i], p.rank);
      }
      job_->world_size = std::max(job_->world_size, std::max(p.world_size, p.rank + 1));
    }

    RankView v;
    v.rank = p.rank;
    v.host = p.host;
    v.pid = p.pid;
    v.path = path;
    v.exit_code = p.exit_code;
    v.signal = p.signal;
    v.heartbeat_real_ns = p.heartbeat_real_ns;
    v.term_signal = p.term_signal;
    if (p.term_signal) {
      const std::string who = BoundedString(p.term_sender, sizeof(p.term_sender));
      v.term_sender = (who.empty() ? "pid " + std::to_string(p.term_sender_pid)
                                   : who + " (pid " + std::to_string(p.term_sender_pid) + ")");
      if (p.term_sender_pid <= 0) v.term_sender = "the kernel or an unknown sender";
    }
    auto point = [&](const fmt::Record& r) {
      CallPoint c;
      c.valid = true;
      c.name = r.call < call_map.size() ? call_map[r.call] : 0;
      if (const CallDesc* d = s.Call(r.call)) {
        c.op = d->op;
        c.call_flags = d->flags;
      }
      c.comm = r.comm < comm_map.size() ? comm_map[r.comm] : -1;
      c.seq = r.seq;
      c.peer = r.peer;
      c.tag = r.tag;
      c.count = r.count;
      c.dtype = r.dtype;
      c.redop = r.redop;
      c.handle = r.handle;
      if (r.flags & fmt::kRecSendrecv) {
        c.recv_peer = int32_t(uint32_t(r.handle));
        c.recv_tag = int32_t(uint32_t(r.handle >> 32));
        c.recv_seq = r.aux;
      }
      c.ticks = r.ticks;
      c.begin_real_ns = s.TicksToRealNs(r.ticks);
      c.seconds = s.SecondsInCall(r.ticks);
      if (c.op == fmt::Op::kKernel) {
        std::string k = s.KernelName(r);
        if (!k.empty()) {
          std::lock_guard<std::mutex> lock(mu_);
          c.kernel = job_->Intern(Demangle(k));
        }
      }
      return c;
    };

    // The call the rank is in: the earliest still-open call of its threads.
    const ThreadInfo* in = nullptr;
    const ThreadInfo* latest = nullptr;
    for (const ThreadInfo& t : s.threads) {
      if (t.tracer) continue;
      if (t.in_call && (!in || t.current.ticks < in->current.ticks)) in = &t;
      if (t.has_last && (!latest || t.last.ticks > latest->last.ticks)) latest = &t;
    }
    v.python_version = p.python_version;
    for (const ThreadInfo& t : s.threads) v.records += t.tracer ? 0 : t.head;
    if (in) {
      v.current = point(in->current);
      v.call_tid = in->current.tid;
      v.watchdog = in->watchdog_flagged;
      if (in->has_last) v.previous = point(in->last);
    } else if (latest) {
      v.previous = point(latest->last);
    }
    // A rank killed inside a call (a launcher tearing the job down, a
    // timeout) is still where it waited: analysis after the fact sees the
    // job as it was. Only a rank that died outside any call is "gone".
    // A snapshot in a dump folder is a photograph: the process as the dump
    // found it, never what /proc says of its pid today.
    const NodeProcess* dumped = Dumped(path, p.pid, out);
    switch (fmt::ProcState(p.state)) {
      case fmt::ProcState::kExited: v.state = RankState::kExited; break;
      case fmt::ProcState::kCrashed: v.state = RankState::kCrashed; break;
      default:
        const Liveness live = dumped ? dumped->liveness : ProcessLiveness(s);
        v.dead = live == Liveness::kGone || live == Liveness::kZombie;
        if (live == Liveness::kStopped) v.state = RankState::kStopped;
        else if (in) v.state = RankState::kInCall;
        else v.state = (live == Liveness::kGone || live == Liveness::kZombie) ? RankState::kGone : RankState::kCompute;
    }
    for (size_t i = 0; i < s.comms.size(); ++i) {
      if (comm_map[i] >= 0) v.entered.push_back({comm_map[i], s.comms[i].entry.coll_seq});
    }

    // Every collective BEGIN against the first signature seen at its
    // (comm, seq): an array index, never a comparison between ranks.
    std::unordered_map<uint64_t, fmt::Record> open_requests;
    TrafficTable traffic(&v.p2p);
    std::unordered_map<uint32_t, fmt::Record> device_pending;  // track id -> DEVICE_PENDING
    uint64_t last_ticks = 0;  // the last moment the file shows the process alive
    for (const Event& e : s.events) {
      const fmt::Record& r = e.rec;
      last_ticks = std::max(last_ticks, r.ticks);
      const CallDesc* d = s.Call(r.call);
      if (!d) continue;
      if (r.kind == uint8_t(fmt::EventKind::kBegin) && (d->flags & fmt::kCallCollective) && r.seq &&
          r.comm < comm_map.size() && comm_map[r.comm] >= 0) {
        // Counts of the v/w collectives differ per rank by design: not compared.
        const uint64_t count = (d->flags & fmt::kCallPerRankCounts) ? 0 : r.count;
        CollSig sig{call_map[r.call], r.dtype, r.redop, (d->flags & fmt::kCallRooted) ? r.peer : -1, count};
        size_t comm = size_t(comm_map[r.comm]);
        if (out->first_sig.size() <= comm) out->first_sig.resize(comm + 1);
        SigWindow::Entry* slot = out->first_sig[comm].Slot(r.seq);
        if (slot->first < 0) *slot = {p.rank, sig};
        else if (!(slot->second == sig)) out->odd.push_back({int32_t(comm), r.seq, p.rank, sig});
      }
      if ((d->flags & fmt::kCallP2p) && r.comm < comm_map.size() && comm_map[r.comm] >= 0 && r.peer >= 0) {
        const bool sent = r.kind == uint8_t(fmt::EventKind::kBegin) && r.seq &&
                          (d->op == fmt::Op::kSend || d->op == fmt::Op::kSendrecv);
        const bool received = r.kind == uint8_t(fmt::EventKind::kEnd) && r.seq && d->op == fmt::Op::kRecv;
        const bool made = r.kind == uint8_t(fmt::EventKind::kMark) && d->op == fmt::Op::kSend;
        if (sent || received || made) {
          P2pTraffic& t = traffic.Of(comm_map[r.comm], r.peer, r.tag);
          if (sent) t.sent = std::max(t.sent, r.seq);
          if (received) t.received = std::max(t.received, r.seq);
          if (received && (r.flags & fmt::kRecAnyPeer)) ++t.wildcard_taken;
          if (made) ++t.persistent_sends;
        }
      }
      if (r.kind == uint8_t(fmt::EventKind::kDevicePending)) device_pending[r.aux] = r;
      if (r.kind == uint8_t(fmt::EventKind::kComplete)) device_pending.erase(r.aux);
      if (d->flags & fmt::kCallNonblocking) {
        if (r.kind == uint8_t(fmt::EventKind::kBegin)) open_requests[r.handle] = r;
        if (r.kind == uint8_t(fmt::EventKind::kEnd)) open_requests.erase(r.handle);
      }
    }
    traffic.Finish();
    v.end_real_ns = p.term_signal ? s.TicksToRealNs(p.term_ticks)
                                  : std::max(p.heartbeat_real_ns, last_ticks ? s.TicksToRealNs(last_ticks) : 0);
    for (const auto& [handle, r] : open_requests) {
      if (v.pending.size() < 16) v.pending.push_back(point(r));
    }
    if (s.header.features & fmt::kFeatDeviceEvents) PlaceOnDevice(s, device_pending, point, &v);
    // The process's own capture: program counters named later (after every
    // file is read, once per distinct frame), and CPython's frames.
    if (!s.stacks.empty() || !s.py_frames.empty()) {
      std::lock_guard<std::mutex> lock(mu_);  // Job::frames is shared
      for (const StackInfo& st : s.stacks) {
        ThreadStack t;
        t.tid = st.tid;
        for (const fmt::StackFrame& f : st.frames) {
          Frame frame;
          if (f.symbol[0]) {  // named by an older runtime, or simulated
            frame.func = Demangle(f.symbol);
          } else {
            frame = FrameAt(f.pc, s.modules);
          }
          t.frames.push_back(job_->InternFrame(frame));
        }
        v.stacks.push_back(std::move(t));
      }
      // A thread's frames are consecutive, depth 0 first; one whose tid was
      // not matched (it never answered the stack signal) stands alone.
      size_t current = SIZE_MAX;
      for (const PyFrameInfo& pf : s.py_frames) {
        if (pf.depth == 0 || current == SIZE_MAX) {
          current = SIZE_MAX;
          for (size_t i = 0; i < v.stacks.size() && pf.tid; ++i) {
            if (v.stacks[i].tid == pf.tid) current = i;
          }
          if (current == SIZE_MAX) {
            current = v.stacks.size();
            v.stacks.push_back(ThreadStack{pf.tid, {}, {}, {}, false});
          }
        }
        ThreadStack* t = &v.stacks[current];
        if (pf.flags & fmt::kPyFrameNone) continue;
        Frame frame;
        frame.lang = Frame::Lang::kPython;
        frame.func = pf.function;
        frame.file = pf.file;
        frame.line = pf.line > 0 ? pf.line : 0;
        t->python.push_back(job_->InternFrame(frame));
        t->python_entry.push_back(false);
      }
    }
    // A dump's stacks (node.json) are newer, read from outside: they replace
    // what the process captured itself. Unless the dump could not read the
    // Python frames that the process's own capture (on the dump's request)
    // holds: then that capture, whose native and Python stacks are of one
    // instant, is the better one.
    if (dumped) v.dump_state = dumped->state_before;
    const bool dump_has_stacks = dumped && std::any_of(dumped->threads.begin(), dumped->threads.end(),
                                                       [](const NodeThread& t) { return !t.frames.empty(); });
    if (dump_has_stacks && (dumped->HasPythonFrames() || s.py_frames.empty())) {
      std::lock_guard<std::mutex> lock(mu_);
      v.stacks.clear();
      for (const NodeThread& th : dumped->threads) {
        if (th.frames.empty()) continue;
        ThreadStack t;
        t.tid = th.tid;
        for (const Frame& f : th.frames) t.frames.push_back(job_->InternFrame(f));
        v.stacks.push_back(std::move(t));
      }
    }
    out->ranks.push_back(std::move(v));
  }

 private:
  // The node.json beside a trace file (a dump folder), read once per folder.
  // A worker remembers the folder of its last file: files come sorted, so
  // the lock is taken once per folder and worker, not once per file.
  const NodeProcess* Dumped(const std::string& trace_path, int32_t pid, Partial* out) {
    std::string folder = trace_path.substr(0, trace_path.find_last_of('/'));
    if (!out->dump || folder != out->dump_folder) {
      out->dump = &DumpOf(folder);
      out->dump_folder = std::move(folder);
    }
    auto found = out->dump->find(pid);
    return found == out->dump->end() ? nullptr : &found->second;
  }
  const std::unordered_map<int32_t, NodeProcess>& DumpOf(const std::string& folder) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = dumps_.emplace(folder, std::unordered_map<int32_t, NodeProcess>());
    if (fresh) {
      NodeDump node;
      std::string error;
      if (ReadNodeDump(folder, &node, &error)) {
        for (NodeProcess& p : node.processes) it->second[p.pid] = std::move(p);
      } else if (!error.empty()) {
        job_->warnings.push_back(folder + "/" + kNodeFile + ": " + error + "; its stacks are ignored");
      }
    }
    return it->second;  // a node of an unordered_map: stays where it is
  }
  std::unordered_map<std::string, std::unordered_map<int32_t, NodeProcess>> dumps_;

  // Device completion: a rank whose host is not inside a communication call
  // (it waits in a stream sync, launches more work, or computes) but whose
  // device never finished some enqueued work is where that work is: the
  // oldest unfinished operation is its position. Work queued behind it on
  // the same stream has not started, so collectives there are not entered.
  template <typename Point>
  static void PlaceOnDevice(const TraceSnapshot& s, const std::unordered_map<uint32_t, fmt::Record>& pending,
                            const Point& point, RankView* v) {
    v->device_pending = uint32_t(pending.size());
    if (pending.empty()) return;
    bool host_communicating = v->state == RankState::kInCall && v->current.comm >= 0 &&
                              (v->current.call_flags & (fmt::kCallCollective | fmt::kCallP2p));
    if (host_communicating || (v->state != RankState::kInCall && v->state != RankState::kCompute)) return;
    const fmt::Record* oldest = nullptr;
    for (const auto& [id, r] : pending) {
      if (!oldest || r.ticks < oldest->ticks || (r.ticks == oldest->ticks && r.aux < oldest->aux)) oldest = &r;
    }
    if (v->state == RankState::kInCall) v->host_call = v->current;
    v->current = point(*oldest);
    v->current.on_device = true;
    v->state = RankState::kInCall;
    for (const auto& [id, r] : pending) {
      if (&r == oldest || r.handle != oldest->handle || r.ticks < oldest->ticks) continue;
      const CallDesc* d = s.Call(r.call);
      if (!d || !(d->flags & fmt::kCallCollective) || !r.seq) continue;
      CallPoint q = point(r);
      for (auto& [comm, entered] : v->entered) {
        if (comm == q.comm && entered >= q.seq) entered = q.seq - 1;
      }
    }
  }

  // g: mu_ held.
  int32_t AddComm(const CommInfo& c, int32_t rank) {
    auto [it, inserted] = job_->comm_index.emplace(c.entry.id, int32_t(job_->comms.size()));
    if (inserted) job_->comms.emplace_back();
    GlobalComm& g = job_->comms[size_t(it->second)];
    g.id = c.entry.id;
    if (g.label.empty() || (g.label == HexId(c.entry.id) && c.entry.label[0])) {
      g.label = c.entry.label[0] ? BoundedString(c.entry.label, sizeof(c.entry.label)) : HexId(c.entry.id);
      g.family = Family(g.label);
    }
    g.kind = fmt::CommKind(c.entry.kind);
    g.size = std::max(g.size, c.entry.size);
    if (c.entry.flags & fmt::kCommWorld) g.world = true;
    if (!c.members.empty() && g.members.size() < c.members.size()) g.members = c.members;
    if (!g.world && c.members.empty() && c.entry.my_index >= 0 && c.entry.my_index < c.entry.size) {
      if (g.members.size() < size_t(c.entry.size)) g.members.resize(size_t(c.entry.size), -1);
      g.members[size_t(c.entry.my_index)] = rank;
    }
    return it->second;
  }

  Job* job_;
  std::mutex mu_;
};

}  // namespace

// The communication call a native stack is in: its innermost frame of the
// MPI, NCCL/RCCL or CUDA/HIP synchronizing APIs ("" when none). PMPI_ and
// pncl names are reported as the API users call.
std::string CommunicationCall(const Job& job, const ThreadStack& t) {
  auto starts = [](const std::string& s, const char* p) { return s.rfind(p, 0) == 0; };
  for (uint32_t id : t.frames) {
    const Frame& f = job.frames[id];
    if (f.lang != Frame::Lang::kNative || f.func.size() < 5) continue;
    std::string name = f.func.substr(0, f.func.find('('));
    if (starts(name, "PMPI_")) name = name.substr(1);
    if (starts(name, "pnccl")) name = name.substr(1);
    const bool mpi = starts(name, "MPI_") && name.size() > 4 && isupper(static_cast<unsigned char>(name[4]));
    const bool nccl = (starts(name, "nccl") || starts(name, "rccl")) && name.size() > 4 &&
                      isupper(static_cast<unsigned char>(name[4]));
    const bool sync = name.find("Synchronize") != std::string::npos &&
                      (starts(name, "cuda") || starts(name, "cu") || starts(name, "hip"));
    if (mpi || nccl || sync) return name;
  }
  return "";
}

// The folders under `path` that hold a dump's node.json: the path itself
// and its subfolders one level down (OUT/<host>/). Links are not followed.
std::vector<std::string> FindNodeDumps(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(path, ec))) return out;
  auto has = [&](const fs::path& dir) { return fs::is_regular_file(fs::symlink_status(dir / kNodeFile, ec)); };
  if (has(path)) out.push_back(path);
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    // Types from the listing (no stat per trace file); links not followed.
    std::error_code e2;
    if (!it->is_symlink(e2) && it->is_directory(e2) && has(it->path())) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A communicator nobody named is called by what it is: "comm 0a77 of 3:
// 0,2,4" (the id's last four hex digits, its size, its members as world
// ranks when known) instead of sixteen hex digits.
void NameUnlabeledComms(Job* job) {
  for (GlobalComm& c : job->comms) {
    if (c.world || c.label != HexId(c.id)) continue;
    std::string text = "comm " + c.label.substr(c.label.size() - 4) + " of " + std::to_string(c.size);
    RankSet members;
    bool all = !c.members.empty();
    for (int32_t m : c.members) {
      if (m < 0) all = false;
      else members.Add(m);
    }
    if (all) text += ": " + members.Brief(24);
    c.label = text;
    c.family = text;
  }
}

// Ranks a dump found without a trace file: from their environment and stacks.
void AddUntracedRanks(const std::vector<std::string>& paths, Job* job) {
  for (const std::string& p : paths) {
    for (const std::string& folder : FindNodeDumps(p)) {
      NodeDump node;
      std::string error;
      if (!ReadNodeDump(folder, &node, &error)) continue;  // said by the loader of its trace files
      for (const NodeProcess& np : node.processes) {
        if (!np.trace.empty()) continue;
        const std::string where = folder + "/" + kNodeFile + ": pid " + std::to_string(np.pid);
        if (np.rank < 0) {
          job->warnings.push_back(where + " has no rank in its environment and no trace file; skipped");
          continue;
        }
        if (np.rank >= kMaxRanks || np.world_size > kMaxRanks) {
          job->warnings.push_back(where + ": rank " + std::to_string(np.rank) + " is beyond what hangtrace analyzes; skipped");
          continue;
        }
        const int32_t size = std::max(np.world_size, np.rank + 1);
        if (size > job->world_size) {
          job->ranks.resize(size_t(size));
          for (int32_t r = job->world_size; r < size; ++r) job->ranks[size_t(r)].rank = r;
          job->world_size = size;
        }
        RankView& slot = job->ranks[size_t(np.rank)];
        if (slot.state != RankState::kMissing) {
          job->duplicates.push_back("rank " + std::to_string(np.rank) + " twice: " + (slot.path.empty() ? "?" : slot.path) +
                                  " and " + where + " (untraced); using the first");
          continue;
        }
        RankView v;
        v.rank = np.rank;
        v.host = node.host;
        v.pid = np.pid;
        v.path = folder + "/" + kNodeFile;
        v.from_stacks = true;
        v.rank_from = np.rank_from;
        v.dump_state = np.state_before;
        std::string call;
        for (const NodeThread& th : np.threads) {
          if (th.frames.empty()) continue;
          ThreadStack t;
          t.tid = th.tid;
          for (const Frame& f : th.frames) t.frames.push_back(job->InternFrame(f));
          std::string c = CommunicationCall(*job, t);
          // The main thread's call first, else the first thread in one.
          if (!c.empty() && (call.empty() || th.tid == uint32_t(np.pid))) {
            call = c;
            v.call_tid = th.tid;
          }
          v.stacks.push_back(std::move(t));
        }
        if (!call.empty()) {
          v.current.valid = true;
          v.current.name = job->Intern(call);
        }
        v.dead = np.liveness == Liveness::kGone || np.liveness == Liveness::kZombie;
        if (v.dead) v.state = RankState::kGone;
        else if (np.liveness == Liveness::kStopped || np.state_before == "T" || np.state_before == "t") v.state = RankState::kStopped;
        else v.state = call.empty() ? RankState::kCompute : RankState::kInCall;
        slot = std::move(v);
      }
    }
  }
}

Job LoadJob(const std::vector<std::string>& paths, const LoadOptions& options) {
  Job job;
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::string err;
    std::vector<std::string> found = FindTraceFiles(p, &err, &job.warnings);
    if (!err.empty()) job.warnings.push_back(err);
    else if (found.empty() && FindNodeDumps(p).empty()) job.warnings.push_back(p + ": no trace files (*.htrace)");
    files.insert(files.end(), found.begin(), found.end());
  }
  int nthreads = options.threads > 0 ? options.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  nthreads = std::min<int>(nthreads, int(std::max<size_t>(files.size(), 1)));
  std::vector<Partial> parts(static_cast<size_t>(nthreads));
  Loader loader(&job);
  std::atomic<size_t> next{0};
  auto work = [&](Partial* part) {
    const bool reports = part == &parts[0] && options.progress;
    auto last = std::chrono::steady_clock::now();
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      loader.LoadFile(files[i], part);
      if (reports && std::chrono::steady_clock::now() - last > std::chrono::milliseconds(500)) {
        last = std::chrono::steady_clock::now();
        options.progress(std::min(next.load(), files.size()), files.size());
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < nthreads; ++t) pool.emplace_back(work, &parts[size_t(t)]);
  work(&parts[0]);
  for (auto& t : pool) t.join();

  // Merge the workers' findings.
  job.ranks.resize(size_t(job.world_size));
  for (int32_t r = 0; r < job.world_size; ++r) job.ranks[size_t(r)].rank = r;
  std::set<std::pair<int32_t, uint64_t>> flagged;
  for (size_t w = 0; w < parts.size(); ++w) {
    Partial& part = parts[w];
    job.files += part.files;
    job.records += part.records;
    job.warnings.insert(job.warnings.end(), part.warnings.begin(), part.warnings.end());
    for (auto& [id, f] : part.jobs) {
      JobFiles& all = job.jobs[id];
      if (all.example.empty()) all.example = f.example;
      all.files += f.files;
    }
    for (RankView& v : part.ranks) {
      RankView& slot = job.ranks[size_t(v.rank)];
      if (slot.state != RankState::kMissing) {
        job.duplicates.push_back("rank " + std::to_string(v.rank) + " has two trace files (" + slot.path + ", " +
                               v.path + "); using the second");
      }
      v.worker = uint32_t(w);
      slot = std::move(v);
    }
    for (const Job::Odd& o : part.odd) flagged.insert({o.comm, o.seq});
    job.odd.insert(job.odd.end(), part.odd.begin(), part.odd.end());
    part.first_sig.resize(job.comms.size());
    job.sig_tables.push_back(std::move(part.first_sig));
  }
  // Heartbeats: a process whose runtime went silent while the others' kept
  // beating is stopped (SIGSTOP) or wedged below the tracer. Compared with
  // the job's newest heartbeat, not this machine's clock, so it also holds
  // for files copied from other nodes, and after the job was killed.
  int64_t newest = 0;
  for (const RankView& v : job.ranks) newest = std::max(newest, v.heartbeat_real_ns);
  for (RankView& v : job.ranks) {
    if (v.state == RankState::kMissing || !v.heartbeat_real_ns) continue;
    v.silent_s = double(newest - v.heartbeat_real_ns) / 1e9;
    if (v.silent_s > kHeartbeatStaleSeconds && (v.state == RankState::kInCall || v.state == RankState::kCompute)) {
      v.state = RankState::kStopped;
    }
    // Gone, but it beat until the others' last beat: torn down with the job
    // (by the launcher, a timeout), not dead first. It was computing then.
    if (v.state == RankState::kGone && v.silent_s <= kHeartbeatStaleSeconds) v.state = RankState::kCompute;
  }

  // Workers that saw different first signatures at the same (comm, seq).
  for (size_t w = 1; w < job.sig_tables.size(); ++w) {
    for (size_t c = 0; c < job.comms.size(); ++c) {
      const SigWindow& a = job.sig_tables[0][c];
      job.sig_tables[w][c].ForEach([&](uint64_t seq, const SigWindow::Entry& e) {
        const SigWindow::Entry* other = a.Find(seq);
        if (other && !(other->second == e.second)) flagged.insert({int32_t(c), seq});
      });
    }
  }
  for (const Job::Odd& o : job.odd) job.odd_index[OddKey(o.comm, o.seq, o.rank)] = o.sig;
  job.flagged.assign(flagged.begin(), flagged.end());
  AddUntracedRanks(paths, &job);
  NameUnlabeledComms(&job);
  FinishStacks(&job);
  return job;
}

void FinishStacks(Job* job) {
  // Native frames known by module and offset only: named once each.
  Symbolizer symbols;
  for (Frame& f : job->frames) {
    if (f.lang == Frame::Lang::kNative && !f.module.empty() && f.func.empty()) symbols.Resolve(&f);
  }
  for (RankView& v : job->ranks) {
    for (ThreadStack& t : v.stacks) {
      if (t.python.empty()) continue;
      std::vector<Frame> native, python;
      size_t evals = 0;
      for (uint32_t id : t.frames) {
        native.push_back(job->frames[id]);
        evals += IsEvalFrame(native.back());
      }
      for (size_t i = 0; i < t.python.size(); ++i) {
        python.push_back(job->frames[t.python[i]]);
        python.back().entry = t.python_entry[i];
      }
      if (!t.entries_known) GuessEntries(&python, evals, v.python_version);
      t.frames.clear();
      for (const Frame& f : MixPythonFrames(native, python)) t.frames.push_back(job->InternFrame(f));
      t.python.clear();
      t.python_entry.clear();
    }
    // Where in the program the rank waits: the innermost Python frame of
    // the thread in its call (else of its first thread).
    const ThreadStack* in = nullptr;
    for (const ThreadStack& t : v.stacks) {
      if (!in || (v.call_tid && t.tid == v.call_tid)) in = &t;
    }
    v.python_frame = -1;
    if (in) {
      for (uint32_t id : in->frames) {
        if (job->frames[id].lang == Frame::Lang::kPython) {
          v.python_frame = id;
          break;
        }
      }
    }
  }
}

}  // namespace hangtrace
