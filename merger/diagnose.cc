// The stages of the diagnosis (diagnose_stages.h), and Diagnose() that runs
// them in order. The blame rules are in blame_rules.cc; docs/ANALYSIS.md
// explains each stage and rule.
#include "merger/diagnose.h"

#include <algorithm>
#include <ctime>
#include <set>
#include <cstring>
#include <strings.h>
#include <functional>
#include <map>
#include <tuple>

#include "merger/diagnose_stages.h"
#include "merger/stack_calls.h"

namespace hangtrace {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kNoHang: return "no-hang";
    case Verdict::kHang: return "hang";
    case Verdict::kDeadlock: return "deadlock";
    case Verdict::kMismatch: return "mismatch";
    case Verdict::kCrash: return "crash";
    case Verdict::kUnknown: return "unknown";
  }
  return "no-hang";
}

namespace {
// A peer or root as a world rank, what people count in ("rank 5"); the
// rank inside the communicator only when the world rank is not known
// ("1 of pp0").
std::string PeerWord(const Job& job, int32_t comm, int32_t peer) {
  const int32_t world = job.CommByRank(comm, peer);
  return world >= 0 ? "rank " + std::to_string(world)
                    : std::to_string(peer) + " of " + (comm >= 0 ? job.comms[size_t(comm)].label : "its comm");
}
}  // namespace

RankSet CulpritRanks(const Diagnosis& d) {
  RankSet out;
  for (const Culprit& c : d.culprits) out.Add(c.rank);
  return out;
}

std::string DescribeChild(const Job& job, const ChildProcess& c) {
  std::string out = "pid " + std::to_string(c.pid) + " (" + (c.name.empty() ? "?" : c.name) +
                    (c.state == "T" || c.state == "t" ? ", stopped" : c.state == "Z" ? ", a zombie" : "") + ")";
  if (c.stacks.empty()) return out + ": its stacks were not read" + (c.error.empty() ? "" : " (" + c.error + ")");
  std::string where;
  if (c.user_frame >= 0) where += " at " + Shortened(job.frames[size_t(c.user_frame)].Text());
  if (!c.call.empty()) where += ", in " + c.call;
  else if (c.idle_frame >= 0 && c.idle_frame != c.user_frame) where += ", in " + Shortened(job.frames[size_t(c.idle_frame)].Text());
  if (where.rfind(", ", 0) == 0) where = where.substr(1);
  return out + ":" + where;
}

std::string DescribeCall(const Job& job, const CallPoint& c) {
  if (!c.valid) return "no traced call";
  std::string out = job.names[c.name];
  if (c.seq) out += " #" + std::to_string(c.seq);
  if (c.comm >= 0) out += " on " + job.comms[size_t(c.comm)].label;
  auto who = [&](int32_t peer) { return PeerWord(job, c.comm, peer); };
  const bool sendrecv = c.recv_peer != fmt::kNoPeer;  // its receive half is known
  if (c.peer >= 0) {
    if (c.call_flags & fmt::kCallRooted) out += " root " + who(c.peer);
    else if (c.op == fmt::Op::kSend || sendrecv) out += " to " + who(c.peer);
    else if (c.op == fmt::Op::kRecv || c.op == fmt::Op::kProbe) out += " from " + who(c.peer);
    else out += " peer " + who(c.peer);
  }
  if (c.peer == fmt::kAnyPeer) out += " from ANY";
  if ((c.call_flags & fmt::kCallP2p) && c.tag >= 0) out += " tag " + std::to_string(c.tag);
  if (sendrecv && c.recv_peer != fmt::kNullPeer) {
    out += ", from " + (c.recv_peer >= 0 ? who(c.recv_peer) : std::string("ANY"));
    if (c.recv_tag >= 0) out += " tag " + std::to_string(c.recv_tag);
  }
  if (c.kernel >= 0) out += " kernel " + job.names[size_t(c.kernel)];
  if (c.on_device) out += " [enqueued; the device never finished it]";
  return out;
}

namespace diagnose {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string WhereInProgram(const Job& job, int64_t frame) {
  return frame >= 0 ? " at " + job.frames[size_t(frame)].Text() : std::string();
}

std::string MismatchWhy(const Job& job, const Mismatch& m, int32_t rank) {
  std::string value = "?";
  for (const auto& [v, ranks] : m.values) {
    if (ranks.Contains(rank)) value = v;
  }
  const std::string where = "#" + std::to_string(m.seq) + " on " + job.comms[size_t(m.comm)].label;
  // What the others pass: the most common value, or in a tie the first
  // that is not this rank's.
  std::string others = m.values[0].first;
  for (const auto& [v, ranks] : m.values) {
    if (v != value) {
      others = v;
      break;
    }
  }
  const std::string tie = m.tie ? "; a tie: nothing says which side strayed, so each is named" : "";
  if (!m.untraced.Empty()) {
    // One side's call is known from its stacks only: said as what each
    // side is in, and where the untraced one's communicator may differ.
    if (m.untraced.Contains(rank)) {
      return "is in " + value + ", on a communicator the trace does not show, where collective " + where +
             " is, having entered every one before it; the other members call " + others + " there" + tie;
    }
    return "calls " + value + " as collective " + where + "; the other members, having entered every one before it, "
           "are in " + others + " instead, seen on their stacks" + tie;
  }
  // Another collective altogether: said as calls, not as an argument.
  if (m.field == "op") {
    return "calls " + value + " as collective " + where + " (the other members call " + others + ")" + tie;
  }
  CollSig sig;
  std::string call = job.SigOf(rank, m.comm, m.seq, &sig) ? job.names[sig.name] + " " : "";
  return "passes " + m.field + " " + value + " to " + call + where + " (the other members pass " + others + ")" + tie;
}

// --- classes -------------------------------------------------------------------------------

Classes Classify(const Job& job) {
  // Ranks are together only where they really are alike: the same call,
  // communicator and sequence number, for point-to-point calls the same
  // peer and tag (two ranks receiving from different peers wait for
  // different ranks), the same Python line (PlaceKey), and the same
  // evidence.
  using Key = std::tuple<int, uint16_t, int32_t, uint64_t, int32_t, int32_t, int64_t, int, bool>;
  std::map<Key, size_t> class_of_key;
  Classes c;
  c.class_of.assign(size_t(job.world_size), -1);
  std::vector<std::map<int64_t, size_t>> idle_votes;
  for (const RankView& v : job.ranks) {
    const bool in = v.state == RankState::kInCall;
    const CallPoint& call = v.current;
    const bool p2p = IsP2p(call) || call.op == fmt::Op::kProbe;
    // Whether its main thread's stack was read is evidence of where a rank
    // outside calls is; a rank its trace places in a call is there either
    // way (a capture that timed out on one rank under load split it from
    // its class-mates).
    Key k = in ? Key{int(v.state), call.name, call.comm, call.seq, IsCollective(call) ? -1 : call.peer,
                     p2p ? call.tag : 0, PlaceKey(job, v.user_frame), int(v.basis), false}
               : Key{int(v.state), uint16_t(0), -1, 0, -1, 0, PlaceKey(job, v.user_frame), 0, v.main_stack_unread};
    auto [it, inserted] = class_of_key.emplace(k, c.groups.size());
    if (inserted) {
      Group g;
      g.state = v.state;
      g.basis = v.basis;
      g.call = in ? v.current : v.previous;
      g.user_frame = v.user_frame;
      g.main_stack_unread = v.main_stack_unread;
      c.groups.push_back(g);
      idle_votes.emplace_back();
    }
    Group& g = c.groups[it->second];
    if (in) {
      if (g.ranks.Empty()) g.thread = v.call_thread;
      else if (g.thread != v.call_thread) g.thread.clear();
    }
    if (!g.ranks.Empty() && g.user_frame != v.user_frame) g.user_frame = -1;  // not the same for all
    g.ranks.Add(v.rank);
    if (in) g.in_call_s = std::max(g.in_call_s, v.current.seconds);
    if (v.state == RankState::kCompute && v.OutsideSince() && v.end_real_ns > v.OutsideSince()) {
      g.outside_s = std::max(g.outside_s, double(v.end_real_ns - v.OutsideSince()) / 1e9);
    }
    if (v.idle_frame >= 0) ++idle_votes[it->second][v.idle_frame];
    if (!v.host.empty() && std::find(g.hosts.begin(), g.hosts.end(), v.host) == g.hosts.end() && g.hosts.size() < 8) {
      g.hosts.push_back(v.host);
    }
    c.class_of[size_t(v.rank)] = int32_t(it->second);
  }
  // Where a class outside any call computes or sleeps: its ranks' most
  // common innermost frame.
  for (size_t i = 0; i < c.groups.size(); ++i) {
    size_t best = 0;
    for (const auto& [frame, n] : idle_votes[i]) {
      if (n > best) best = n, c.groups[i].idle_frame = frame;
    }
  }
  return c;
}

// --- progress --------------------------------------------------------------------------------

namespace {
// Where a rank's stacks put it, as text that two reads of a job can
// compare (frame ids are per read): the thread in its call, else its main
// thread, to its twelve innermost frames, and the call they show.
std::string StackPlace(const Job& job, const RankView& v) {
  // In a communication call its stacks show: the call and the program's
  // line it was made from. The frames inside the call change while it
  // waits (an MPI library's progress loop spins through its layers).
  if (v.current.valid && v.current.from_stacks) {
    return job.names[v.current.name] + "|" + (v.user_frame >= 0 ? job.frames[size_t(v.user_frame)].Text() : "");
  }
  const uint32_t want = v.call_tid ? v.call_tid : uint32_t(v.pid);
  const ThreadStack* t = nullptr;
  for (const ThreadStack& s : v.stacks) {
    if (!t || s.tid == want) t = &s;
  }
  std::string out = v.current.valid ? job.names[v.current.name] : "";
  for (size_t i = 0; t && i < t->frames.size() && i < 12; ++i) {
    const Frame& f = job.frames[t->frames[i]];
    // A frame read with no module to name it (the capture's map not read
    // with it): the place is not known, so it is compared with nothing.
    if (f.lang == Frame::Lang::kNative && f.func.empty() && f.module.empty()) return "";
    out += "|" + f.Text();
  }
  return out;
}
}  // namespace

RankSet FindProgress(const Job& job, const Job& earlier) {
  RankSet moved_ranks;
  for (const RankView& v : job.ranks) {
    if (size_t(v.rank) >= earlier.ranks.size()) continue;
    const RankView& e = earlier.ranks[size_t(v.rank)];
    // Its main thread in the same traced call at both looks, or outside
    // calls since the same one: it did not move, whatever its other
    // threads did (a heartbeat's all-reduces move the record counters and
    // a communicator of their own). A rank whose call is on another thread
    // (a listener's receive) moves with any of its threads, as before.
    const bool main_in_call = v.current.valid && v.basis == Basis::kTrace && v.call_thread.empty() &&
                              e.current.valid && e.basis == Basis::kTrace && e.call_thread.empty();
    const bool main_still =
        (main_in_call && v.current.ticks == e.current.ticks && v.call_tid == e.call_tid) ||
        (!v.current.valid && !e.current.valid && v.outside_since_ticks && v.outside_since_ticks == e.outside_since_ticks);
    bool moved = false;
    for (const auto& [comm, n] : v.entered) {
      auto it = earlier.comm_index.find(job.comms[size_t(comm)].id);
      if (!main_still && it != earlier.comm_index.end() && e.Entered(it->second) < n) moved = true;
    }
    // Raw values only: sequence numbers, record counters, the BEGIN's own
    // ticks. Never times converted from ticks, whose calibration drifts
    // between two reads (the same record read +111.989220 s, then
    // +111.989221 s, once passed for progress).
    if (v.current.valid != e.current.valid || (v.basis == Basis::kTrace && v.current.ticks != e.current.ticks)) moved = true;
    if (v.records != e.records && !main_still) moved = true;
    // A rank placed by its stacks (a call hangtrace does not wrap, or a
    // rank nobody traced) moved when its stacks did: another call, another
    // line, another frame. The same stack twice is not proof of a hang (a
    // loop can pass the same point), but a different one is of progress.
    if (v.basis == Basis::kStacks && e.basis == Basis::kStacks && !v.stacks.empty() && !e.stacks.empty()) {
      const std::string now = StackPlace(job, v), then = StackPlace(earlier, e);
      if (!now.empty() && !then.empty() && now != then) moved = true;
    }
    if (v.state != e.state && (v.state == RankState::kExited || e.state == RankState::kMissing)) moved = true;
    if (moved) moved_ranks.Add(v.rank);
  }
  return moved_ranks;
}

// --- the wait-for graph ------------------------------------------------------------------------

namespace {
// Members of `comm` that have not entered collective `seq` on it.
RankSet Behind(const Job& job, int32_t comm, uint64_t seq) {
  RankSet out;
  for (int32_t r : job.Members(comm)) {
    const RankView& v = job.ranks[size_t(r)];
    if (v.state == RankState::kMissing || v.Entered(comm) < seq) out.Add(r);
  }
  return out;
}
}  // namespace

std::array<int32_t, 2> WaitedPeers(const Job& job, const CallPoint& c) {
  if (!IsP2p(c) && c.op != fmt::Op::kProbe) return {-1, -1};
  // A Sendrecv waits for the rank it receives from, and for the one it
  // sends to when its message is too large to be buffered. Both are edges:
  // two ranks that send to each other while receiving from others make a
  // cycle that still waits on those others, so it is no sink and takes no
  // blame (GROMACS's halo exchanges with one rank stopped).
  return {job.CommByRank(c.comm, c.peer), c.recv_peer >= 0 ? job.CommByRank(c.comm, c.recv_peer) : -1};
}

namespace {
// Whether `rank` is a member of `comm` that has not entered its collective
// `seq` yet.
bool NotEntered(const Job& job, int32_t comm, uint64_t seq, int32_t rank) {
  if (comm < 0 || !seq) return false;
  const RankView& v = job.ranks[size_t(rank)];
  if (v.state != RankState::kMissing && v.Entered(comm) >= seq) return false;
  const GlobalComm& c = job.comms[size_t(comm)];
  return c.world || std::find(c.members.begin(), c.members.end(), rank) != c.members.end();
}

bool InFinalize(const Job& job, int32_t rank) {
  if (rank < 0 || rank >= job.world_size) return false;
  const RankView& v = job.ranks[size_t(rank)];
  return v.state == RankState::kInCall && (v.current.call_flags & fmt::kCallFinalize);
}

// Whether `o` waits in point-to-point (a call, or a request of its wait)
// for a rank that has finished: it will never reach MPI_Finalize because
// of that rank, so no finished rank waits for it.
bool WaitsForAFinishedPeer(const Job& job, const RankView& o) {
  const CallPoint& c = o.current;
  if (c.from_stacks) return false;
  if (IsP2p(c) || c.op == fmt::Op::kProbe) {
    const auto peers = WaitedPeers(job, c);
    return InFinalize(job, peers[0]) || InFinalize(job, peers[1]);
  }
  if (c.op == fmt::Op::kWait) {
    for (const CallPoint& p : o.pending) {
      if (!IsCollective(p) && InFinalize(job, job.CommByRank(p.comm, p.peer))) return true;
    }
  }
  return false;
}
}  // namespace

bool CompletesAnyOf(const Job& job, const CallPoint& c) {
  if (!(c.call_flags & fmt::kCallCompletion)) return false;
  const std::string& name = job.names[c.name];  // MPI_Waitany, or Fortran's MPI_WAITANY
  auto ends = [&](const char* s) {
    const size_t n = strlen(s);
    return name.size() >= n && strcasecmp(name.c_str() + name.size() - n, s) == 0;
  };
  return ends("any") || ends("some");
}

const CallPoint* WaitsOn(const Job& job, const RankView& o, int32_t rank) {
  const CallPoint& c = o.current;
  if (o.state != RankState::kInCall) return nullptr;
  if (c.from_stacks) return c.lock_holder == rank ? &c : nullptr;
  if (IsCollective(c) && c.seq) return NotEntered(job, c.comm, c.seq, rank) ? &c : nullptr;
  if (IsP2p(c) || c.op == fmt::Op::kProbe) {
    const auto peers = WaitedPeers(job, c);
    return peers[0] == rank || peers[1] == rank ? &c : nullptr;
  }
  if (c.op == fmt::Op::kWait) {
    for (const CallPoint& p : o.pending) {
      if (IsCollective(p) ? NotEntered(job, p.comm, p.seq, rank) : job.CommByRank(p.comm, p.peer) == rank) return &p;
    }
  }
  return nullptr;
}

RankSet WaitsFor(const Job& job, const RankView& v) {
  RankSet out;
  if (v.state != RankState::kInCall) return out;
  const CallPoint& c = v.current;
  // A call seen only on its stacks: whom it waits for is not known, but
  // for a file lock, whose holder is.
  if (c.from_stacks) {
    if (c.lock_holder >= 0) out.Add(c.lock_holder);
    return out;
  }
  if (c.call_flags & fmt::kCallFinalize) {
    // Collective over every rank still running: waits for those not in it.
    // Not for the ranks that wait for it (a receive from it, a send to it,
    // a collective it never entered, a request of theirs it never
    // matched): a finished rank waits for nobody who waits for it. Nor for
    // those that wait in point-to-point for another finished rank: the
    // finished ranks are one class, and its waits must not close a cycle
    // through a rank that one of them holds up.
    for (const RankView& o : job.ranks) {
      if (o.rank == v.rank || o.state == RankState::kExited) continue;
      if (o.state == RankState::kInCall && (o.current.call_flags & fmt::kCallFinalize)) continue;
      if (o.state == RankState::kInCall && (WaitsOn(job, o, v.rank) || WaitsForAFinishedPeer(job, o))) continue;
      out.Add(o.rank);
    }
    return out;
  }
  if (IsCollective(c) && c.seq) return Behind(job, c.comm, c.seq);
  if (IsP2p(c) || c.op == fmt::Op::kProbe) {
    for (int32_t peer : WaitedPeers(job, c)) {
      if (peer >= 0) out.Add(peer);
    }
    return out;
  }
  if (c.op == fmt::Op::kWait) {
    for (const CallPoint& p : v.pending) {
      if (IsCollective(p) && p.seq) out.Merge(Behind(job, p.comm, p.seq));
      else if (int32_t peer = job.CommByRank(p.comm, p.peer); peer >= 0) out.Add(peer);
    }
    // Waitany/Waitsome/Testany/Testsome return when any one request
    // completes (an OR node, as MUST's AND/OR wait-for graphs have it): a
    // rank that can still act (computes, is stopped, or unseen) releases it
    // alone, so the rank waits for those only, never for its blocked
    // targets, and is in no cycle through them. With none, every target
    // is blocked and the rank waits for all of them.
    if (CompletesAnyOf(job, c) && v.pending.size() > 1) {
      RankSet free;
      for (int32_t r : out.Ranks()) {
        const RankState s = job.ranks[size_t(r)].state;
        if (s == RankState::kCompute || s == RankState::kStopped || s == RankState::kMissing) free.Add(r);
      }
      if (!free.Empty()) return free;
    }
  }
  return out;
}

WaitGraph BuildWaitGraph(const Job& job, Classes* classes) {
  std::vector<Group>& groups = classes->groups;
  WaitGraph w;
  w.rank_targets.resize(size_t(job.world_size));
  w.edges.resize(groups.size());
  // Collective classes share one target set: computed once per class.
  std::vector<bool> done(groups.size(), false);
  for (const RankView& v : job.ranks) {
    if (v.state != RankState::kInCall) continue;
    size_t g = size_t(classes->class_of[size_t(v.rank)]);
    RankSet t;
    if (IsCollective(v.current) && v.current.seq) {
      if (done[g]) continue;
      done[g] = true;
      t = WaitsFor(job, v);
      groups[g].waiting_for = t;
    } else {
      t = WaitsFor(job, v);
      groups[g].waiting_for.Merge(t);
      w.rank_targets[size_t(v.rank)] = t;
    }
    w.waited.Merge(t);
    for (int32_t r : t.Ranks()) w.edges[g].insert(classes->class_of[size_t(r)]);
  }
  return w;
}

// --- components (Tarjan) --------------------------------------------------------------------------

Components FindComponents(const WaitGraph& graph, const std::vector<Group>& groups) {
  const int n = int(groups.size());
  std::vector<int> index(size_t(n), -1), low(size_t(n), 0);
  std::vector<bool> on_stack(size_t(n), false);
  std::vector<int> stack;
  Components c;
  c.of.assign(size_t(n), -1);
  int counter = 0, ncomp = 0;
  std::function<void(int)> strong = [&](int v) {
    index[size_t(v)] = low[size_t(v)] = counter++;
    stack.push_back(v);
    on_stack[size_t(v)] = true;
    for (int w : graph.edges[size_t(v)]) {
      if (index[size_t(w)] < 0) {
        strong(w);
        low[size_t(v)] = std::min(low[size_t(v)], low[size_t(w)]);
      } else if (on_stack[size_t(w)]) {
        low[size_t(v)] = std::min(low[size_t(v)], index[size_t(w)]);
      }
    }
    if (low[size_t(v)] == index[size_t(v)]) {
      for (int w = -1; w != v;) {
        w = stack.back();
        stack.pop_back();
        on_stack[size_t(w)] = false;
        c.of[size_t(w)] = ncomp;
      }
      ++ncomp;
    }
  };
  for (int v = 0; v < n; ++v) {
    if (index[size_t(v)] < 0) strong(v);
  }
  c.members.resize(size_t(ncomp));
  c.sink.assign(size_t(ncomp), true);
  c.cyclic.assign(size_t(ncomp), false);
  for (int v = 0; v < n; ++v) c.members[size_t(c.of[size_t(v)])].push_back(v);
  // An edge into ranks without a trace file does not make a component a
  // non-sink: what those ranks did is unknown, and a cycle among the ranks
  // we can see must still be explained (a damaged file must not hide it).
  for (int v = 0; v < n; ++v) {
    for (int w : graph.edges[size_t(v)]) {
      if (c.of[size_t(w)] == c.of[size_t(v)]) c.cyclic[size_t(c.of[size_t(v)])] = true;  // a self-loop too
      else if (groups[size_t(w)].state != RankState::kMissing) c.sink[size_t(c.of[size_t(v)])] = false;
    }
  }
  return c;
}

// --- mismatches -------------------------------------------------------------------------------

namespace {

// Members split between a traced collective (comm, seq) and a collective
// their stacks show them blocked in, which hangtrace does not trace (DDP's
// gradient all-reduce against a rank that ran out of data and went on to
// dist.barrier). Each of the latter entered every traced collective on the
// communicator before `seq`, so the call it is in stands where the traced
// one does; and every member is on one side or the other, so no third rank
// can be what both wait for. The op is the field that differs; the side
// fewer members are on is odd, and even sides are a tie.
std::vector<Mismatch> UntracedMismatches(const Job& job) {
  std::set<std::pair<int32_t, uint64_t>> traced_points;
  for (const RankView& v : job.ranks) {
    if (v.state == RankState::kInCall && !v.current.from_stacks && IsCollective(v.current) && v.current.comm >= 0) {
      traced_points.insert({v.current.comm, v.current.seq});
    }
  }
  std::vector<Mismatch> out;
  for (const auto& [comm, seq] : traced_points) {
    RankSet traced, untraced;
    uint16_t traced_name = 0;
    std::map<std::string, std::pair<std::string, RankSet>> by_op;  // the untraced side, by what it does
    bool all_placed = true;
    for (int32_t r : job.Members(comm)) {
      const RankView& v = job.ranks[size_t(r)];
      const CallPoint& c = v.current;
      if (v.state != RankState::kInCall) {
        all_placed = false;
      } else if (!c.from_stacks && c.comm == comm && c.seq == seq) {
        traced.Add(r);
        traced_name = c.name;
      } else if (c.from_stacks && IsCollectiveCall(c.op, job.names[c.name]) && v.Entered(comm) + 1 == seq) {
        untraced.Add(r);
        // An op says what it does (every reducer frame an all-reduce);
        // another collective call, its name.
        const std::string what = IsCollectiveOp(c.op) ? fmt::OpName(c.op) : job.names[c.name];
        auto& side = by_op[what];
        if (side.first.empty()) side.first = job.names[c.name];
        side.second.Add(r);
      } else {
        all_placed = false;
      }
    }
    if (!all_placed || traced.Empty() || untraced.Empty() ||
        traced.Count() + untraced.Count() != job.Members(comm).size()) {
      continue;
    }
    Mismatch m;
    m.comm = comm;
    m.seq = seq;
    m.field = "op";
    m.untraced = untraced;
    m.values.push_back({job.names[traced_name], traced});
    for (auto& [what, side] : by_op) {
      m.values.push_back({side.first + (what == side.first ? " (untraced)" : " (" + what + ", untraced)"), side.second});
    }
    std::stable_sort(m.values.begin(), m.values.end(),
                     [](const auto& a, const auto& b) { return a.second.Count() > b.second.Count(); });
    m.tie = m.values[0].second.Count() == m.values[1].second.Count();
    for (size_t i = 0; i < m.values.size(); ++i) {
      if (i != 0 || m.tie) m.odd.Merge(m.values[i].second);
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

std::vector<Mismatch> FindMismatches(const Job& job) {
  std::vector<Mismatch> out;
  for (const auto& [comm, seq] : job.flagged) {
    const GlobalComm& c = job.comms[size_t(comm)];
    std::vector<std::pair<int32_t, CollSig>> sigs;
    for (int32_t r : job.Members(comm)) {
      CollSig sig;
      if (job.ranks[size_t(r)].Entered(comm) >= seq && job.SigOf(r, comm, seq, &sig)) sigs.push_back({r, sig});
    }
    struct Field {
      const char* name;
      std::function<std::string(const CollSig&)> value;
    };
    const Field fields[] = {
        {"op", [&](const CollSig& s) { return job.names[s.name]; }},
        {"count", [](const CollSig& s) { return std::to_string(s.count); }},
        {"datatype", [](const CollSig& s) { return std::string(fmt::DtypeName(fmt::Dtype(s.dtype))); }},
        {"root", [](const CollSig& s) { return std::to_string(s.root); }},
        {"redop", [](const CollSig& s) { return std::string(fmt::RedopName(fmt::Redop(s.redop))); }},
    };
    for (const Field& f : fields) {
      std::map<std::string, RankSet> by_value;
      for (const auto& [r, sig] : sigs) by_value[f.value(sig)].Add(r);
      if (by_value.size() < 2) continue;
      Mismatch m;
      m.comm = comm;
      m.seq = seq;
      m.field = f.name;
      for (auto& [value, ranks] : by_value) m.values.push_back({value, ranks});
      std::stable_sort(m.values.begin(), m.values.end(),
                       [](const auto& a, const auto& b) { return a.second.Count() > b.second.Count(); });
      // The odd ranks: all but the most common value. A tie (two ranks in a
      // comm of two) is broken by the other comms of the same family at the
      // same sequence number, which run the same code; unbroken, every side
      // is odd (a tie, said as one).
      size_t common = 0;
      if (m.values.size() > 1 && m.values[0].second.Count() == m.values[1].second.Count()) {
        std::map<std::string, int> votes;
        for (size_t oc = 0; oc < job.comms.size(); ++oc) {
          if (int32_t(oc) == comm || job.comms[oc].family != c.family) continue;
          // Whichever loader thread read that comm's ranks holds its entry.
          for (const Job::SigTable& table : job.sig_tables) {
            if (const SigWindow::Entry* e = oc < table.size() ? table[oc].Find(seq) : nullptr) {
              votes[f.value(e->second)]++;
              break;
            }
          }
        }
        // Decided only by a value that has more votes than any other.
        int best = -1;
        size_t at_best = 0;
        for (size_t i = 0; i < m.values.size(); ++i) {
          const int n = votes[m.values[i].first];
          if (n > best) best = n, common = i, at_best = 1;
          else if (n == best) ++at_best;
        }
        m.tie = best <= 0 || at_best > 1;
      }
      for (size_t i = 0; i < m.values.size(); ++i) {
        if (i != common || m.tie) m.odd.Merge(m.values[i].second);
      }
      if (common != 0) std::swap(m.values[0], m.values[common]);
      out.push_back(m);
      break;  // one field per (comm, seq) is enough to name the odd ranks
    }
  }
  for (Mismatch& m : UntracedMismatches(job)) out.push_back(std::move(m));
  return out;
}

// --- deaths ------------------------------------------------------------------------------------

std::string ClockTime(int64_t real_ns) {
  time_t secs = time_t(real_ns / 1000000000);
  struct tm tm;
  localtime_r(&secs, &tm);
  char out[32];
  snprintf(out, sizeof(out), "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
           int((real_ns % 1000000000) / 1000000));
  return out;
}

Deaths FindDeaths(const Job& job) {
  // A heartbeat every 0.1 s: a killed rank's last sign of life may precede
  // its death by that much (more on a loaded machine). One died "clearly
  // first" when it went silent this long before any other death, or before
  // the SIGTERMs (or exits) that ended the others (those come with their
  // exact time).
  constexpr double kResolutionS = 0.5;
  // A rank in its call this long before it died was waiting, not running.
  constexpr double kWaitingS = 1.0;
  Deaths d;
  std::vector<std::pair<int64_t, int32_t>> killed, ended, crashed;
  bool all_dead = true, all_running = true;
  std::set<std::string> senders;
  std::map<int32_t, RankSet> codes;
  for (const RankView& v : job.ranks) {
    if (v.state == RankState::kMissing) continue;
    if (v.ending == Ending::kCrashed) crashed.push_back({v.end_real_ns, v.rank});
    const bool exited_in_call = v.ending == Ending::kExited && v.ended_in_call;
    if (!v.dead && !exited_in_call) {
      all_dead = false;
      continue;
    }
    if (exited_in_call) {
      ended.push_back({v.end_real_ns, v.rank});
      d.exited.Add(v.rank);
      codes[v.exit_code].Add(v.rank);
    } else {
      (v.term_signal ? ended : killed).push_back({v.end_real_ns, v.rank});
      (v.term_signal ? d.ended : d.killed).Add(v.rank);
      if (v.term_signal) senders.insert(v.term_sender);
    }
    // How long it had been in its call when it ended (a SIGTERM's time is
    // exact; else its last sign of life). A call its watchdog flagged was
    // known to wait at least the watchdog's timeout.
    if (v.state == RankState::kInCall && v.basis == Basis::kTrace &&
        (double(v.end_real_ns - v.current.begin_real_ns) / 1e9 >= kWaitingS || v.current.seconds >= kWaitingS ||
         v.watchdog)) {
      all_running = false;
    }
    d.last_ns = std::max(d.last_ns, v.end_real_ns);
  }
  if (senders.size() == 1) d.ended_by = *senders.begin();
  for (const auto& [code, ranks] : codes) {
    d.exit_codes += (d.exit_codes.empty() ? "" : ", ") + std::to_string(code & 0xff) +
                    (codes.size() > 1 ? " (" + ranks.Named() + ")" : "");
  }
  std::sort(killed.begin(), killed.end());
  std::sort(ended.begin(), ended.end());
  std::sort(crashed.begin(), crashed.end());
  int64_t first_term = INT64_MAX;
  for (const RankView& v : job.ranks) {
    if (d.ended.Contains(v.rank)) first_term = std::min(first_term, v.end_real_ns);
  }
  for (const RankView& v : job.ranks) {
    if (d.exited.Contains(v.rank) && v.exit_code != 0 && first_term != INT64_MAX && v.end_real_ns <= first_term) {
      d.failed_first.Add(v.rank);
    }
  }
  if (!crashed.empty()) {
    d.first_crash = crashed.front().second;
    for (size_t i = 1; i < crashed.size(); ++i) d.crashed_after.Add(crashed[i].second);
  }
  d.all_while_running = all_dead && (!killed.empty() || !ended.empty()) && all_running;
  if (killed.empty()) return d;
  const auto [t0, r0] = killed.front();
  int64_t next = INT64_MAX;
  if (killed.size() > 1) next = killed[1].first;
  if (!ended.empty()) next = std::min(next, ended.front().first);
  // A crash is a death with its exact time: a rank killed after another
  // crashed did not die first (a torch job: rank 1 aborts, mpirun then
  // kills a rank that was still printing the error it got).
  if (!crashed.empty()) next = std::min(next, crashed.front().first);
  const bool alone = killed.size() == 1 && ended.empty() && crashed.empty() && !all_dead;  // the only death
  const bool clearly = next != INT64_MAX && double(next - t0) / 1e9 > kResolutionS;
  if (alone || clearly) {
    d.first = r0;
    d.first_ns = t0;
    d.next_after_s = next == INT64_MAX ? -1 : double(next - t0) / 1e9;
  }
  return d;
}

// --- blame -------------------------------------------------------------------------------------

void BlameContext::Blame(int32_t rank, const std::string& why) {
  const RankView& v = job.ranks[size_t(rank)];
  if (culprits.count(rank)) return;
  culprits[rank] = Culprit{rank, v.host, v.pid, why + WhereInProgram(job, v.user_frame)};
}

namespace {
// What `waiters` wait for in point-to-point `call` is the peer's half of the
// message: said from the waiter's side.
std::string PeerHalfNotDone(const Job& job, const CallPoint& call, const RankSet& waiters) {
  const bool one = waiters.Count() == 1;
  const std::string who = waiters.Named();
  const std::string tag = call.tag >= 0 ? " tag " + std::to_string(call.tag) : "";
  const std::string comm = call.comm >= 0 ? " on " + job.comms[size_t(call.comm)].label : "";
  if (call.recv_peer >= 0) {  // a Sendrecv waits for its receive half
    return "never sent what " + who + (one ? " waits" : " wait") + " for in " + job.names[call.name] + " #" +
           std::to_string(call.recv_seq) + comm + " from " + PeerWord(job, call.comm, call.recv_peer) +
           (call.recv_tag >= 0 ? " tag " + std::to_string(call.recv_tag) : "");
  }
  switch (call.op) {
    case fmt::Op::kSend:
      return "never received what " + who + (one ? " sends" : " send") + " in " + job.names[call.name] + " #" + std::to_string(call.seq) + comm + tag;
    case fmt::Op::kRecv:
    case fmt::Op::kProbe:
      return "never sent what " + who + (one ? " waits" : " wait") + " for in " + job.names[call.name] + " #" + std::to_string(call.seq) + comm + tag;
    default:
      return "never answered " + who + " in " + DescribeCall(job, call);
  }
}

// Of the requests that `waiters` wait on, the first that `rank` owes its
// half of (a message to or from it, a nonblocking collective it has not
// entered); nullptr if none. A few waiters suffice: they wait alike.
const CallPoint* RequestOwedBy(const Job& job, const RankSet& waiters, int32_t rank) {
  constexpr int kWaitersLooked = 64;
  int looked = 0;
  for (int32_t w : waiters.Ranks()) {
    for (const CallPoint& p : job.ranks[size_t(w)].pending) {
      if (IsCollective(p) ? p.seq && Behind(job, p.comm, p.seq).Contains(rank) : job.CommByRank(p.comm, p.peer) == rank) {
        return &p;
      }
    }
    if (++looked == kWaitersLooked) break;
  }
  return nullptr;
}
}  // namespace

std::string BlameContext::NeverEntered(int32_t rank) const {
  // Who waits for `rank`, for the reasons: the biggest class waiting for it.
  const Group* best = nullptr;
  for (const Group& g : classes.groups) {
    if (g.state == RankState::kInCall && g.waiting_for.Contains(rank) &&
        (!best || g.ranks.Count() > best->ranks.Count())) {
      best = &g;
    }
  }
  if (!best) return "is waited for";
  CallPoint call = best->call;
  call.on_device = false;  // what it never entered is the call itself
  if (call.from_stacks) {
    // A call seen on stacks waits for a rank only through a file lock.
    std::string file;
    for (int32_t w : best->ranks.Ranks()) {
      for (const ThreadStack& t : job.ranks[size_t(w)].stacks) {
        if (file.empty() && !t.lock_file.empty()) file = t.lock_file;
      }
      if (!file.empty()) break;
    }
    return "holds the file lock" + (file.empty() ? std::string() : " on " + file) + " that " + best->ranks.Named() +
           (best->ranks.Count() == 1 ? " waits" : " wait") + " for (in " + job.names[call.name] + ", seen on " +
           (best->ranks.Count() == 1 ? "its" : "their") + " stacks)";
  }
  if (call.op == fmt::Op::kWait) {
    // A wait (or a poll) is for the requests the waiters posted.
    const CallPoint* owed = RequestOwedBy(job, best->ranks, rank);
    if (!owed) return PeerHalfNotDone(job, call, best->ranks);
    if (IsCollective(*owed)) return "never entered " + DescribeCall(job, *owed);
    return PeerHalfNotDone(job, *owed, best->ranks) + " (waited for in " + job.names[call.name] + ")";
  }
  if (IsCollective(call) || (call.call_flags & fmt::kCallFinalize) || call.op == fmt::Op::kCommMgmt) {
    return "never entered " + DescribeCall(job, call);
  }
  return PeerHalfNotDone(job, call, best->ranks);
}

void ApplyBlameRules(BlameContext* ctx) {
  for (size_t s = 0; s < ctx->comps.members.size(); ++s) {
    for (size_t r = 0; r < kNumBlameRules; ++r) {
      if (!ctx->comps.sink[s] && !kBlameRules[r].beyond_sinks) continue;
      if (kBlameRules[r].applies(*ctx, int(s))) {
        kBlameRules[r].blame(*ctx, int(s));
        break;
      }
    }
  }
}

// --- the verdict ------------------------------------------------------------------------------

namespace {

// A rank outside any traced call whose last call returned this recently
// is working: a job makes a call per step. Beyond, only its stacks can say
// whether it computes or is blocked in something hangtrace does not wrap.
constexpr double kActiveS = 3.0;

double OutsideSeconds(const RankView& v) {
  return v.last_record_real_ns && v.end_real_ns > v.last_record_real_ns
             ? double(v.end_real_ns - v.last_record_real_ns) / 1e9
             : -1;
}

// Whether a rank outside any call is known to work: it moved between two
// looks, its stacks show no blocking call, or it left a traced call a
// moment ago.
bool KnownToWork(const RankView& v, const Diagnosis& d) {
  if (d.compared && d.progressing.Contains(v.rank)) return true;
  if (v.basis == Basis::kStacks && !v.stack_call.valid) return true;
  const double outside = OutsideSeconds(v);
  return outside >= 0 && outside < kActiveS;
}

// The innermost frame of `v`'s crashing thread that is its own code, not
// the C library's abort or hangtrace's handler: "c10d::...::run", or "".
std::string CrashSite(const Job& job, const RankView& v) {
  for (const ThreadStack& t : v.stacks) {
    if (v.signal_tid && t.tid != v.signal_tid) continue;
    for (uint32_t id : t.frames) {
      const Frame& f = job.frames[id];
      if (f.func.empty() || f.lang != Frame::Lang::kNative) continue;
      const std::string name = f.func.substr(0, f.func.find('('));
      static const char* const kLibc[] = {"raise", "abort", "__GI_raise", "__GI_abort", "__pthread_kill_implementation",
                                          "__pthread_kill_internal", "__pthread_kill", "pthread_kill", "__restore_rt",
                                          "gsignal", "__libc_message", "__assert_fail", "__assert_fail_base",
                                          "__fortify_fail", "__chk_fail"};
      // Nor the interpreter's (a Python program's abort is said by its
      // Python frame, which Blame adds).
      const std::string module = f.module.substr(f.module.find_last_of('/') + 1);
      bool skip = module.rfind("libhangtrace", 0) == 0 || name.rfind("hangtrace", 0) == 0 ||
                  module.rfind("python", 0) == 0 || module.rfind("libpython", 0) == 0 ||
                  module.rfind("libc.so", 0) == 0 || module.rfind("libc-", 0) == 0 || name == "_start";
      for (const char* l : kLibc) skip |= name == l;
      if (!skip) return name;
    }
    break;
  }
  return "";
}

// A crash nobody waits for yet: the rank whose fatal signal came first (and
// which crashed after it), else the first rank gone without a record.
void BlameFirstCrash(const Job& job, const Deaths& deaths, BlameContext* ctx) {
  if (deaths.first_crash >= 0) {
    const RankView& v = job.ranks[size_t(deaths.first_crash)];
    const std::string site = CrashSite(job, v);
    std::string why = std::string(deaths.crashed_after.Empty() ? "crashed" : "crashed first") + " with " +
                      SignalName(v.signal) + " at " + ClockTime(v.end_real_ns) +
                      (v.current.valid && v.traced_call ? " inside " + DescribeCall(job, v.current) : std::string()) +
                      (site.empty() ? std::string() : " in " + site);
    if (!deaths.crashed_after.Empty()) why += "; " + deaths.crashed_after.Named() + " crashed after it";
    ctx->Blame(v.rank, why);
    return;
  }
  const RankView* first = nullptr;
  for (const RankView& v : job.ranks) {
    if (v.state == RankState::kGone && (!first || v.end_real_ns < first->end_real_ns)) first = &v;
  }
  if (first) {
    ctx->Blame(first->rank, (first->term_signal ? "was ended by SIGTERM from " + first->term_sender
                                                 : std::string("died without an exit record (killed: SIGKILL, or the "
                                                               "OOM killer?)")) +
                                " at " + ClockTime(first->end_real_ns) + ", first of the ranks that ended");
  }
}

}  // namespace

std::string NoHangOrWhyUnknown(const Job& job, const Diagnosis& d, bool* no_hang) {
  // Every rank outside any call (none is waiting in one): nothing hangs
  // only if each is known to be done or working.
  RankSet unsure, stopped, exited_badly;
  double longest = 0;
  size_t exited = 0, present = 0;
  for (const RankView& v : job.ranks) {
    if (v.state == RankState::kMissing) continue;
    ++present;
    if (v.state == RankState::kExited) {
      ++exited;
      if (v.exit_code != 0) exited_badly.Add(v.rank);
      continue;
    }
    if (v.state == RankState::kStopped) {
      stopped.Add(v.rank);
      continue;
    }
    if (!KnownToWork(v, d)) {
      unsure.Add(v.rank);
      longest = std::max(longest, OutsideSeconds(v));
    }
  }
  *no_hang = unsure.Empty() && stopped.Empty();
  if (*no_hang) {
    if (d.compared && !d.progressing.Empty()) {
      return "ranks " + d.progressing.Brief() + " moved on between the two looks: slow, not hung";
    }
    if (exited == present) {
      return exited_badly.Empty() ? "every rank exited"
                                  : "every rank exited (" + exited_badly.Named() + " with a nonzero status)";
    }
    bool by_stacks = false;
    for (const RankView& v : job.ranks) by_stacks |= v.state == RankState::kCompute && v.basis == Basis::kStacks;
    return by_stacks ? "no rank is in a communication call: the stacks show every rank computing"
                     : "no rank is in a traced call, and each left its last one under " +
                           std::to_string(int(kActiveS)) + " s ago: the job is working";
  }
  if (!stopped.Empty()) {
    return stopped.Named() + (stopped.Count() == 1 ? " is" : " are") +
           " stopped (SIGSTOP, or wedged) while no rank waits in a traced call yet; the others will wait for " +
           (stopped.Count() == 1 ? "it" : "them");
  }
  const bool ended = d.ended;
  if (job.records == 0) {
    // Silent because the storage refused them room (or the dump lacks
    // them): that, not unwrapped calls, is what to say.
    RankSet blind;
    std::string why;
    bool one_reason = true;
    for (const RankView& v : job.ranks) {
      if (v.blind.empty()) continue;
      blind.Add(v.rank);
      if (why.empty()) why = v.blind;
      one_reason &= v.blind == why;
    }
    if (!blind.Empty()) {
      return blind.Named() + (blind.Count() == 1 ? " is " : " are ") + why +
             (one_reason ? "" : " (the first of them; the others for other reasons)") +
             ", and no rank recorded a call: where " +
             (blind.Count() == 1 ? "it is" : "they are") + " is unknown (`hangtrace dump` reads the stacks)";
    }
    return std::to_string(present) + (present == 1 ? " rank is" : " ranks are") +
           " traced but none recorded a call: none has reached one yet (starting up, or waiting before its "
           "first: a rendezvous, init_process_group, MPI_Init), or its calls are not ones hangtrace wraps here "
           "(an MPI other than the one it was built for)" +
           (ended ? std::string(", and the job has ended: nothing says where its ranks were")
                  : std::string(", and their stacks were not captured: run `hangtrace dump` on the live job"));
  }
  char for_s[32];
  snprintf(for_s, sizeof(for_s), "%.0f s", longest);
  return unsure.Named() + (unsure.Count() == 1 ? " has" : " have") + " been outside any traced call for " +
         (longest > 0 ? std::string("up to ") + for_s : std::string("a while")) +
         ", and nothing says whether " + (unsure.Count() == 1 ? "it computes or is" : "they compute or are") +
         " blocked in a call hangtrace does not wrap" +
         (ended ? std::string(" (the job has ended)")
                : std::string(": `hangtrace dump` reads their stacks; `hangtrace analyze --interval 5` looks twice"));
}

// One look at a job still running: a rank in a call has waited there
// longer than it ever needed, or it is no evidence of a hang at all (a job
// at work has ranks in calls at every instant, and one behind the others).
// The evidence, per rank in a traced call: its watchdog flagged the call
// (it waited the job's own --timeout); or, with enough history of the same
// call on its thread, it has waited kStuckFactor times the longest of
// those and at least kStuckFloorS. A first call of its kind has only the
// watchdog's timeout to go by. A rank the others wait for that is stopped
// (SIGSTOP, or wedged: its heartbeat silent) or has exited cannot come:
// that shows it too. `stuck`: what shows it; else `why_not`: why one look
// cannot call it a hang.
constexpr uint32_t kUsualMinCalls = 3;
constexpr double kStuckFactor = 10, kStuckFloorS = 2;
struct OneLook {
  std::string stuck, why_not;
};
OneLook JudgeOneLook(const Job& job, const Diagnosis& d, const BlameContext& ctx) {
  char text[200];
  for (const auto& [r, c] : ctx.culprits) {
    const RankState state = job.ranks[size_t(r)].state;
    if (state == RankState::kStopped || state == RankState::kExited) {
      return {"rank " + std::to_string(r) + (state == RankState::kStopped ? " is stopped" : " has exited"), ""};
    }
  }
  RankSet waiting, first_of_kind, on_stacks;
  double waited = 0, usual = 0, timeout = 0;
  for (const Group& g : d.groups) {
    if (g.state != RankState::kInCall) continue;
    // In a call only its stacks show (one torch issues from C++, an MPI
    // call not wrapped): where it is, never since when.
    if (g.basis != Basis::kTrace) {
      on_stacks.Merge(g.ranks);
      continue;
    }
    for (int32_t r : g.ranks.Ranks()) {
      const RankView& v = job.ranks[size_t(r)];
      const double in_call = v.current.seconds;
      if (v.watchdog || (v.watchdog_timeout_s > 0 && in_call >= v.watchdog_timeout_s)) {
        snprintf(text, sizeof(text), "past the watchdog's %g s", v.watchdog_timeout_s);
        return {text, ""};
      }
      const bool known = v.usual_calls >= kUsualMinCalls;
      if (known && in_call >= std::max(kStuckFloorS, kStuckFactor * v.usual_longest_s)) {
        snprintf(text, sizeof(text), "%.0fx the longest the same call took before on rank %d, %.2g s",
                 in_call / std::max(v.usual_longest_s, 1e-3), r, v.usual_longest_s);
        return {text, ""};
      }
      waiting.Add(r);
      if (!known) first_of_kind.Add(r);
      if (known) usual = std::max(usual, v.usual_longest_s);
      waited = std::max(waited, in_call);
      timeout = std::max(timeout, v.watchdog_timeout_s);
    }
  }
  if (waiting.Empty() && on_stacks.Empty()) return {};  // no wait to weigh: the structure decides
  std::string why;
  if (!waiting.Empty()) {
    snprintf(text, sizeof(text), "%s waited in calls for at most %.1f s", waiting.Count() == 1 ? " has" : " have",
             waited);
    why = waiting.Named() + text;
  }
  if (first_of_kind.Count() < waiting.Count()) {
    snprintf(text, sizeof(text),
             ", short of what would show %s stuck (%.0fx the longest the same call took before on %s, %.2g s, and at "
             "least %.0f s)",
             waiting.Count() == 1 ? "it" : "them", kStuckFactor, waiting.Count() == 1 ? "it" : "them", usual,
             kStuckFloorS);
    why += text;
  }
  if (!first_of_kind.Empty()) {
    why += std::string(first_of_kind.Count() < waiting.Count() ? "; " : ", ") +
           (first_of_kind.Count() == waiting.Count() ? std::string(waiting.Count() == 1 ? "a call" : "calls")
                                                     : first_of_kind.Named() + " in calls") +
           " too new to their rings to know how long they take";
    if (timeout > 0) {
      snprintf(text, sizeof(text), ", and short of the watchdog's %.0f s", timeout);
      why += text;
    } else {
      why += ", with no watchdog timeout set";
    }
  }
  if (!on_stacks.Empty()) {
    why += std::string(why.empty() ? "" : "; ") + on_stacks.Named() + (on_stacks.Count() == 1 ? " is" : " are") +
           " in calls only " + (on_stacks.Count() == 1 ? "its" : "their") +
           " stacks show, which say where, not since when";
  }
  return {"", "one look at a running job: " + why +
                  ". A job at work looks like this too (the classes below show who waits for whom): look twice, "
                  "hangtrace analyze --interval 5, or again after the watchdog's timeout"};
}

Verdict DecideVerdict(const Job& job, Diagnosis* d, BlameContext* ctx) {
  size_t in_call = 0;
  RankSet stuck;
  for (const Group& g : d->groups) {
    if (g.state == RankState::kInCall) {
      in_call += g.ranks.Count();
      stuck.Merge(g.ranks);
    }
  }
  const bool all_moving = d->compared && in_call > 0 && [&] {
    for (int32_t r : stuck.Ranks()) {
      if (!d->progressing.Contains(r)) return false;
    }
    return true;
  }();
  bool any_crash = false;
  for (const RankView& v : job.ranks) any_crash |= v.state == RankState::kCrashed || v.state == RankState::kGone;
  // A culprit that is also an odd rank of a mismatch: the mismatch explains
  // it (an MPI library may abort on it, leaving artificial cycles behind).
  RankSet odd;
  for (const Mismatch& m : d->mismatches) odd.Merge(m.odd);
  bool culprit_is_odd = false;
  for (const auto& [r, c] : ctx->culprits) culprit_is_odd |= odd.Contains(r);
  auto blame_odd_only = [&] {
    ctx->culprits.clear();
    for (const Mismatch& m : d->mismatches) {
      for (int32_t r : m.odd.Ranks()) ctx->Blame(r, MismatchWhy(job, m, r));
    }
  };
  const Findings& f = ctx->found;
  const bool only_missing_blamed = f.missing_blamed && [&] {
    for (const auto& [r, c] : ctx->culprits) {
      if (job.ranks[size_t(r)].state != RankState::kMissing) return false;
    }
    return true;  // only ranks without a file explain the hang
  }();
  // Every process died while the job ran (none had waited in its call):
  // where they were says nothing of a hang, if the ones outside calls were
  // known to work.
  const bool killed_while_running = ctx->deaths.all_while_running && ctx->deaths.first < 0 && [&] {
    for (const RankView& v : job.ranks) {
      if (v.state == RankState::kCompute && !KnownToWork(v, *d)) return false;
    }
    return true;
  }();
  // One look at a running job: whether it shows a rank stuck (JudgeOneLook).
  const OneLook look = d->compared || d->ended ? OneLook{} : JudgeOneLook(job, *d, *ctx);
  // A mismatch of the traces (two calls at one sequence number) is a fact
  // at any look. One the stacks show (a rank in a collective the trace does
  // not hold where the others are in a traced one) is a moment: at one look,
  // a job at work shows it too, unless a rank is seen stuck.
  const bool mismatch_only_on_stacks =
      !d->mismatches.empty() && std::all_of(d->mismatches.begin(), d->mismatches.end(),
                                            [](const Mismatch& m) { return !m.untraced.Empty(); });
  const bool unsure_of_mismatch = mismatch_only_on_stacks && !look.why_not.empty();
  Verdict v;
  if ((in_call == 0 || all_moving) && !d->mismatches.empty()) {
    // The job ran on, but its ranks disagreed on a collective's arguments:
    // its results are wrong even though nothing hangs.
    v = Verdict::kMismatch;
    blame_odd_only();
  } else if (in_call == 0 || all_moving) {
    if (any_crash) {
      v = Verdict::kCrash;
      if (ctx->culprits.empty()) BlameFirstCrash(job, ctx->deaths, ctx);
    } else if (killed_while_running) {
      v = ctx->deaths.killed.Empty() ? Verdict::kNoHang : Verdict::kCrash;
    } else if (all_moving) {
      v = Verdict::kNoHang;
    } else {
      bool no_hang = false;
      d->evidence = NoHangOrWhyUnknown(job, *d, &no_hang);
      v = no_hang ? Verdict::kNoHang : Verdict::kUnknown;
    }
  } else if ((culprit_is_odd || (f.mismatch_hang && !f.crash)) && unsure_of_mismatch) {
    v = Verdict::kUnknown;
    ctx->culprits.clear();
    d->evidence = look.why_not;
  } else if (culprit_is_odd || (f.mismatch_hang && !f.crash)) {
    v = Verdict::kMismatch;
    blame_odd_only();
  } else if (!ctx->deaths.failed_first.Empty() && !f.deadlock && d->mismatches.empty()) {
    v = Verdict::kCrash;
    ctx->culprits.clear();
    for (int32_t r : ctx->deaths.failed_first.Ranks()) {
      const RankView& fv = job.ranks[size_t(r)];
      ctx->Blame(r, "exited with status " + std::to_string(fv.exit_code & 0xff) + " inside " +
                        DescribeCall(job, fv.current) + ", before " +
                        (ctx->deaths.ended_by.empty() ? std::string("the launcher") : ctx->deaths.ended_by) +
                        " ended the others (an MPI error under MPI_ERRORS_ARE_FATAL, or an abort?)");
    }
  } else if (killed_while_running && d->mismatches.empty()) {
    ctx->culprits.clear();
    v = ctx->deaths.killed.Empty() ? Verdict::kNoHang : Verdict::kCrash;
  } else if (f.crash || (any_crash && ctx->culprits.empty()) || only_missing_blamed) {
    v = Verdict::kCrash;
    if (ctx->culprits.empty()) BlameFirstCrash(job, ctx->deaths, ctx);
  } else if (f.deadlock) {
    v = Verdict::kDeadlock;
  } else if (!d->mismatches.empty() && ctx->culprits.empty() && !unsure_of_mismatch) {
    v = Verdict::kMismatch;
    blame_odd_only();
  } else if (ctx->culprits.empty() && !f.completing.Empty() && !f.below) {
    v = Verdict::kUnknown;
    d->evidence = f.completing.Named() + (f.completing.Count() == 1 ? " is" : " are") + " in " +
                  f.completing_call + ": the call completes for them too unless something below MPI is wrong, " +
                  "and one look cannot tell (read twice: hangtrace analyze --interval 5)";
  } else if (ctx->culprits.empty() && !f.comm_unknown.Empty()) {
    const bool one = f.comm_unknown.Count() == 1;
    v = Verdict::kUnknown;
    d->evidence = f.comm_unknown.Named() + (one ? " is" : " are") + " in a communication call on a communicator " +
                  (one ? "its" : "their") + " trace did not record (the file's communicator table was full: " +
                  "see the warnings), so whom " + (one ? "it waits" : "they wait") + " for is unknown";
  } else if (!look.why_not.empty()) {
    v = Verdict::kUnknown;
    ctx->culprits.clear();
    d->evidence = look.why_not;
  } else {
    v = Verdict::kHang;
    d->stuck_because = look.stuck;
  }
  // The culprits, decided here once. Two reads: a rank that moved in
  // between is slow, never a culprit. A rank with no trace file is a
  // culprit only when nothing else explains the hang: beside a culprit the
  // traces convict, it is unseen (its node did not answer, its file is
  // lost), and said so on a line of its own.
  // Except the odd rank of a mismatch its trace records: which collective
  // it called as number n is a fact of the trace, whatever it did since.
  if (d->compared) {
    for (int32_t r : d->progressing.Ranks()) {
      const bool recorded_odd = v == Verdict::kMismatch && std::any_of(d->mismatches.begin(), d->mismatches.end(),
                                    [&](const Mismatch& m) { return m.odd.Contains(r) && !m.untraced.Contains(r); });
      if (!recorded_odd) ctx->culprits.erase(r);
    }
  }
  const bool convicted = std::any_of(ctx->culprits.begin(), ctx->culprits.end(), [&](const auto& rc) {
    return job.ranks[size_t(rc.first)].state != RankState::kMissing;
  });
  d->culprits.clear();
  for (auto& [r, c] : ctx->culprits) {
    if (convicted && job.ranks[size_t(r)].state == RankState::kMissing) d->unseen.Add(r);
    else d->culprits.push_back(c);
  }
  return v;
}

// --- the summary ------------------------------------------------------------------------------

std::string Summarize(const Job& job, const Diagnosis& d, const Deaths& deaths) {
  // No rank in a call: the evidence that nothing hangs, or why it is unknown.
  if (!d.evidence.empty()) return d.evidence;
  // A culprit killed (no exit record, no SIGTERM): how the job went on.
  if (d.verdict == Verdict::kCrash && !d.culprits.empty() && deaths.killed.Contains(d.culprits.front().rank)) {
    const RankView& v = job.ranks[size_t(d.culprits.front().rank)];
    std::string out = "rank " + std::to_string(v.rank) + " died " + (deaths.first == v.rank ? "first, " : "") +
                      "without an exit record (SIGKILL, or the OOM killer?), at " + ClockTime(v.end_real_ns);
    const int64_t later = !deaths.ended.Empty() ? [&] {
      int64_t t = INT64_MAX;
      for (int32_t r : deaths.ended.Ranks()) t = std::min(t, job.ranks[size_t(r)].end_real_ns);
      return t;
    }() : 0;
    char after[32];
    snprintf(after, sizeof(after), "%.1f s", std::max(0.0, double(later - v.end_real_ns) / 1e9));
    if (!deaths.ended.Empty()) {
      out += "; " + (deaths.ended_by.empty() ? std::string("a SIGTERM") : deaths.ended_by) + " ended the others " +
             after + " later";
    } else if (deaths.next_after_s >= 0 && deaths.first == v.rank) {
      snprintf(after, sizeof(after), "%.1f s", deaths.next_after_s);
      out += "; the others died " + std::string(after) + " later";
    }
    return out;
  }
  if (deaths.all_while_running && d.culprits.empty()) {
    RankSet all = deaths.killed;
    all.Merge(deaths.ended);
    // The ranks that died, said as one or many; none named (they ended
    // by exiting from inside a call, counted apart): the job's processes.
    const std::string who = all.Empty() ? "the job's processes" : all.Named();
    const bool one = all.Count() == 1;
    if (deaths.killed.Empty()) {
      return who + (one ? " was" : " were") + " ended by SIGTERM" +
             (deaths.ended_by.empty() ? "" : " from " + deaths.ended_by) + " at " + ClockTime(deaths.last_ns) +
             " while the job ran: nothing was hung";
    }
    return who + (one ? " died" : " all died") + " without exit records (SIGKILL, or the OOM killer?) by " +
           ClockTime(deaths.last_ns) + " while the job ran: nothing was hung";
  }
  size_t in_call = 0;
  for (const Group& g : d.groups) in_call += g.state == RankState::kInCall ? g.ranks.Count() : 0;
  const bool all_moving = d.compared && in_call > 0 && !d.progressing.Empty() && [&] {
    for (const Group& g : d.groups) {
      if (g.state != RankState::kInCall) continue;
      for (int32_t r : g.ranks.Ranks()) {
        if (!d.progressing.Contains(r)) return false;
      }
    }
    return true;
  }();
  if (d.verdict == Verdict::kMismatch && in_call == 0) {
    return "no rank is stuck, but ranks disagreed on a collective's arguments, so results are wrong: " +
           std::string(d.culprits.empty() ? "" : "rank " + std::to_string(d.culprits[0].rank) + " " + d.culprits[0].why);
  }
  if (d.verdict == Verdict::kNoHang) {
    if (all_moving) return "ranks " + d.progressing.Brief() + " moved on between the two snapshots: slow, not hung";
    size_t exited = 0;
    for (const RankView& v : job.ranks) exited += v.state == RankState::kExited;
    return exited == size_t(job.world_size) ? "every rank exited" : "no rank is inside a traced call";
  }
  if (!d.culprits.empty()) {
    RankSet c;
    for (const Culprit& k : d.culprits) c.Add(k.rank);
    const bool p2p_cycle = std::all_of(d.culprits.begin(), d.culprits.end(), [](const Culprit& k) {
      return k.why.rfind("in a cycle of point-to-point waits", 0) == 0;
    });
    if (d.verdict == Verdict::kDeadlock && p2p_cycle) {
      return c.Named() + " deadlock in point-to-point calls, each waiting for the next";
    }
    // The culprits first, in a few words (their reasons' first clauses,
    // each said once for the ranks that share it, in the culprits' order);
    // who waits for them is the next line (Diagnosis::notes).
    std::vector<std::pair<std::string, RankSet>> reasons;
    std::unordered_map<std::string, size_t> reason_index;
    for (const Culprit& k : d.culprits) {
      // A reason that names its own subject ("rank 0 sent tag 0 to rank 1
      // (still unreceived); rank 1 waits for tag 1 from rank 0: tag
      // mismatch") is said whole, for the ranks it names.
      const bool own_subject = k.why.rfind("rank ", 0) == 0;
      std::string first = own_subject ? k.why : k.why.substr(0, k.why.find("; "));
      auto [at, fresh] = reason_index.try_emplace(first, reasons.size());
      if (fresh) reasons.push_back({std::move(first), RankSet()});
      reasons[at->second].second.Add(k.rank);
    }
    // "rank 2 is stopped", "ranks 2,5 are stopped": a reason is written
    // for one rank.
    auto said = [](const RankSet& ranks, const std::string& clause) {
      if (clause.rfind("rank ", 0) == 0) return clause;
      if (ranks.Count() == 1) return ranks.Named() + " " + clause;
      for (const auto& [one, many] : {std::pair{"is ", "are "}, {"has ", "have "}}) {
        if (clause.rfind(one, 0) == 0) return "ranks " + ranks.Brief() + " " + many + clause.substr(strlen(one));
      }
      return "ranks " + ranks.Brief() + " " + clause;
    };
    if (reasons.size() == 1) return said(c, reasons.front().first);
    constexpr size_t kReasonsSaid = 3;  // the culprit lines have them all
    std::string out;
    RankSet rest;
    for (size_t i = 0; i < reasons.size(); ++i) {
      const auto& [first, ranks] = reasons[i];
      if (i >= kReasonsSaid) {
        rest.Merge(ranks);
        continue;
      }
      out += (out.empty() ? "" : "; ") + said(ranks, first);
    }
    if (!rest.Empty()) out += "; " + rest.Named() + ": see the culprits";
    return out;
  }
  if (!d.groups.empty() && d.groups.front().state == RankState::kInCall && d.below) {
    const Group& g = d.groups.front();
    return DescribeCall(job, g.call) + " does not complete though ranks " + g.ranks.Brief(24) +
           " are all in it: the problem is below MPI (network, device, library), not a rank";
  }
  // Waits the rules could not weigh (a cycle with no evidence against any
  // of its ranks): said as what they are, with no culprit.
  const bool waits = std::any_of(d.groups.begin(), d.groups.end(), [](const Group& g) { return !g.waiting_for.Empty(); });
  return std::to_string(in_call) + " ranks are in traced calls" +
         (waits ? ", waiting for each other (see the classes); nothing in the trace says which of them strayed"
                : "; no rank is waited for");
}

}  // namespace diagnose

namespace diagnose {

bool JobEnded(const Job& job) {
  size_t present = 0;
  for (const RankView& v : job.ranks) {
    if (v.state == RankState::kMissing) continue;
    ++present;
    if (v.ending == Ending::kRunning) return false;
  }
  return present > 0;
}

// Notes every diagnosis carries: the processes shown beside a rank, the
// ranks claimed twice, how the job ended and what one look can say.
void CommonNotes(const Job& job, const Deaths& deaths, Diagnosis* d) {
  Diagnosis& out = *d;
  // A job torn down after it hung: the diagnosis stands; say how it ended.
  RankSet dead = deaths.killed;
  dead.Merge(deaths.ended);
  dead.Merge(deaths.exited);
  if (!deaths.all_while_running && deaths.first < 0 && !dead.Empty() && out.verdict != Verdict::kNoHang) {
    const size_t all = out.with_trace.Count() + out.from_stacks.Count();
    auto who = [&](const RankSet& r) { return r.Count() == all ? std::string("every rank") : r.Named(); };
    std::string how;
    // The ranks that exited with a failure before the others were ended
    // began the tear-down (their culprit line says so): not torn down.
    RankSet torn_exits = deaths.exited;
    for (int32_t r : deaths.failed_first.Ranks()) torn_exits.Remove(r);
    if (!torn_exits.Empty()) {
      how = who(torn_exits) + " exited (status " + deaths.exit_codes + ") from inside " +
            (torn_exits.Count() == 1 ? "its call" : "their calls") + " (another thread ended " +
            (torn_exits.Count() == 1 ? "it" : "them") + ": a lost launcher?)";
    }
    if (!deaths.ended.Empty()) {
      how += std::string(how.empty() ? "" : "; ") + who(deaths.ended) + " ended by SIGTERM" +
             (deaths.ended_by.empty() ? "" : " from " + deaths.ended_by);
    }
    if (!deaths.killed.Empty()) {
      how += std::string(how.empty() ? "" : "; ") + who(deaths.killed) + " died without an exit record";
    }
    if (!how.empty()) out.notes.push_back("then the job was torn down: " + how + ", by " + ClockTime(deaths.last_ns));
  }
  // One look is not proof: a slow job looks the same. Say how long the
  // ranks have waited and how to tell; after the job ended, how long they
  // had waited and whether their watchdogs flagged them.
  if (!out.compared && out.verdict == Verdict::kHang) {
    double least = -1, most = 0, timeout = 0;
    size_t flagged = 0, in_call = 0;
    for (const Group& g : out.groups) {
      if (g.state != RankState::kInCall || g.basis != Basis::kTrace) continue;
      least = least < 0 ? g.in_call_s : std::min(least, g.in_call_s);
      most = std::max(most, g.in_call_s);
      for (int32_t r : g.ranks.Ranks()) {
        const RankView& v = job.ranks[size_t(r)];
        ++in_call;
        flagged += v.watchdog;
        timeout = std::max(timeout, v.watchdog_timeout_s);
      }
    }
    char waited[64], text[512];
    if (most - least < 0.05) snprintf(waited, sizeof(waited), "%.1f s", most);
    else snprintf(waited, sizeof(waited), "%.1f to %.1f s", least, most);
    if (least >= 0 && out.ended) {
      char watched[96] = "";
      if (flagged) {
        snprintf(watched, sizeof(watched), "; the watchdog flagged %s after %.0f s",
                 flagged == in_call ? "every one of them" : (std::to_string(flagged) + " of them").c_str(), timeout);
      }
      snprintf(text, sizeof(text), "the job has ended: the ranks in calls had waited %s when it ended%s", waited,
               watched);
      out.notes.push_back(text);
    } else if (least >= 0) {
      // A dump is a photograph: the second look is another dump, not
      // --interval (which reads live files twice, and refuses a dump).
      const bool dumped = std::any_of(job.ranks.begin(), job.ranks.end(),
                                      [](const RankView& v) { return !v.dump_state.empty(); });
      const std::string because = out.stuck_because.empty() ? "" : " (" + out.stuck_because + ")";
      snprintf(text, sizeof(text), "one snapshot: the ranks in calls have waited %s%s; a slow job is not excluded (%s)",
               waited, because.c_str(),
               dumped ? "dump again a few seconds later and give the first with --earlier: hangtrace analyze NEW "
                        "--earlier OLD"
                      : "hangtrace analyze --interval 5 reads twice");
      out.notes.push_back(text);
    }
  }
  // Two looks and nobody moved, but a culprit is outside any call: it may
  // be computing slowly (a long step, a sleep), and then the others will go
  // on. Nothing showed it working, nothing shows it stuck: said so.
  if (out.compared && out.verdict == Verdict::kHang) {
    RankSet computing;
    for (const Culprit& c : out.culprits) {
      if (job.ranks[size_t(c.rank)].state == RankState::kCompute) computing.Add(c.rank);
    }
    if (!computing.Empty()) {
      out.notes.push_back("no rank in a call moved between the two looks, but " + computing.Named() +
                          (computing.Count() == 1 ? " is" : " are") +
                          " outside any call: if it only computes slowly, the others will go on (look again later)");
    }
  }
  // Processes beside the ranks (a wrapper shell that does not exec, a
  // child with the rank's environment): one line for all of them.
  RankSet claimed;
  std::string example;
  size_t others = 0;
  for (const RankView& v : job.ranks) {
    if (v.also.empty()) continue;
    claimed.Add(v.rank);
    others += v.also.size();
    if (example.empty()) example = "rank " + std::to_string(v.rank) + " is pid " + std::to_string(v.pid) + ", beside " + v.also[0];
  }
  if (!claimed.Empty()) {
    out.notes.push_back("note: " + std::to_string(others) + " other process(es) also claim " + claimed.Named(24) +
                        " (a wrapper shell, a child with the rank's environment); each rank is the process that "
                        "initialized the library (" + example + ")");
  }
  // A rank outside any call, or a culprit, with processes of its own that
  // are no ranks (a DataLoader's workers, a pool, a subprocess): it may
  // wait for one of them, so each is named where it is (the dump read them).
  const RankSet culprits = CulpritRanks(out);
  size_t said = 0;
  for (const RankView& v : job.ranks) {
    if (!ChildrenMayHoldIt(v, culprits)) continue;
    if (++said > 8) break;
    const size_t n = v.children.size();
    std::string line = "rank " + std::to_string(v.rank) + " has " +
                       (n == 1 ? std::string("a process of its own that is no rank: ")
                               : std::to_string(n) + " processes of its own that are no ranks: ");
    for (size_t i = 0; i < n && i < 3; ++i) line += (i ? "; " : "") + DescribeChild(job, v.children[i]);
    if (n > 3) line += "; and " + std::to_string(n - 3) + " more";
    out.notes.push_back(line);
  }
  for (const std::string& dup : job.duplicates) out.notes.push_back("note: " + dup);
}

// Ranks whose trace cannot say where they are (the storage had no room for
// their file, or for a thread's lane) and that nothing else places: their
// silence is no evidence. A verdict that stands on it (no hang, or culprits
// all of them) becomes unknown, with the reason; any other verdict is kept,
// and they are named beside it.
void DistrustBlindRanks(const Job& job, Diagnosis* d) {
  RankSet blind;
  std::string why;
  bool one_reason = true;
  for (const RankView& v : job.ranks) {
    if (v.blind.empty() || (v.state != RankState::kMissing && v.state != RankState::kCompute)) continue;
    blind.Add(v.rank);
    if (why.empty()) why = v.blind;
    one_reason &= v.blind == why;
  }
  if (blind.Empty()) return;
  const bool one = blind.Count() == 1;
  const bool blamed = !d->culprits.empty() && std::all_of(d->culprits.begin(), d->culprits.end(), [&](const Culprit& c) {
    return blind.Contains(c.rank);
  });
  const std::string them = blind.Named() + (one ? " is " : " are ") + why +
                           (one_reason ? "" : " (the first of them; the others for other reasons)");
  if (blamed || d->verdict == Verdict::kNoHang) {
    RankSet waiting;
    for (const Group& g : d->groups) {
      if (g.state == RankState::kInCall && g.waiting_for.Intersects(blind)) waiting.Merge(g.ranks);
    }
    d->verdict = Verdict::kUnknown;
    d->culprits.clear();
    d->summary = them +
                 (waiting.Empty() ? std::string()
                                  : ", and " + waiting.Named() + " wait" + (waiting.Count() == 1 ? "s" : "") +
                                        " for " + (one ? "it" : "them")) +
                 ": where " + (one ? "it is" : "they are") + " is unknown (`hangtrace dump` reads " +
                 (one ? "its" : "their") + " stacks)";
    d->evidence = d->summary;
  } else {
    d->notes.push_back(them + ": where " + (one ? "it is" : "they are") + " is unknown");
  }
}

}  // namespace diagnose

Diagnosis Diagnose(const Job& job, const Job* earlier) {
  using namespace diagnose;
  // The stacks' rules when no rank's place comes from a trace: a job
  // nobody traced, or one whose calls hangtrace does not wrap (its traces
  // are silent, its dump's stacks are not).
  bool any_traced_call = false, any_stack_call = false, any_untraced = false, any_traced = false;
  for (const RankView& v : job.ranks) {
    any_traced_call |= v.state == RankState::kInCall && v.basis == Basis::kTrace;
    any_stack_call |= v.state == RankState::kInCall && v.basis == Basis::kStacks;
    any_untraced |= v.from_stacks;
    any_traced |= v.state != RankState::kMissing && !v.from_stacks;
  }
  const Deaths deaths = FindDeaths(job);
  if (!any_traced_call && (any_stack_call || (any_untraced && !any_traced))) {
    Diagnosis d = DiagnoseFromStacks(job, earlier);
    d.ended = JobEnded(job);
    CommonNotes(job, deaths, &d);
    DistrustBlindRanks(job, &d);
    return d;
  }
  Diagnosis d;
  d.world_size = job.world_size;
  d.ended = JobEnded(job);
  for (const RankView& v : job.ranks) {
    if (v.state == RankState::kMissing) d.missing.Add(v.rank);
    else (v.from_stacks ? d.from_stacks : d.with_trace).Add(v.rank);
  }
  if (earlier) {
    d.compared = true;
    d.progressing = FindProgress(job, *earlier);
  }
  Classes classes = Classify(job);
  WaitGraph graph = BuildWaitGraph(job, &classes);
  Components comps = FindComponents(graph, classes.groups);
  d.mismatches = FindMismatches(job);
  BlameContext ctx{job, classes, graph, comps, d.mismatches, deaths, &d.cycles, {}, {}, {}};
  ApplyBlameRules(&ctx);
  d.groups = classes.groups;
  d.cycle_ranks = ctx.cycle_ranks;
  d.verdict = DecideVerdict(job, &d, &ctx);
  d.below = ctx.found.below;
  RankSet unseen = d.unseen;
  // Groups biggest first, then the sentence.
  std::stable_sort(d.groups.begin(), d.groups.end(), [](const Group& a, const Group& b) {
    if (a.ranks.Count() != b.ranks.Count()) return a.ranks.Count() > b.ranks.Count();
    return a.ranks.First() < b.ranks.First();
  });
  d.summary = Summarize(job, d, deaths);
  // Who waits for the culprits, on the line after the verdict.
  if (!d.culprits.empty() && d.verdict != Verdict::kDeadlock) {
    RankSet c;
    for (const Culprit& k : d.culprits) c.Add(k.rank);
    const Group* victims = nullptr;
    size_t in_call = 0;  // less the ranks that ended the job themselves (exited inside their call)
    for (const Group& g : d.groups) {
      if (g.state != RankState::kInCall) continue;
      for (int32_t r : g.ranks.Ranks()) in_call += !deaths.failed_first.Contains(r);
      if (g.ranks.Contains(c.First())) continue;
      bool waits = false;
      for (int32_t r : c.Ranks()) waits |= g.waiting_for.Contains(r);
      if (waits && (!victims || g.ranks.Count() > victims->ranks.Count())) victims = &g;
    }
    if (victims) {
      // An ended job: where its ranks were when it ended (torn down seconds
      // or hours into its hang, or at once after a rank failed).
      const bool one = victims->ranks.Count() == 1;
      const std::string who = one ? "rank " + victims->ranks.ToString() : "ranks " + victims->ranks.Brief();
      const std::string of = std::to_string(in_call) + " of " + std::to_string(job.world_size);
      d.notes.push_back((d.ended ? "when the job ended, " + of + " ranks were in calls; " + who +
                                       (one ? " was waiting in " : " were waiting in ")
                                 : of + " ranks are stuck; " + who + (one ? " waits in " : " wait in ")) +
                        DescribeCall(job, victims->call) + WhereInProgram(job, victims->user_frame));
    }
  }
  for (const RankView& v : job.ranks) {
    if (!v.blind.empty()) unseen.Remove(v.rank);  // said with the reason (DistrustBlindRanks)
  }
  if (!unseen.Empty()) {
    RankSet waiting;
    for (const Group& g : d.groups) {
      if (g.state == RankState::kInCall && g.waiting_for.Intersects(unseen)) waiting.Merge(g.ranks);
    }
    const bool one = unseen.Count() == 1;
    d.notes.push_back(unseen.Named() + (one ? " has" : " have") + " no trace file (never started, or " +
                      (one ? "its" : "their") + " node is gone): not seen" +
                      (waiting.Empty() ? std::string() : "; " + waiting.Named() + " also wait for " + (one ? "it" : "them")));
  }
  CommonNotes(job, deaths, &d);
  DistrustBlindRanks(job, &d);
  return d;
}

}  // namespace hangtrace
