// The rules are described in docs/ANALYSIS.md; each step says why here.
#include "merger/diagnose.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <tuple>

namespace hangtrace {
namespace {

bool IsP2p(const CallPoint& c) { return c.call_flags & fmt::kCallP2p; }
bool IsCollective(const CallPoint& c) { return c.call_flags & fmt::kCallCollective; }

std::string DtypeText(uint8_t d) { return fmt::DtypeName(fmt::Dtype(d)); }

// The ranks a rank in a call waits for (world ranks; missing ones count).
class WaitGraph {
 public:
  explicit WaitGraph(const Job& job) : job_(job) {}

  // Members of `comm` that have not entered collective `seq` on it.
  RankSet Behind(int32_t comm, uint64_t seq) const {
    RankSet out;
    for (int32_t r : job_.Members(comm)) {
      const RankView& v = job_.ranks[size_t(r)];
      if (v.state == RankState::kMissing || v.Entered(comm) < seq) out.Add(r);
    }
    return out;
  }

  RankSet Targets(const RankView& v) const {
    RankSet out;
    if (v.state != RankState::kInCall) return out;
    const CallPoint& c = v.current;
    const std::string& name = job_.names[c.name];
    if (name == "MPI_Finalize") {
      for (const RankView& o : job_.ranks) {
        if (o.rank != v.rank && !(o.state == RankState::kInCall && job_.names[o.current.name] == name) &&
            o.state != RankState::kExited) {
          out.Add(o.rank);
        }
      }
      return out;
    }
    if (IsCollective(c) && c.seq) return Behind(c.comm, c.seq);
    if (IsP2p(c) || c.op == fmt::Op::kProbe) {
      int32_t peer = job_.CommByRank(c.comm, c.peer);
      if (peer >= 0) out.Add(peer);
      return out;
    }
    if (c.op == fmt::Op::kWait) {
      for (const CallPoint& p : v.pending) {
        if (IsCollective(p) && p.seq) out.Merge(Behind(p.comm, p.seq));
        else if (int32_t peer = job_.CommByRank(p.comm, p.peer); peer >= 0) out.Add(peer);
      }
    }
    return out;
  }

 private:
  const Job& job_;
};

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// "passes count 128 to MPI_Allreduce #33 on tp0 where the other members
// pass 256": why an odd rank of a mismatch is a culprit.
std::string MismatchWhy(const Job& job, const Mismatch& m, int32_t rank) {
  std::string value = "?";
  for (const auto& [v, ranks] : m.values) {
    if (ranks.Contains(rank)) value = v;
  }
  CollSig sig;
  std::string call = job.SigOf(rank, m.comm, m.seq, &sig) ? job.names[sig.name] + " " : "";
  return "passes " + m.field + " " + value + " to " + call + "#" + std::to_string(m.seq) + " on " +
         job.comms[size_t(m.comm)].label + " where the other members pass " + m.values[0].first;
}

// " at train_step (pretrain.py:212)": where in a Python program a rank is.
std::string WhereInProgram(const Job& job, int64_t frame) {
  return frame >= 0 ? " at " + job.frames[size_t(frame)].Text() : std::string();
}

}  // namespace

std::string DescribeCall(const Job& job, const CallPoint& c) {
  if (!c.valid) return "no traced call";
  std::string out = job.names[c.name];
  if (c.seq) out += " #" + std::to_string(c.seq);
  if (c.comm >= 0) out += " on " + job.comms[size_t(c.comm)].label;
  if (c.peer >= 0) {
    out += (c.call_flags & fmt::kCallRooted) ? " root " + std::to_string(c.peer) : " peer " + std::to_string(c.peer);
    int32_t world = job.CommByRank(c.comm, c.peer);
    if (world >= 0 && world != c.peer) out += " (rank " + std::to_string(world) + ")";
  }
  if (c.peer == fmt::kAnyPeer) out += " peer ANY";
  if ((c.call_flags & fmt::kCallP2p) && c.tag >= 0) out += " tag " + std::to_string(c.tag);
  if (c.kernel >= 0) out += " kernel " + job.names[size_t(c.kernel)];
  if (c.on_device) out += " [enqueued; the device never finished it]";
  return out;
}

Diagnosis Diagnose(const Job& job, const Job* earlier) {
  Diagnosis d;
  d.world_size = job.world_size;
  for (const RankView& v : job.ranks) {
    if (v.state == RankState::kMissing) d.missing.Add(v.rank);
    else d.with_trace.Add(v.rank);
  }

  // --- progress between two snapshots -------------------------------------
  if (earlier) {
    d.compared = true;
    for (const RankView& v : job.ranks) {
      if (size_t(v.rank) >= earlier->ranks.size()) continue;
      const RankView& e = earlier->ranks[size_t(v.rank)];
      bool moved = false;
      for (const auto& [comm, n] : v.entered) {
        auto it = earlier->comm_index.find(job.comms[size_t(comm)].id);
        if (it != earlier->comm_index.end() && e.Entered(it->second) < n) moved = true;
      }
      if (v.current.valid != e.current.valid || v.current.begin_real_ns != e.current.begin_real_ns) moved = true;
      if (moved) d.progressing.Add(v.rank);
    }
  }

  // --- classes ---------------------------------------------------------------
  // Point-to-point calls also by peer: two ranks receiving from different
  // peers wait for different ranks.
  using Key = std::tuple<int, uint16_t, int32_t, uint64_t, int32_t>;
  std::map<Key, size_t> class_of_key;
  std::vector<int32_t> class_of(size_t(job.world_size), -1);
  for (const RankView& v : job.ranks) {
    Key k = v.state == RankState::kInCall
                ? Key{int(v.state), v.current.name, v.current.comm, v.current.seq,
                      IsCollective(v.current) ? -1 : v.current.peer}
                : Key{int(v.state), uint16_t(0), -1, 0, -1};
    auto [it, inserted] = class_of_key.emplace(k, d.groups.size());
    if (inserted) {
      Group g;
      g.state = v.state;
      g.call = v.state == RankState::kInCall ? v.current : v.previous;
      d.groups.push_back(g);
    }
    Group& g = d.groups[it->second];
    g.ranks.Add(v.rank);
    if (v.state == RankState::kInCall) g.in_call_s = std::max(g.in_call_s, v.current.seconds);
    if (!v.host.empty() && std::find(g.hosts.begin(), g.hosts.end(), v.host) == g.hosts.end() && g.hosts.size() < 8) {
      g.hosts.push_back(v.host);
    }
    class_of[size_t(v.rank)] = int32_t(it->second);
  }

  // Where in the program each class is: its ranks' most common innermost
  // Python frame (Python jobs only).
  for (Group& g : d.groups) {
    std::map<int64_t, size_t> votes;
    for (int32_t r : g.ranks.Ranks()) {
      if (job.ranks[size_t(r)].python_frame >= 0) votes[job.ranks[size_t(r)].python_frame]++;
    }
    size_t best = 0;
    for (const auto& [frame, n] : votes) {
      if (n > best) best = n, g.python_frame = frame;
    }
  }

  // --- the wait-for graph, between classes ------------------------------------
  WaitGraph graph(job);
  std::vector<RankSet> rank_targets(size_t(job.world_size));
  std::vector<std::set<int32_t>> edges(d.groups.size());
  RankSet waited;  // every rank some in-call rank waits for
  // Collective classes share one target set: computed once per class.
  std::vector<bool> done(d.groups.size(), false);
  for (const RankView& v : job.ranks) {
    if (v.state != RankState::kInCall) continue;
    size_t g = size_t(class_of[size_t(v.rank)]);
    RankSet t;
    if (IsCollective(v.current) && v.current.seq) {
      if (done[g]) continue;
      done[g] = true;
      t = graph.Targets(v);
      d.groups[g].waiting_for = t;
    } else {
      t = graph.Targets(v);
      d.groups[g].waiting_for.Merge(t);
      rank_targets[size_t(v.rank)] = t;
    }
    waited.Merge(t);
    for (int32_t r : t.Ranks()) edges[g].insert(class_of[size_t(r)]);
  }

  // Tarjan's strongly connected components over the classes.
  const int n = int(d.groups.size());
  std::vector<int> index(size_t(n), -1), low(size_t(n), 0), comp(size_t(n), -1);
  std::vector<bool> on_stack(size_t(n), false);
  std::vector<int> stack;
  int counter = 0, ncomp = 0;
  std::function<void(int)> strong = [&](int v) {
    index[size_t(v)] = low[size_t(v)] = counter++;
    stack.push_back(v);
    on_stack[size_t(v)] = true;
    for (int w : edges[size_t(v)]) {
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
        comp[size_t(w)] = ncomp;
      }
      ++ncomp;
    }
  };
  for (int v = 0; v < n; ++v) {
    if (index[size_t(v)] < 0) strong(v);
  }
  std::vector<std::vector<int>> members(static_cast<size_t>(ncomp));
  std::vector<bool> sink(size_t(ncomp), true), cyclic(size_t(ncomp), false);
  for (int v = 0; v < n; ++v) members[size_t(comp[size_t(v)])].push_back(v);
  // An edge into ranks without a trace file does not make a component a
  // non-sink: what those ranks did is unknown, and a cycle among the ranks
  // we can see must still be explained (a damaged file must not hide it).
  for (int v = 0; v < n; ++v) {
    for (int w : edges[size_t(v)]) {
      if (comp[size_t(w)] == comp[size_t(v)]) cyclic[size_t(comp[size_t(v)])] = true;  // includes a self-loop
      else if (d.groups[size_t(w)].state != RankState::kMissing) sink[size_t(comp[size_t(v)])] = false;
    }
  }

  // --- mismatches at the same (comm, seq) --------------------------------------
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
        {"datatype", [](const CollSig& s) { return DtypeText(s.dtype); }},
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
      // same sequence number, which run the same code.
      size_t common = 0;
      if (m.values.size() > 1 && m.values[0].second.Count() == m.values[1].second.Count()) {
        std::map<std::string, int> votes;
        for (size_t oc = 0; oc < job.comms.size(); ++oc) {
          if (int32_t(oc) == comm || job.comms[oc].family != c.family) continue;
          // Whichever loader thread read that comm's ranks holds its entry.
          for (const Job::SigTable& table : job.sig_tables) {
            if (oc < table.size() && table[oc].size() >= seq && table[oc][seq - 1].first >= 0) {
              votes[f.value(table[oc][seq - 1].second)]++;
              break;
            }
          }
        }
        int best = -1;
        for (size_t i = 0; i < m.values.size(); ++i) {
          if (votes[m.values[i].first] > best) best = votes[m.values[i].first], common = i;
        }
      }
      for (size_t i = 0; i < m.values.size(); ++i) {
        if (i != common) m.odd.Merge(m.values[i].second);
      }
      if (common != 0) std::swap(m.values[0], m.values[common]);
      d.mismatches.push_back(m);
      break;  // one field per (comm, seq) is enough to name the odd ranks
    }
  }

  // --- culprits ------------------------------------------------------------------
  std::map<int32_t, Culprit> culprits;
  auto blame = [&](int32_t r, const std::string& why) {
    const RankView& v = job.ranks[size_t(r)];
    if (culprits.count(r)) return;
    culprits[r] = Culprit{r, v.host, v.pid, why + WhereInProgram(job, v.python_frame)};
  };
  // Who waits for `r`, for the reasons: the biggest class waiting for it.
  auto waiter_of = [&](int32_t r) -> const Group* {
    const Group* best = nullptr;
    for (const Group& g : d.groups) {
      if (g.state == RankState::kInCall && g.waiting_for.Contains(r) && (!best || g.ranks.Count() > best->ranks.Count())) {
        best = &g;
      }
    }
    return best;
  };
  auto never_entered = [&](int32_t r) {
    const Group* w = waiter_of(r);
    if (!w) return std::string("is waited for");
    CallPoint call = w->call;
    call.on_device = false;  // what it never entered is the call itself
    return "never entered " + DescribeCall(job, call);
  };
  bool deadlock = false, mismatch_hang = false, crash = false, stuck_complete = false, missing_blamed = false;
  for (int s = 0; s < ncomp; ++s) {
    if (!sink[size_t(s)]) continue;
    bool has_waiter = false;
    for (int g : members[size_t(s)]) has_waiter |= d.groups[size_t(g)].state == RankState::kInCall;
    if (!cyclic[size_t(s)]) {
      int g = members[size_t(s)][0];
      const Group& k = d.groups[size_t(g)];
      if (k.state != RankState::kInCall) {
        // Ranks that wait for nobody, but are waited for.
        for (int32_t r : k.ranks.Ranks()) {
          if (!waited.Contains(r)) continue;
          const RankView& v = job.ranks[size_t(r)];
          std::string why;
          switch (v.state) {
            case RankState::kMissing: why = "has no trace file (never started, or its node is gone); " + never_entered(r); break;
            case RankState::kCrashed: why = "crashed with " + SignalName(v.signal) + "; " + never_entered(r); crash = true; break;
            case RankState::kGone: why = "died without an exit record (killed?); " + never_entered(r); crash = true; break;
            case RankState::kExited: why = "exited with code " + std::to_string(v.exit_code) + "; " + never_entered(r); break;
            case RankState::kStopped:
              why = "is stopped: its runtime has been silent for " + std::to_string(int(v.silent_s)) +
                    " s while the others' kept beating (SIGSTOP, or wedged)" +
                    (v.current.valid ? " inside " + DescribeCall(job, v.current) : std::string()) + "; " + never_entered(r);
              break;
            default:
              why = never_entered(r) + "; not in any traced call" +
                    (v.previous.valid ? " since " + DescribeCall(job, v.previous) + " returned" : std::string());
          }
          if (v.state == RankState::kMissing) missing_blamed = true;
          blame(r, why);
        }
      } else if (!IsCollective(k.call) && !IsP2p(k.call) && k.call.op != fmt::Op::kWait &&
                 k.call.op != fmt::Op::kProbe && k.call.op != fmt::Op::kCommMgmt) {
        // Waited for, and inside something that waits for no rank: a kernel
        // its device never finished, or a host call that does not return.
        for (int32_t r : k.ranks.Ranks()) {
          if (!waited.Contains(r)) continue;
          const RankView& v = job.ranks[size_t(r)];
          CallPoint call = v.current;
          call.on_device = false;
          blame(r, never_entered(r) + (v.current.on_device ? "; its device never finished " : "; blocked in ") +
                       DescribeCall(job, call) + ", which waits for no rank");
        }
      } else if (has_waiter) {
        // Everyone it waits for is in the call with it, yet it did not
        // complete: a mismatch, or below MPI (network, device, library).
        bool explained = false;
        for (const Mismatch& m : d.mismatches) {
          if (m.comm == k.call.comm && m.seq == k.call.seq) {
            for (int32_t r : m.odd.Ranks()) {
              blame(r, MismatchWhy(job, m, r));
            }
            explained = mismatch_hang = true;
          }
        }
        // A member that entered and then stopped (SIGSTOP inside the call).
        if (!explained) {
          for (int32_t r : job.Members(k.call.comm)) {
            if (job.ranks[size_t(r)].state != RankState::kStopped) continue;
            const RankView& v = job.ranks[size_t(r)];
            blame(r, "is stopped inside " + DescribeCall(job, v.current) + ": its runtime has been silent for " +
                         std::to_string(int(v.silent_s)) + " s while the others' kept beating (SIGSTOP, or wedged)");
            explained = true;
          }
        }
        if (!explained) stuck_complete = true;
      }
      continue;
    }
    // A cycle. Only point-to-point waits: a deadlock.
    bool all_p2p = true;
    for (int g : members[size_t(s)]) {
      const Group& k = d.groups[size_t(g)];
      all_p2p &= k.state == RankState::kInCall && !IsCollective(k.call);
    }
    RankSet in_scc;
    for (int g : members[size_t(s)]) in_scc.Merge(d.groups[size_t(g)].ranks);
    if (all_p2p) {
      deadlock = true;
      // Walk rank edges from the lowest rank until one repeats.
      std::vector<int32_t> path;
      std::map<int32_t, size_t> at;
      int32_t r = in_scc.First();
      while (r >= 0 && !at.count(r)) {
        at[r] = path.size();
        path.push_back(r);
        const RankSet& t = rank_targets[size_t(r)];
        int32_t next = -1;
        for (int32_t x : t.Ranks()) {
          if (in_scc.Contains(x)) {
            next = x;
            break;
          }
        }
        r = next;
      }
      std::vector<std::string> cycle;
      for (size_t i = r >= 0 ? at[r] : 0; i < path.size(); ++i) {
        const RankView& v = job.ranks[size_t(path[i])];
        int32_t to = path[(i + 1 < path.size()) ? i + 1 : (r >= 0 ? at[r] : 0)];
        std::string what = v.current.op == fmt::Op::kRecv ? "recv from " : v.current.op == fmt::Op::kSend ? "send to " : "waits for ";
        std::string step = std::to_string(v.rank) + " " + what + std::to_string(to) +
                           (v.current.comm >= 0 ? " on " + job.comms[size_t(v.current.comm)].label : "") + " (" +
                           job.names[v.current.name] + ")";
        cycle.push_back(step);
        blame(v.rank, "in a cycle of point-to-point waits: " + DescribeCall(job, v.current) + " waits for rank " +
                          std::to_string(to) + ", which waits too");
      }
      d.cycles.push_back(cycle);
      continue;
    }
    // Collectives in a cycle: ranks disagree on the order of collectives
    // (the seed's hang: a root skipped a broadcast and went on). Weigh the
    // evidence against each rank of the cycle.
    std::map<int32_t, int> score;
    for (int g : members[size_t(s)]) {
      const Group& k = d.groups[size_t(g)];
      if (k.state != RankState::kInCall) continue;
      // 1. The call its class-mates came from: a rank that arrived from
      //    another call took another path.
      std::map<std::pair<uint16_t, std::string>, int> prev;
      for (int32_t r : k.ranks.Ranks()) {
        const CallPoint& p = job.ranks[size_t(r)].previous;
        prev[{p.name, p.comm >= 0 ? job.comms[size_t(p.comm)].family : ""}]++;
      }
      auto majority = std::max_element(prev.begin(), prev.end(), [](auto& a, auto& b) { return a.second < b.second; });
      if (prev.size() > 1 && majority->second * 2 > int(k.ranks.Count())) {
        for (int32_t r : k.ranks.Ranks()) {
          const CallPoint& p = job.ranks[size_t(r)].previous;
          if (std::pair<uint16_t, std::string>{p.name, p.comm >= 0 ? job.comms[size_t(p.comm)].family : ""} != majority->first) {
            score[r] += 2;
          }
        }
      }
      if (!IsCollective(k.call)) continue;
      // 2. A rooted collective cannot finish without its root.
      if ((k.call.call_flags & fmt::kCallRooted)) {
        int32_t root = job.CommByRank(k.call.comm, k.call.peer);
        // Only a root that never entered it: one that did its part (an
        // eager broadcast send) and went on is not what the call waits for.
        if (root >= 0 && !k.ranks.Contains(root) && in_scc.Contains(root) &&
            job.ranks[size_t(root)].Entered(k.call.comm) < k.call.seq) {
          score[root] += 2;
        }
      }
      // 3. The few members missing from a call most members are in.
      RankSet behind = k.waiting_for;
      if (behind.Count() < k.ranks.Count()) {
        for (int32_t r : behind.Ranks()) {
          if (in_scc.Contains(r)) score[r] += 1;
        }
      }
    }
    int best = 0;
    for (const auto& [r, sc] : score) best = std::max(best, sc);
    for (const auto& [r, sc] : score) {
      if (sc != best || best == 0) continue;
      const RankView& v = job.ranks[size_t(r)];
      blame(r, never_entered(r) + "; now in " + DescribeCall(job, v.current));
    }
  }
  for (auto& [r, c] : culprits) d.culprits.push_back(c);

  // --- verdict -----------------------------------------------------------------
  size_t in_call = 0;
  RankSet stuck;
  for (const Group& g : d.groups) {
    if (g.state == RankState::kInCall) {
      in_call += g.ranks.Count();
      stuck.Merge(g.ranks);
    }
  }
  bool all_moving = d.compared && in_call > 0 && [&] {
    for (int32_t r : stuck.Ranks()) {
      if (!d.progressing.Contains(r)) return false;
    }
    return true;
  }();
  bool any_crash = false;
  for (const RankView& v : job.ranks) any_crash |= v.state == RankState::kCrashed || v.state == RankState::kGone;
  // A culprit that is also an odd rank of a mismatch: the mismatch explains
  // it (an MPI library may abort on it, leaving artificial cycles behind).
  RankSet odd;
  for (const Mismatch& m : d.mismatches) odd.Merge(m.odd);
  bool culprit_is_odd = false;
  for (const Culprit& c : d.culprits) culprit_is_odd |= odd.Contains(c.rank);
  auto blame_odd_only = [&] {
    culprits.clear();
    for (const Mismatch& m : d.mismatches) {
      for (int32_t r : m.odd.Ranks()) blame(r, MismatchWhy(job, m, r));
    }
    d.culprits.clear();
    for (auto& [r, c] : culprits) d.culprits.push_back(c);
  };
  if ((in_call == 0 || all_moving) && !d.mismatches.empty()) {
    // The job ran on, but its ranks disagreed on a collective's arguments:
    // its results are wrong even though nothing hangs.
    d.verdict = "mismatch";
    blame_odd_only();
  } else if (in_call == 0 || all_moving) {
    d.verdict = any_crash ? "crash" : "no-hang";
  } else if (culprit_is_odd || (mismatch_hang && !crash)) {
    d.verdict = "mismatch";
    blame_odd_only();
  } else if (crash || (any_crash && d.culprits.empty()) ||
             (missing_blamed && [&] {
               for (const Culprit& c : d.culprits) {
                 if (job.ranks[size_t(c.rank)].state != RankState::kMissing) return false;
               }
               return true;  // only ranks without a file explain the hang
             }())) {
    d.verdict = "crash";
  } else if (deadlock) {
    d.verdict = "deadlock";
  } else if (!d.mismatches.empty() && d.culprits.empty()) {
    d.verdict = "mismatch";
    blame_odd_only();
  } else {
    d.verdict = "hang";
  }

  // --- groups, biggest first; the summary ---------------------------------------
  std::stable_sort(d.groups.begin(), d.groups.end(), [](const Group& a, const Group& b) {
    if (a.ranks.Count() != b.ranks.Count()) return a.ranks.Count() > b.ranks.Count();
    return a.ranks.First() < b.ranks.First();
  });
  if (d.verdict == "mismatch" && in_call == 0) {
    d.summary = "no rank is stuck, but ranks disagreed on a collective's arguments, so results are wrong: " +
                std::string(d.culprits.empty() ? "" : "rank " + std::to_string(d.culprits[0].rank) + " " + d.culprits[0].why);
  } else if (d.verdict == "no-hang") {
    if (all_moving) {
      d.summary = "ranks " + d.progressing.Brief() + " moved on between the two snapshots: slow, not hung";
    } else {
      d.summary = "no rank is inside a traced call";
      size_t exited = 0;
      for (const RankView& v : job.ranks) exited += v.state == RankState::kExited;
      if (exited == size_t(job.world_size)) d.summary = "every rank exited";
    }
  } else if (!d.culprits.empty()) {
    RankSet c;
    for (const Culprit& k : d.culprits) c.Add(k.rank);
    std::string who = (c.Count() == 1 ? "rank " : "ranks ") + c.Brief();
    // The biggest class that waits for a culprit: the victims to name.
    const Group* victims = nullptr;
    for (const Group& g : d.groups) {
      if (g.state != RankState::kInCall || g.ranks.Contains(c.First())) continue;
      bool waits = false;
      for (int32_t r : c.Ranks()) waits |= g.waiting_for.Contains(r);
      if (waits && (!victims || g.ranks.Count() > victims->ranks.Count())) victims = &g;
    }
    if (d.verdict == "deadlock") {
      d.summary = who + " deadlock in point-to-point calls, each waiting for the next";
    } else if (victims) {
      d.summary = std::to_string(in_call) + " of " + std::to_string(job.world_size) + " ranks are stuck; " +
                  (victims->ranks.Count() == 1 ? "rank " + victims->ranks.ToString() + " waits in "
                                               : "ranks " + victims->ranks.Brief() + " wait in ") +
                  DescribeCall(job, victims->call) + WhereInProgram(job, victims->python_frame) + "; " + who + " " +
                  d.culprits.front().why;
    } else {
      d.summary = who + " " + d.culprits.front().why;
    }
  } else if (stuck_complete) {
    const Group& g = d.groups.front();
    d.summary = "ranks " + g.ranks.Brief() + " are all in " + DescribeCall(job, g.call) +
                " and it does not complete: below MPI (network, device or library), not a rank";
  } else {
    d.summary = std::to_string(in_call) + " ranks are in traced calls; no rank is waited for";
  }
  return d;
}

}  // namespace hangtrace
