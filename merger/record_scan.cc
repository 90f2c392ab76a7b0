// ScanRecords: one pass over a file's records. It finds the call the rank
// is in (its threads' open calls), checks every collective's arguments
// against the first signature seen at its (comm, seq) (an array index, never
// a comparison between ranks), counts point-to-point traffic per (comm,
// peer, tag), and keeps the nonblocking requests and device work that never
// completed. The records themselves are not kept.
#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "merger/load_stages.h"
#include "merger/symbolize.h"

namespace hangtrace::load {
namespace {

std::string Family(const std::string& label) {
  size_t end = label.size();
  while (end > 0 && label[end - 1] >= '0' && label[end - 1] <= '9') --end;
  return end == 0 ? label : label.substr(0, end);
}

// mu held.
int32_t AddComm(Job* job, const CommInfo& c, int32_t rank) {
  auto [it, inserted] = job->comm_index.emplace(c.entry.id, int32_t(job->comms.size()));
  if (inserted) job->comms.emplace_back();
  GlobalComm& g = job->comms[size_t(it->second)];
  g.id = c.entry.id;
  if (g.label.empty() || (g.label == HexId(c.entry.id) && c.entry.label[0])) {
    g.label = c.entry.label[0] ? BoundedString(c.entry.label, sizeof(c.entry.label)) : HexId(c.entry.id);
    g.family = Family(g.label);
  }
  g.kind = fmt::CommKind(c.entry.kind);
  if (c.entry.parent_id) {
    g.parent_id = c.entry.parent_id;
    g.parent_counter = c.entry.parent_counter;
    g.creator_call = c.entry.creator_call;
  }
  g.size = std::max(g.size, c.entry.size);
  if (c.entry.flags & fmt::kCommWorld) g.world = true;
  if (!c.members.empty() && g.members.size() < c.members.size()) g.members = c.members;
  if (!g.world && c.members.empty() && c.entry.my_index >= 0 && c.entry.my_index < c.entry.size) {
    if (g.members.size() < size_t(c.entry.size)) g.members.resize(size_t(c.entry.size), -1);
    g.members[size_t(c.entry.my_index)] = rank;
  }
  return it->second;
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

// What a point-to-point record adds to the traffic of its (comm, peer, tag):
// a send posted (its sequence number), a receive completed (and whether a
// wildcard took it), a persistent send made. One reading for ScanRecords
// and for what a compact copy must keep of it (RecordsScanNeedsBefore).
struct P2pRole {
  bool sent = false, received = false, wildcard = false, made = false;
};
inline __attribute__((always_inline)) P2pRole P2pRoleOf(const CallDesc& d, const fmt::Record& r) {
  P2pRole role;
  if (!(d.flags & fmt::kCallP2p) || r.peer < 0) return role;
  role.sent = r.kind == uint8_t(fmt::EventKind::kBegin) && r.seq && (d.op == fmt::Op::kSend || d.op == fmt::Op::kSendrecv);
  role.received = r.kind == uint8_t(fmt::EventKind::kEnd) && r.seq && d.op == fmt::Op::kRecv;
  role.wildcard = role.received && (r.flags & fmt::kRecAnyPeer);
  role.made = r.kind == uint8_t(fmt::EventKind::kMark) && d.op == fmt::Op::kSend;
  return role;
}

// A record as the call it describes, in the job's names.
CallPoint PointOf(const TraceSnapshot& s, const FileMaps& maps, SharedJob* shared, const fmt::Record& r) {
  CallPoint c;
  c.valid = true;
  c.name = r.call < maps.calls.size() ? maps.calls[r.call] : 0;
  if (const CallDesc* d = s.Call(r.call)) {
    c.op = d->op;
    c.call_flags = d->flags;
  }
  c.comm = maps.CommOf(r);
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
    if (!k.empty()) c.kernel = shared->Intern(Demangle(k));
  }
  return c;
}

// Device completion: a rank whose host is not inside a communication call
// (it waits in a stream sync, launches more work, or computes) but whose
// device never finished some enqueued work is where that work is: the
// oldest unfinished operation is its position. Work queued behind it on
// the same stream has not started, so collectives there are not entered.
void PlaceOnDevice(const TraceSnapshot& s, const FileMaps& maps, SharedJob* shared,
                   const std::unordered_map<uint32_t, fmt::Record>& pending, RankView* v) {
  v->device_pending = uint32_t(pending.size());
  if (pending.empty()) return;
  const bool host_communicating = v->traced_call && v->current.comm >= 0 &&
                                  (v->current.call_flags & (fmt::kCallCollective | fmt::kCallP2p));
  // Not for a process that exited, crashed, is stopped, or died outside
  // any call: it is analyzed where its host was. One killed inside a call
  // (a hung job torn down) is where its device was.
  const bool ended = v->ending == Ending::kExited || v->ending == Ending::kCrashed || (v->dead && !v->traced_call);
  if (host_communicating || ended || v->liveness == Liveness::kStopped) return;
  const fmt::Record* oldest = nullptr;
  for (const auto& [id, r] : pending) {
    if (!oldest || r.ticks < oldest->ticks || (r.ticks == oldest->ticks && r.aux < oldest->aux)) oldest = &r;
  }
  if (v->traced_call) v->host_call = v->current;
  v->current = PointOf(s, maps, shared, *oldest);
  v->current.on_device = true;
  v->traced_call = true;
  for (const auto& [id, r] : pending) {
    if (&r == oldest || r.handle != oldest->handle || r.ticks < oldest->ticks) continue;
    const CallDesc* d = s.Call(r.call);
    if (!d || !(d->flags & fmt::kCallCollective) || !r.seq) continue;
    CallPoint q = PointOf(s, maps, shared, r);
    for (auto& [comm, entered] : v->entered) {
      if (comm == q.comm && entered >= q.seq) entered = q.seq - 1;
    }
  }
}

// The name a collective call matches others by at one sequence number.
// To torch's backend a posted collective (async_op=True, recorded as
// "dist.all_reduce async") and a blocking one are one and the same: ranks
// may mix them. MPI's are not: a blocking collective never matches a
// nonblocking one (MPI 4.0, 6.12), so MPI_Iallreduce against MPI_Allreduce
// stays a mismatch.
std::string_view MatchedAs(const CallDesc& c) {
  static constexpr std::string_view kPosted = " async";
  const std::string_view name = c.name;
  if (c.api == fmt::Api::kTorch && name.size() > kPosted.size() && name.ends_with(kPosted)) {
    return name.substr(0, name.size() - kPosted.size());
  }
  return name;
}

}  // namespace

FileMaps MapFile(const TraceSnapshot& s, const std::string& path, int32_t rank, SharedJob* shared,
                 std::vector<std::string>* warnings) {
  FileMaps m;
  m.calls.resize(s.calls.size());
  m.comms.assign(s.comms.size(), -1);
  m.since.assign(s.comms.size(), 0);
  std::lock_guard<std::mutex> lock(shared->mu);  // one lock per file
  Job* job = shared->job;
  m.matched_as.resize(s.calls.size());
  for (size_t i = 0; i < s.calls.size(); ++i) {
    m.calls[i] = job->Intern(s.calls[i].name);
    const std::string_view matched = MatchedAs(s.calls[i]);
    m.matched_as[i] = matched.size() == s.calls[i].name.size() ? m.calls[i] : job->Intern(std::string(matched));
  }
  for (size_t i = 0; i < s.comms.size(); ++i) {
    if (!s.comm_valid[i]) continue;
    const fmt::CommEntry& e = s.comms[i].entry;
    if (e.size < 0 || e.size > kMaxRanks || e.my_index >= e.size) {
      warnings->push_back(path + ": communicator " + HexId(e.id) + " claims " + std::to_string(e.size) +
                          " members (index " + std::to_string(e.my_index) + "): damaged; ignored");
      continue;
    }
    m.comms[i] = AddComm(job, s.comms[i], rank);
    m.since[i] = e.created_ticks;
  }
  job->world_size = std::max(job->world_size, std::max(s.process.world_size, rank + 1));
  return m;
}

namespace {
// The BEGINs of framework calls refused before they were issued (their END
// carries fmt::kRecNotIssued): no calls to match, and their sequence
// numbers were given back (the next call has them). As (lane, index).
// Only files that count such calls are looked through (none, as a rule).
struct LaneIndexHash {
  size_t operator()(const std::pair<uint32_t, uint64_t>& k) const { return std::hash<uint64_t>()(k.second * 131 + k.first); }
};
using RecordSet = std::unordered_set<std::pair<uint32_t, uint64_t>, LaneIndexHash>;
RecordSet RefusedBegins(const TraceSnapshot& s) {
  RecordSet refused;
  if (s.header.counters.calls_not_issued == 0) return refused;
  // The newest BEGIN of each (lane, call, handle): a refused call's END
  // follows its BEGIN on the same lane (records of a library below may lie
  // between), a posted one's carries the same handle.
  struct Key {
    uint32_t lane;
    uint16_t call;
    uint64_t handle;
    bool operator==(const Key& o) const { return lane == o.lane && call == o.call && handle == o.handle; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.handle * 65599 + k.call * 131 + k.lane); }
  };
  std::unordered_map<Key, uint64_t, KeyHash> newest;
  s.ForEachRecord([&](const fmt::Record& r, uint32_t lane, uint64_t index) {
    if (r.kind == uint8_t(fmt::EventKind::kBegin)) {
      newest[Key{lane, r.call, r.handle}] = index;
    } else if (r.kind == uint8_t(fmt::EventKind::kEnd) && (r.flags & fmt::kRecNotIssued)) {
      auto it = newest.find(Key{lane, r.call, r.handle});
      if (it != newest.end()) refused.insert({lane, it->second});
    }
  });
  return refused;
}
}  // namespace

void ScanRecords(const TraceSnapshot& s, const FileMaps& maps, SharedJob* shared, RankView* v, Partial* out) {
  const fmt::ProcessInfo& p = s.process;
  // The call the rank is in: the earliest still-open call of its threads.
  const ThreadInfo* in = nullptr;
  const ThreadInfo* latest = nullptr;
  for (const ThreadInfo& t : s.threads) {
    if (t.tracer) continue;
    if (t.in_call && (!in || t.current.ticks < in->current.ticks)) in = &t;
    if (t.has_last && (!latest || t.last.ticks > latest->last.ticks)) latest = &t;
    v->records += t.head;
  }
  // The main thread outside any call, while another thread is in a call
  // that began after the main thread left its last one and is younger than
  // a second (and a quarter of the main thread's time out): that thread's
  // calls keep completing (a heartbeat all-reducing every 100 ms on a
  // communicator of its own); the rank is where its main thread is. Taking
  // the young call for its position blamed the members that thread's next
  // call waits for, which were only between two heartbeats.
  const ThreadInfo* main = nullptr;
  for (const ThreadInfo& t : s.threads) {
    if (!t.tracer && t.tid == uint32_t(p.pid)) main = &t;
  }
  if (in && main && in != main && !main->in_call && main->has_last && main->last.ticks < in->current.ticks) {
    // The last heartbeat may precede the call's begin (one every 0.1 s).
    const int64_t begun = s.TicksToRealNs(in->current.ticks);
    const int64_t now = std::max(p.heartbeat_real_ns, begun);
    const int64_t call_age = now - begun;
    const int64_t main_out = now - s.TicksToRealNs(main->last.ticks);
    if (call_age < 1000000000 && call_age * 4 < main_out) {
      v->side_call = PointOf(s, maps, shared, in->current);
      in = nullptr;
    }
  }
  // Outside any call: its main thread's last call says since when, which
  // another thread's calls (a heartbeat's) do not make recent.
  if (!in && main && !main->in_call && main->has_last) {
    latest = main;
    v->outside_since_real_ns = s.TicksToRealNs(main->last.ticks);
    v->outside_since_ticks = main->last.ticks;
  }
  if (in) {
    v->current = PointOf(s, maps, shared, in->current);
    v->traced_call = true;
    v->call_tid = in->current.tid;
    if (in->current.tid != uint32_t(p.pid)) {
      v->call_thread = in->name.empty() ? "tid " + std::to_string(in->current.tid) : in->name;
    }
    v->watchdog = in->watchdog_flagged;
    if (in->has_last) v->previous = PointOf(s, maps, shared, in->last);
  } else if (latest) {
    v->previous = PointOf(s, maps, shared, latest->last);
  }
  for (size_t i = 0; i < s.comms.size(); ++i) {
    if (maps.comms[i] >= 0) v->entered.push_back({maps.comms[i], s.comms[i].entry.coll_seq});
  }

  std::unordered_map<uint64_t, fmt::Record> open_requests;
  TrafficTable traffic(&v->p2p);
  std::unordered_map<uint32_t, fmt::Record> device_pending;  // track id -> DEVICE_PENDING
  uint64_t last_ticks = 0;  // the last moment the file shows the process alive
  uint64_t last_program_ticks = 0;  // its program threads' newest record
  // The current call's earlier completions on its thread (RankView::usual_calls).
  const uint16_t usual_call = in ? in->current.call : uint16_t(0xffff);
  const uint32_t usual_lane = in ? in->slot : 0;
  uint64_t usual_begin = 0, usual_longest = 0;
  const RecordSet refused = RefusedBegins(s);
  const bool any_refused = !refused.empty();
  // Inlined: once per record, 258 M at 131,072 ranks.
  s.ForEachRecord([&](const fmt::Record& r, uint32_t lane, uint64_t index) __attribute__((always_inline)) {
    last_ticks = std::max(last_ticks, r.ticks);
    if (__builtin_expect(r.call == usual_call, 0) && lane == usual_lane && r.comm == in->current.comm) {
      if (r.kind == uint8_t(fmt::EventKind::kBegin)) {
        usual_begin = r.ticks < in->current.ticks ? r.ticks : 0;  // not the call it is in now
      } else if (r.kind == uint8_t(fmt::EventKind::kEnd) && usual_begin && r.ticks >= usual_begin &&
                 !(r.flags & fmt::kRecNotIssued)) {  // a refused call took no time of a real one
        usual_longest = std::max(usual_longest, r.ticks - usual_begin);
        ++v->usual_calls;
        usual_begin = 0;
      }
    }
    const CallDesc* d = s.Call(r.call);
    if (!d) return;
    if (r.kind == uint8_t(fmt::EventKind::kBegin) || r.kind == uint8_t(fmt::EventKind::kEnd)) {
      last_program_ticks = std::max(last_program_ticks, r.ticks);
    }
    const int32_t global_comm = maps.CommOf(r);
    if (__builtin_expect(any_refused, 0) && r.kind == uint8_t(fmt::EventKind::kBegin) && refused.count({lane, index})) {
      return;  // refused before it was issued: nothing to match, nothing sent
    }
    if (r.kind == uint8_t(fmt::EventKind::kBegin) && (d->flags & fmt::kCallCollective) && r.seq && global_comm >= 0) {
      // Counts of the v/w collectives differ per rank by design: not compared.
      const uint64_t count = (d->flags & fmt::kCallPerRankCounts) ? 0 : r.count;
      CollSig sig{maps.matched_as[r.call], r.dtype, r.redop, (d->flags & fmt::kCallRooted) ? r.peer : -1, count};
      size_t comm = size_t(global_comm);
      if (out->first_sig.size() <= comm) out->first_sig.resize(comm + 1);
      SigWindow::Entry* slot = out->first_sig[comm].Slot(r.seq);
      if (slot->first < 0) *slot = {p.rank, sig};
      else if (!(slot->second == sig)) out->odd.push_back({int32_t(comm), r.seq, p.rank, sig});
    }
    if (global_comm >= 0) {
      const P2pRole role = P2pRoleOf(*d, r);
      if (role.sent || role.received || role.made) {
        P2pTraffic& t = traffic.Of(global_comm, r.peer, r.tag);
        if (role.sent) t.sent = std::max(t.sent, r.seq);
        if (role.received) t.received = std::max(t.received, r.seq);
        if (role.wildcard) ++t.wildcard_taken;
        if (role.made) ++t.persistent_sends;
      }
    }
    if (r.kind == uint8_t(fmt::EventKind::kDevicePending)) device_pending[r.aux] = r;
    if (r.kind == uint8_t(fmt::EventKind::kComplete)) device_pending.erase(r.aux);
    if (d->flags & fmt::kCallNonblocking) {
      if (r.kind == uint8_t(fmt::EventKind::kBegin)) open_requests[r.handle] = r;
      if (r.kind == uint8_t(fmt::EventKind::kEnd)) open_requests.erase(r.handle);
    }
  });
  traffic.Finish();
  if (v->usual_calls) v->usual_longest_s = s.Seconds(0, usual_longest);
  if (last_program_ticks) v->last_record_real_ns = s.TicksToRealNs(last_program_ticks);
  // When it ended: a SIGTERM's arrival is exact, then the exit or crash
  // record; else its last sign of life.
  if (p.term_signal) v->end_real_ns = s.TicksToRealNs(p.term_ticks);
  else if (p.end_ticks && (v->ending == Ending::kExited || v->ending == Ending::kCrashed))
    v->end_real_ns = s.TicksToRealNs(p.end_ticks);
  else v->end_real_ns = std::max(p.heartbeat_real_ns, last_ticks ? s.TicksToRealNs(last_ticks) : 0);
  for (const auto& [handle, r] : open_requests) {
    if (v->pending.size() < 16) v->pending.push_back(PointOf(s, maps, shared, r));
  }
  if (s.header.features & fmt::kFeatDeviceEvents) PlaceOnDevice(s, maps, shared, device_pending, v);
}

}  // namespace hangtrace::load

namespace hangtrace::load {

// (On `s.events` only: pointers into it are returned. Its callers read
// without ReadOptions::events_in_place.)
std::vector<const Event*> RecordsScanNeedsBefore(const TraceSnapshot& s, const std::vector<uint64_t>& tail_from) {
  auto old = [&](const Event& e) { return e.lane < tail_from.size() && e.index < tail_from[e.lane]; };
  // Point-to-point: the newest send and receive of each (comm, peer, tag), a
  // reused communicator slot's former owner apart (FileMaps::CommOf).
  struct Key {
    uint16_t comm;
    bool former, received;
    int32_t peer, tag;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return size_t((uint64_t(k.comm) << 34 ^ uint64_t(k.former) << 33 ^ uint64_t(k.received) << 32 ^ uint32_t(k.peer)) *
                        0x9e3779b97f4a7c15ull ^
                    uint32_t(k.tag));
    }
  };
  std::unordered_map<Key, const Event*, KeyHash> newest_p2p;
  std::unordered_map<uint64_t, const Event*> open_requests;
  std::unordered_map<const Event*, const Event*> completion_of;  // a request's post -> its completion
  std::unordered_map<uint32_t, const Event*> device_pending;
  std::vector<const Event*> keep;
  for (const Event& e : s.events) {  // in time order, as ScanRecords reads them
    const fmt::Record& r = e.rec;
    const CallDesc* d = s.Call(r.call);
    if (!d) continue;
    const bool begin = r.kind == uint8_t(fmt::EventKind::kBegin), end = r.kind == uint8_t(fmt::EventKind::kEnd);
    const P2pRole role = P2pRoleOf(*d, r);
    if (role.wildcard || role.made) {  // counted, not maxed: every one is kept
      if (old(e)) keep.push_back(&e);
    } else if (role.sent || role.received) {
      const bool former = r.comm < s.comms.size() && r.ticks < s.comms[r.comm].entry.created_ticks;
      const Event*& newest = newest_p2p[Key{r.comm, former, role.received, r.peer, r.tag}];
      if (!newest || r.seq >= newest->rec.seq) newest = &e;
    }
    if (r.kind == uint8_t(fmt::EventKind::kDevicePending)) device_pending[r.aux] = &e;
    if (r.kind == uint8_t(fmt::EventKind::kComplete)) device_pending.erase(r.aux);
    if (d->flags & fmt::kCallNonblocking) {
      if (begin) open_requests[r.handle] = &e;
      if (end) {
        if (auto it = open_requests.find(r.handle); it != open_requests.end()) {
          completion_of[it->second] = &e;
          open_requests.erase(it);
        }
      }
    }
  }
  for (const auto& [key, e] : newest_p2p) if (old(*e)) keep.push_back(e);
  for (const auto& [handle, e] : open_requests) if (old(*e)) keep.push_back(e);
  for (const auto& [id, e] : device_pending) if (old(*e)) keep.push_back(e);
  // A post kept (the newest send on its tag) keeps its completion: alone it
  // would read as a request never completed.
  for (size_t i = 0, n = keep.size(); i < n; ++i) {
    if (auto it = completion_of.find(keep[i]); it != completion_of.end() && old(*it->second)) keep.push_back(it->second);
  }
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  return keep;  // in time order: s.events is, and pointers into it sort alike
}

}  // namespace hangtrace::load
