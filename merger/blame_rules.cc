// The blame rules: each explains one kind of component of the wait-for
// graph (a sink: a set of classes that waits for nothing outside itself) and
// names its culprits. ApplyBlameRules (diagnose.cc) gives each sink to the
// first rule that applies. docs/ANALYSIS.md describes them in this order.
#include <algorithm>
#include <map>

#include "merger/diagnose_stages.h"

namespace hangtrace::diagnose {
namespace {

// Where a rank is, said in the tense of its process: "now in" while it
// runs; "when it ended, in" once it has (a job looked at after it was torn
// down).
std::string NowIn(const RankView& v) { return v.ending == Ending::kRunning ? "now in " : "when it ended, in "; }

// What shows a rank stopped: its process state (T, read from /proc or the
// dump), else its runtime's heartbeat silent while the others' beat.
std::string WhyStopped(const RankView& v) {
  if (v.liveness == Liveness::kStopped || v.dump_state == "T" || v.dump_state == "t") {
    return " (process state T: SIGSTOP, or a debugger)";
  }
  return ": its runtime has been silent for " + std::to_string(int(v.silent_s)) +
         " s while the others' kept beating (SIGSTOP, or wedged)";
}


bool InCall(const Group& g) { return g.state == RankState::kInCall; }

// A call that waits for no other rank: a kernel its device never finished,
// or a host call (a stream sync, a user region) that does not return.
bool WaitsForNoRank(const CallPoint& c) {
  return !IsCollective(c) && !IsP2p(c) && c.op != fmt::Op::kWait && c.op != fmt::Op::kProbe &&
         c.op != fmt::Op::kCommMgmt;
}

const Group& OnlyClass(const BlameContext& ctx, int comp) {
  return ctx.classes.groups[size_t(ctx.comps.members[size_t(comp)][0])];
}

// " at 14:03:07.512" and how it ended, for a rank that died without an exit
// record.
std::string HowItEnded(const RankView& v) {
  if (v.term_signal) return "was ended by SIGTERM from " + v.term_sender + " at " + ClockTime(v.end_real_ns);
  return "died without an exit record (killed: SIGKILL, or the OOM killer?) at " + ClockTime(v.end_real_ns);
}

// --- died first ------------------------------------------------------------------------------------
// The rank whose process died, without an exit record, clearly before any
// other (FindDeaths): whatever the others were doing after is its doing.

bool DiedFirstApplies(const BlameContext& ctx, int comp) {
  if (ctx.deaths.first < 0) return false;
  for (int g : ctx.comps.members[size_t(comp)]) {
    if (ctx.classes.groups[size_t(g)].ranks.Contains(ctx.deaths.first)) return true;
  }
  return false;
}

void DiedFirstBlame(BlameContext& ctx, int) {
  const int32_t r = ctx.deaths.first;
  const RankView& v = ctx.job.ranks[size_t(r)];
  std::string where = v.state == RankState::kInCall ? " inside " + DescribeCall(ctx.job, v.current)
                      : ctx.graph.waited.Contains(r) ? "; " + ctx.NeverEntered(r)
                                                     : std::string();
  ctx.Blame(r, "died first, without an exit record (killed: SIGKILL, or the OOM killer?), at " +
                   ClockTime(v.end_real_ns) + where);
  ctx.found.crash = true;
}

// --- finished ----------------------------------------------------------------------------------------
// Ranks in MPI_Finalize that others wait for in a point-to-point call:
// finishing is not waiting. The finished rank never sent (or never
// received) what its peer waits for: it is the culprit, and the waiter is
// not (it is in no cycle with a rank that has finished).

std::string WildcardRace(const Job& job, const RankView& v);  // below, with the point-to-point rules
std::string MessageMismatch(const Job& job, const RankView& v, int32_t* sender);  // below

bool FinishedApplies(const BlameContext& ctx, int comp) {
  const Group& k = OnlyClass(ctx, comp);
  if (ctx.comps.cyclic[size_t(comp)] || !InCall(k) || !(k.call.call_flags & fmt::kCallFinalize)) return false;
  return k.ranks.Intersects(ctx.graph.waited);
}

void FinishedBlame(BlameContext& ctx, int comp) {
  for (int32_t r : OnlyClass(ctx, comp).ranks.Ranks()) {
    if (!ctx.graph.waited.Contains(r)) continue;
    std::string why;
    for (const RankView& w : ctx.job.ranks) {
      if (w.state != RankState::kInCall || size_t(w.rank) >= ctx.graph.rank_targets.size() ||
          !ctx.graph.rank_targets[size_t(w.rank)].Contains(r)) {
        continue;
      }
      const std::string waiter = "rank " + std::to_string(w.rank);
      // What it owes: the waiter's call, or the request of its wait that is
      // this rank's to match.
      const CallPoint* waited = WaitsOn(ctx.job, w, r);
      const CallPoint* owed = waited ? waited : &w.current;
      const std::string call =
          DescribeCall(ctx.job, *owed) + (owed == &w.current ? "" : " (in " + DescribeCall(ctx.job, w.current) + ")");
      // A message it sent that the waiter's receive does not match (another
      // tag, communicator or source): it did send, and went on; the two
      // disagree, and nothing says which strayed: both are named.
      int32_t sender = -1;
      if (const std::string mismatch = MessageMismatch(ctx.job, w, &sender); !mismatch.empty() && sender == r) {
        why = mismatch + "; then rank " + std::to_string(r) + " finished (in MPI_Finalize)";
        ctx.Blame(w.rank, why);
        break;
      }
      why = IsCollective(*owed) ? "finished (in MPI_Finalize) without entering what " + waiter + " waits in: " + call
            : owed->op == fmt::Op::kSend ? "finished (in MPI_Finalize) without receiving what " + waiter +
                                               " sends it: " + call
            : owed->op == fmt::Op::kRecv || owed->op == fmt::Op::kProbe
                ? "finished (in MPI_Finalize) without sending what " + waiter + " waits for: " + call +
                      WildcardRace(ctx.job, w)
                : "finished (in MPI_Finalize) while " + waiter + " waits for it in " + call;
      break;
    }
    if (why.empty()) why = "finished (in MPI_Finalize) while others wait for it; " + ctx.NeverEntered(r);
    ctx.Blame(r, why);
  }
}

// --- waits for nobody ----------------------------------------------------------------------------
// A class of ranks outside any call (missing, crashed, gone, exited, stopped,
// computing) that others wait for: each waited-for rank is a culprit, with
// the reason its state gives.

bool WaitsForNobodyApplies(const BlameContext& ctx, int comp) {
  return !ctx.comps.cyclic[size_t(comp)] && !InCall(OnlyClass(ctx, comp));
}

void WaitsForNobodyBlame(BlameContext& ctx, int comp) {
  for (int32_t r : OnlyClass(ctx, comp).ranks.Ranks()) {
    if (!ctx.graph.waited.Contains(r)) continue;
    const RankView& v = ctx.job.ranks[size_t(r)];
    std::string why;
    switch (v.state) {
      case RankState::kMissing:
        why = (v.blind.empty() ? "has no trace file (never started, or its node is gone); "
                               : "is " + v.blind + "; ") +
              ctx.NeverEntered(r);
        ctx.found.missing_blamed = true;
        break;
      case RankState::kCrashed:
        why = "crashed with " + SignalName(v.signal) +
              (v.current.valid ? " inside " + DescribeCall(ctx.job, v.current) : std::string()) + "; " +
              ctx.NeverEntered(r);
        ctx.found.crash = true;
        break;
      case RankState::kGone:
        why = HowItEnded(v) + "; " + ctx.NeverEntered(r);
        ctx.found.crash = true;
        break;
      case RankState::kExited: {
        // Exited with the others when the job was torn down (a killed
        // launcher): it was outside any call before, and that is the story.
        int64_t first_exit = INT64_MAX;
        for (int32_t e : ctx.deaths.exited.Ranks()) first_exit = std::min(first_exit, ctx.job.ranks[size_t(e)].end_real_ns);
        const bool with_others = !ctx.deaths.exited.Empty() && v.end_real_ns >= first_exit - 1000000000 &&
                                 v.end_real_ns <= ctx.deaths.last_ns + 1000000000;
        char for_s[32] = "";
        if (v.OutsideSince() && v.end_real_ns > v.OutsideSince()) {
          snprintf(for_s, sizeof(for_s), " for %.1f s", double(v.end_real_ns - v.OutsideSince()) / 1e9);
        }
        why = with_others ? ctx.NeverEntered(r) + "; not in any traced call" + for_s +
                                (v.previous.valid ? " since " + DescribeCall(ctx.job, v.previous) + " returned" : "") +
                                ", then exited with the others when the job was torn down (status " +
                                std::to_string(v.exit_code & 0xff) + ")"
                          : "exited with status " + std::to_string(v.exit_code & 0xff) + "; " + ctx.NeverEntered(r);
        // A failure status of its own, before the others ended (an MPI
        // error under MPI_ERRORS_ARE_FATAL, exit(1)): the job crashed
        // there; nothing hung by itself. Status 0 (a rank that finished
        // early) leaves the others hung.
        if (!with_others && v.exit_code != 0) ctx.found.crash = true;
        break;
      }
      case RankState::kStopped:
        why = (v.from_stacks ? std::string("is stopped (state T when dumped, untraced)") : "is stopped" + WhyStopped(v)) +
              (v.current.valid ? " inside " + DescribeCall(ctx.job, v.current) : std::string()) + "; " +
              ctx.NeverEntered(r);
        break;
      default: {
        char for_s[32] = "";
        if (v.OutsideSince() && v.end_real_ns > v.OutsideSince()) {
          snprintf(for_s, sizeof(for_s), " for %.1f s", double(v.end_real_ns - v.OutsideSince()) / 1e9);
        }
        why = ctx.NeverEntered(r) + "; not in any traced call" + for_s +
              (v.previous.valid ? " since " + DescribeCall(ctx.job, v.previous) + " returned" : std::string()) +
              (v.side_call.valid ? " (another thread of it is in " + DescribeCall(ctx.job, v.side_call) +
                                       ", begun under a second ago: its calls keep completing)"
                                 : std::string()) +
              (v.idle_frame >= 0 ? ", " + NowIn(v) + Shortened(ctx.job.frames[size_t(v.idle_frame)].Text())
               : v.stacks.empty() ? std::string(" (no stacks say whether it computes or waits in a call hangtrace "
                                                "does not trace: hangtrace dump reads them)")
                                  : std::string());
      }
    }
    ctx.Blame(r, why);
  }
}

// --- a call hangtrace does not trace --------------------------------------------------------------
// Waited for, and blocked in a call its stacks show but its trace does not
// (a collective torch issues from C++, as DDP's gradient all-reduce; an MPI
// call hangtrace does not wrap): whom that call waits for is not known, so
// the chain ends here, and says so.

bool UntracedCallApplies(const BlameContext& ctx, int comp) {
  const Group& k = OnlyClass(ctx, comp);
  return !ctx.comps.cyclic[size_t(comp)] && InCall(k) && k.call.from_stacks;
}

void UntracedCallBlame(BlameContext& ctx, int comp) {
  for (int32_t r : OnlyClass(ctx, comp).ranks.Ranks()) {
    if (!ctx.graph.waited.Contains(r)) continue;
    // In a collective in place of the traced one the others wait in: a
    // mismatch, whose odd side the verdict names; never "never entered".
    const bool in_mismatch = std::any_of(ctx.mismatches.begin(), ctx.mismatches.end(),
                                         [&](const Mismatch& m) { return m.untraced.Contains(r); });
    if (in_mismatch) {
      ctx.found.mismatch_hang = true;
      continue;
    }
    const RankView& v = ctx.job.ranks[size_t(r)];
    ctx.Blame(r, ctx.NeverEntered(r) + "; blocked in " + ctx.job.names[v.current.name] +
                     " (seen on its stacks; a call hangtrace does not trace, so whom it waits for is not known)");
  }
}

// --- a call that waits for no rank ---------------------------------------------------------------
// Waited for, and inside something that waits for no rank: a kernel its
// device never finished, or a host call that does not return.

bool NoRankCallApplies(const BlameContext& ctx, int comp) {
  const Group& k = OnlyClass(ctx, comp);
  return !ctx.comps.cyclic[size_t(comp)] && InCall(k) && WaitsForNoRank(k.call);
}

void NoRankCallBlame(BlameContext& ctx, int comp) {
  for (int32_t r : OnlyClass(ctx, comp).ranks.Ranks()) {
    if (!ctx.graph.waited.Contains(r)) continue;
    const RankView& v = ctx.job.ranks[size_t(r)];
    CallPoint call = v.current;
    call.on_device = false;
    ctx.Blame(r, ctx.NeverEntered(r) + (v.current.on_device ? "; its device never finished " : "; blocked in ") +
                     DescribeCall(ctx.job, call) + ", which waits for no rank");
  }
}

// --- polls for nobody ---------------------------------------------------------------------------
// Waited for, and polling in a loop (MPI_Iprobe, MPI_Test: calls that
// return at once, recorded as one wait while they find nothing) for no rank
// it names: a server loop probing MPI_ANY_SOURCE. It runs, and never
// entered what the others wait for in: the culprit, not a call stuck below
// MPI.

bool IsPoll(const CallPoint& c) {
  return c.valid && !c.from_stacks && !(c.call_flags & fmt::kCallBlocking) &&
         (c.op == fmt::Op::kProbe || c.op == fmt::Op::kWait);
}

bool PollsForNobodyApplies(const BlameContext& ctx, int comp) {
  const Group& k = OnlyClass(ctx, comp);
  if (ctx.comps.cyclic[size_t(comp)] || !InCall(k) || !IsPoll(k.call)) return false;
  return k.ranks.Intersects(ctx.graph.waited);
}

void PollsForNobodyBlame(BlameContext& ctx, int comp) {
  for (int32_t r : OnlyClass(ctx, comp).ranks.Ranks()) {
    if (!ctx.graph.waited.Contains(r)) continue;
    const RankView& v = ctx.job.ranks[size_t(r)];
    ctx.Blame(r, ctx.NeverEntered(r) + "; polling " + DescribeCall(ctx.job, v.current) +
                     " in a loop (calls that return at once), for no rank it names");
  }
}

// --- everyone entered ----------------------------------------------------------------------------
// Every rank the class waits for is in the call with it, yet it does not
// complete: the members disagree on its arguments (the odd ones are the
// culprits), a member stopped inside it, or it is stuck below MPI.

bool EveryoneEnteredApplies(const BlameContext& ctx, int comp) {
  if (ctx.comps.cyclic[size_t(comp)]) return false;
  bool has_waiter = false;
  for (int g : ctx.comps.members[size_t(comp)]) has_waiter |= InCall(ctx.classes.groups[size_t(g)]);
  return has_waiter;
}

void EveryoneEnteredBlame(BlameContext& ctx, int comp) {
  const Group& k = OnlyClass(ctx, comp);
  // Its communicator is not recorded: it waits for nobody the trace can
  // name, which says nothing of whether the others entered.
  if (k.call.comm < 0 && (IsCollective(k.call) || IsP2p(k.call))) {
    ctx.found.comm_unknown.Merge(k.ranks);
    return;
  }
  bool explained = false;
  for (const Mismatch& m : ctx.mismatches) {
    if (m.comm == k.call.comm && m.seq == k.call.seq) {
      for (int32_t r : m.odd.Ranks()) ctx.Blame(r, MismatchWhy(ctx.job, m, r));
      explained = ctx.found.mismatch_hang = true;
    }
  }
  // A member that crashed (a fatal signal, recorded) inside this very call:
  // the others entered it and wait for its part.
  if (!explained) {
    for (int32_t r : ctx.job.Members(k.call.comm)) {
      const RankView& v = ctx.job.ranks[size_t(r)];
      if (v.state != RankState::kCrashed || !v.current.valid || v.current.comm != k.call.comm ||
          v.current.seq != k.call.seq) {
        continue;
      }
      ctx.Blame(r, "crashed with " + SignalName(v.signal) + " inside " + DescribeCall(ctx.job, v.current));
      explained = ctx.found.crash = true;
    }
  }
  // A member killed inside the call (no exit record, no SIGTERM) while the
  // others lived on: still waiting, or ended later by their launcher. Of
  // several killed there, the first to go silent (a launcher's SIGKILL can
  // overtake its own SIGTERM on a loaded node: the later ones are that).
  if (!explained && ctx.deaths.killed.Count() < size_t(ctx.job.world_size)) {
    int64_t first = INT64_MAX;
    for (int32_t r : k.ranks.Ranks()) {
      if (ctx.deaths.killed.Contains(r)) first = std::min(first, ctx.job.ranks[size_t(r)].end_real_ns);
    }
    for (int32_t r : k.ranks.Ranks()) {
      const RankView& v = ctx.job.ranks[size_t(r)];
      if (!ctx.deaths.killed.Contains(r) || v.end_real_ns > first + 200000000) continue;
      ctx.Blame(r, HowItEnded(v) + " inside " + DescribeCall(ctx.job, v.current));
      explained = ctx.found.crash = true;
    }
  }
  // MPI_Init completes when every process of the job has started it (the
  // launcher's exchange of addresses): its members are the whole job,
  // though its record names no communicator.
  const std::string& name = ctx.job.names[k.call.name];
  const bool init = k.call.comm < 0 && name.rfind("MPI_Init", 0) == 0;
  std::vector<int32_t> members = ctx.job.Members(k.call.comm);
  if (init) {
    members.clear();
    for (const RankView& v : ctx.job.ranks) members.push_back(v.rank);
  }
  // A member that stopped (SIGSTOP inside the call, or, for MPI_Init,
  // anywhere: it may have been let through first).
  if (!explained) {
    for (int32_t r : members) {
      const RankView& v = ctx.job.ranks[size_t(r)];
      if (v.state != RankState::kStopped) continue;
      ctx.Blame(r, std::string("is stopped") + (v.current.valid ? " inside " + DescribeCall(ctx.job, v.current) : "") +
                       WhyStopped(v));
      explained = true;
    }
  }
  // Below MPI only when every member is in the call: a member elsewhere
  // (absent, computing, gone) may be what it waits for. A member that has
  // returned from this very collective (its count on the communicator is
  // past it) says the call completes: in a job read mid-call, ranks still
  // in it are on their way out.
  bool all_in = !members.empty();
  RankSet returned;
  for (int32_t r : members) {
    all_in &= k.ranks.Contains(r);
    const RankView& v = ctx.job.ranks[size_t(r)];
    if (!k.ranks.Contains(r) && IsCollective(k.call) && k.call.seq && v.state != RankState::kMissing &&
        v.Entered(k.call.comm) >= k.call.seq) {
      returned.Add(r);
    }
  }
  if (!explained && !returned.Empty()) {
    if (ctx.found.completing.Empty()) {
      ctx.found.completing_call = DescribeCall(ctx.job, k.call) + ", which " + returned.Named() +
                                  (returned.Count() == 1 ? " has" : " have") + " already returned from";
    }
    ctx.found.completing.Merge(k.ranks);
    return;
  }
  if (!explained && (all_in || !init)) ctx.found.below = true;
}

// --- a cycle through a file lock -------------------------------------------------------------------
// A rank holds a file lock (fcntl, flock) that others wait for, seen on
// their stacks with its holder (the dump reads /proc/locks), while it waits
// for them in a call: a deadlock whose culprit is the holder.

bool LockCycleApplies(const BlameContext& ctx, int comp) {
  if (!ctx.comps.cyclic[size_t(comp)]) return false;
  for (int g : ctx.comps.members[size_t(comp)]) {
    const Group& k = ctx.classes.groups[size_t(g)];
    if (InCall(k) && k.call.from_stacks && k.call.lock_holder >= 0) return true;
  }
  return false;
}

void LockCycleBlame(BlameContext& ctx, int comp) {
  ctx.found.deadlock = true;
  RankSet in_scc;
  for (int g : ctx.comps.members[size_t(comp)]) in_scc.Merge(ctx.classes.groups[size_t(g)].ranks);
  std::map<int32_t, RankSet> waiters;
  for (int32_t r : in_scc.Ranks()) {
    const RankView& v = ctx.job.ranks[size_t(r)];
    if (v.state == RankState::kInCall && v.current.lock_holder >= 0 && in_scc.Contains(v.current.lock_holder)) {
      waiters[v.current.lock_holder].Add(r);
    }
  }
  std::vector<std::string> cycle;
  std::vector<int32_t> ranks;
  for (const auto& [holder, who] : waiters) {
    const RankView& h = ctx.job.ranks[size_t(holder)];
    std::string file;
    for (int32_t w : who.Ranks()) {
      for (const ThreadStack& t : ctx.job.ranks[size_t(w)].stacks) {
        if (file.empty() && !t.lock_file.empty()) file = t.lock_file;
      }
    }
    ctx.Blame(holder, "holds the file lock" + (file.empty() ? std::string() : " on " + file) + " that " + who.Named() +
                          (who.Count() == 1 ? " waits" : " wait") + " for, while it waits for " +
                          (who.Count() == 1 ? "it" : "them") + " in " + DescribeCall(ctx.job, h.current));
    cycle.push_back(std::to_string(holder) + " waits in " + ctx.job.names[h.current.name]);
    cycle.push_back(who.Brief() + " wait for " + std::to_string(holder) + "'s file lock");
    ranks.push_back(holder);
    for (int32_t w : who.Ranks()) ranks.push_back(w);
  }
  ctx.cycles->push_back(cycle);
  ctx.cycle_ranks.push_back(ranks);
}

// --- a cycle of point-to-point waits --------------------------------------------------------------
// Every class of the cycle waits in a point-to-point call (or a completion
// of one): a deadlock. The cycle is walked rank by rank from the lowest.
// Unless a receive of the cycle waits for a message that was sent with
// another tag, on another communicator or by another rank: then the sender
// waits for a receive that does not match it (a synchronous or rendezvous
// send), and the two disagree on the envelope; both are named, no deadlock.


// --- a cycle of receives ------------------------------------------------------------------------
// Every rank of a cycle waits for messages, and for all of them (a blocking
// receive or probe, or Wait/Waitall/Testall on receives): each needs a
// message from the next, which cannot send while it waits. A deadlock even
// when some of them also wait for ranks outside the cycle (that rank 2 never
// sent what rank 0 also waits for releases neither). A send can complete
// alone (eager) and an OR wait by another request: such cycles are judged
// only as sinks (p2p-cycle).

bool WaitsForMessagesOnly(const Job& job, const RankView& v) {
  if (v.state != RankState::kInCall || v.current.from_stacks) return false;
  const CallPoint& c = v.current;
  if (c.op == fmt::Op::kRecv || c.op == fmt::Op::kProbe) return c.recv_peer == fmt::kNoPeer && c.peer >= 0;
  if (c.op != fmt::Op::kWait || CompletesAnyOf(job, c) || v.pending.empty()) return false;
  for (const CallPoint& p : v.pending) {
    if (p.op != fmt::Op::kRecv || p.peer < 0) return false;
  }
  return true;
}

bool ReceiveCycleApplies(const BlameContext& ctx, int comp) {
  if (!ctx.comps.cyclic[size_t(comp)]) return false;
  for (int g : ctx.comps.members[size_t(comp)]) {
    for (int32_t r : ctx.classes.groups[size_t(g)].ranks.Ranks()) {
      if (!WaitsForMessagesOnly(ctx.job, ctx.job.ranks[size_t(r)])) return false;
    }
  }
  return true;
}

void P2pCycleBlame(BlameContext& ctx, int comp);  // below: the same cycle, walked and named

bool P2pCycleApplies(const BlameContext& ctx, int comp) {
  if (!ctx.comps.cyclic[size_t(comp)]) return false;
  for (int g : ctx.comps.members[size_t(comp)]) {
    const Group& k = ctx.classes.groups[size_t(g)];
    if (!InCall(k) || IsCollective(k.call)) return false;
  }
  return true;
}

void P2pCycleBlame(BlameContext& ctx, int comp) {
  RankSet in_scc;
  for (int g : ctx.comps.members[size_t(comp)]) in_scc.Merge(ctx.classes.groups[size_t(g)].ranks);
  bool mismatched = false;
  for (int32_t w : in_scc.Ranks()) {
    int32_t sender = -1;
    const std::string mismatch = MessageMismatch(ctx.job, ctx.job.ranks[size_t(w)], &sender);
    if (mismatch.empty() || !in_scc.Contains(sender)) continue;
    ctx.Blame(sender, mismatch);
    ctx.Blame(w, mismatch);
    mismatched = true;
  }
  if (mismatched) return;
  ctx.found.deadlock = true;
  std::vector<int32_t> path;
  std::map<int32_t, size_t> at;
  int32_t r = in_scc.First();
  while (r >= 0 && !at.count(r)) {
    at[r] = path.size();
    path.push_back(r);
    int32_t next = -1;
    for (int32_t x : ctx.graph.rank_targets[size_t(r)].Ranks()) {
      if (in_scc.Contains(x)) {
        next = x;
        break;
      }
    }
    r = next;
  }
  std::vector<std::string> cycle;
  std::vector<int32_t> ranks;
  for (size_t i = r >= 0 ? at[r] : 0; i < path.size(); ++i) {
    const RankView& v = ctx.job.ranks[size_t(path[i])];
    ranks.push_back(v.rank);
    int32_t to = path[(i + 1 < path.size()) ? i + 1 : (r >= 0 ? at[r] : 0)];
    std::string what = v.current.op == fmt::Op::kRecv ? "recv from " : v.current.op == fmt::Op::kSend ? "send to " : "waits for ";
    cycle.push_back(std::to_string(v.rank) + " " + what + std::to_string(to) +
                    (v.current.comm >= 0 ? " on " + ctx.job.comms[size_t(v.current.comm)].label : "") + " (" +
                    ctx.job.names[v.current.name] + ")");
    ctx.Blame(v.rank, "in a cycle of point-to-point waits: " + DescribeCall(ctx.job, v.current) + " waits for rank " +
                          std::to_string(to) + ", which waits too");
  }
  ctx.cycles->push_back(cycle);
  ctx.cycle_ranks.push_back(ranks);
}

// --- collectives in a cycle -----------------------------------------------------------------------
// Ranks disagree on the order of collectives (the seed's hang: a root
// skipped a broadcast and went on). The evidence against each rank of the
// cycle is weighed; the highest scores are the culprits.

// --- a collective skipped into point-to-point -----------------------------------------------------
// A cycle through a collective and point-to-point waits: a rank skipped a
// collective its peers are in and went on into a send or receive (mpi4py's
// object collectives and user-level trees are built of those) that waits
// for one of them. The rank that never entered the collective is the
// culprit. When what it waits for was sent on another tag (still
// unreceived), the two disagree on the tag: both are named.

// The comm rank of world rank `w` in `comm`, or -1.
int32_t CommRankOf(const Job& job, int32_t comm, int32_t w) {
  if (comm < 0) return -1;
  const GlobalComm& c = job.comms[size_t(comm)];
  if (c.world) return w;
  for (size_t i = 0; i < c.members.size(); ++i) {
    if (c.members[i] == w) return int32_t(i);
  }
  return -1;
}

// The receive `v` waits for from a named source: its blocking receive or
// probe, or the first such receive among the requests its wait or test waits on.
// Null when it waits for none.
const CallPoint* WaitedReceive(const RankView& v) {
  if (v.state != RankState::kInCall) return nullptr;
  if (v.current.op == fmt::Op::kRecv || v.current.op == fmt::Op::kProbe) {
    return v.current.peer >= 0 ? &v.current : nullptr;
  }
  if (v.current.op != fmt::Op::kWait) return nullptr;
  for (const CallPoint& p : v.pending) {
    if (p.op == fmt::Op::kRecv && p.peer >= 0) return &p;
  }
  return nullptr;
}

// The receive as the report names it: with the wait it is waited for in.
std::string DescribeReceive(const Job& job, const RankView& v, const CallPoint& c) {
  return DescribeCall(job, c) + (&c == &v.current ? std::string() : " (in " + DescribeCall(job, v.current) + ")");
}

// "rank 0 sent tag 0 to rank 1 (still unreceived); rank 1 waits for tag 1
// from rank 0: tag mismatch" when `v` waits in a receive and a message sent
// to it is still unreceived that differs from the awaited one in one part of
// its envelope: from the same source on the same communicator with another
// tag (a tag mismatch), from the same source on another communicator (a
// communicator mismatch), or from another source (a source mismatch).
// "" otherwise. `*sender` is that message's sender.
std::string MessageMismatch(const Job& job, const RankView& v, int32_t* sender) {
  const CallPoint* rc = WaitedReceive(v);
  if (!rc) return "";
  const CallPoint& recv = *rc;
  const int32_t comm = recv.comm;
  const int32_t from = job.CommByRank(comm, recv.peer);
  if (from < 0 || CommRankOf(job, comm, v.rank) < 0) return "";
  enum class Differs { kTag, kComm, kSource };
  auto on = [&](int32_t c) { return " on " + job.comms[size_t(c)].label; };
  auto unreceived = [&](const RankView& q, Differs differs) -> std::string {
    for (const P2pTraffic& t : q.p2p) {
      if (!t.sent || (t.comm == comm) == (differs == Differs::kComm)) continue;
      if (differs == Differs::kTag && t.tag == recv.tag) continue;
      if (t.comm < 0 || t.peer != CommRankOf(job, t.comm, v.rank)) continue;  // not to `v`
      const int32_t q_there = CommRankOf(job, t.comm, q.rank);
      const P2pTraffic* got = v.Traffic(t.comm, q_there, t.tag);
      // Receives `v` posted that match it, not yet completed (an Irecv in
      // the Waitall it waits in): the message is matched, not stray.
      uint64_t posted = 0;
      for (const CallPoint& p : v.pending) {
        posted += p.op == fmt::Op::kRecv && p.comm == t.comm && (p.peer == q_there || p.peer == fmt::kAnyPeer) &&
                  (p.tag == t.tag || p.tag == fmt::kAnyTag);
      }
      if ((got ? got->received : 0) + posted >= t.sent) continue;
      *sender = q.rank;
      const bool comms_differ = differs == Differs::kComm;
      return "rank " + std::to_string(q.rank) + " sent tag " + std::to_string(t.tag) + " to rank " +
             std::to_string(v.rank) + (comms_differ ? on(t.comm) : "") + " (still unreceived); rank " +
             std::to_string(v.rank) + " waits for tag " + std::to_string(recv.tag) + " from rank " +
             std::to_string(from) + (comms_differ ? on(comm) : "") +
             (differs == Differs::kTag ? ": tag mismatch"
              : comms_differ          ? ": communicator mismatch"
                                      : ": source mismatch");
    }
    return "";
  };
  const RankView& source = job.ranks[size_t(from)];
  if (std::string why = unreceived(source, Differs::kTag); !why.empty()) return why;
  if (std::string why = unreceived(source, Differs::kComm); !why.empty()) return why;
  for (const RankView& q : job.ranks) {
    if (q.rank == from || q.rank == v.rank || q.p2p.empty()) continue;
    if (std::string why = unreceived(q, Differs::kSource); !why.empty()) return why;
  }
  return "";
}

// "; its MPI_ANY_SOURCE receives took rank 2's message (rank 2 sent 1 on
// tag 0; this receive waits for #2)" when `v` waits in a receive from a peer
// that sent fewer messages than it expects, and wildcard receives took some
// of them: a message race. "" otherwise.
std::string WildcardRace(const Job& job, const RankView& v) {
  const CallPoint* rc = WaitedReceive(v);
  if (!rc) return "";
  const CallPoint& recv = *rc;
  const int32_t from = job.CommByRank(recv.comm, recv.peer);
  if (from < 0) return "";
  const P2pTraffic* in = v.Traffic(recv.comm, recv.peer, recv.tag);
  if (!in || in->wildcard_taken == 0) return "";
  const RankView& p = job.ranks[size_t(from)];
  const P2pTraffic* out = p.Traffic(recv.comm, CommRankOf(job, recv.comm, v.rank), recv.tag);
  const uint64_t n = out ? out->sent : 0;
  // A probe takes no sequence number: it waits for the next message.
  const uint64_t want = recv.seq ? recv.seq : in->received + 1;
  if (n >= want) return "";
  return "; its MPI_ANY_SOURCE receives took " + std::to_string(in->wildcard_taken) + " message(s) of rank " +
         std::to_string(from) + ", which sent " + std::to_string(n) + " on tag " + std::to_string(recv.tag) +
         ": this " + (recv.op == fmt::Op::kProbe ? "probe" : "receive") + " waits for #" + std::to_string(want) +
         ", which never comes (a message race)";
}

// "made a persistent send to rank 1 (MPI_Send_init, tag 0) and never started
// it" when `v` waits in a receive from a peer that made such a send and
// started fewer than `v` waits for. "" otherwise; `*sender` the peer.
std::string NeverStarted(const Job& job, const RankView& v, int32_t* sender) {
  const CallPoint* rc = WaitedReceive(v);
  if (!rc) return "";
  const CallPoint& recv = *rc;
  const int32_t from = job.CommByRank(recv.comm, recv.peer);
  if (from < 0) return "";
  const RankView& p = job.ranks[size_t(from)];
  const P2pTraffic* t = p.Traffic(recv.comm, CommRankOf(job, recv.comm, v.rank), recv.tag);
  if (!t || !t->persistent_sends || t->sent >= recv.seq) return "";
  *sender = from;
  return "made a persistent send to rank " + std::to_string(v.rank) + " (tag " + std::to_string(recv.tag) +
         ") and never started it (MPI_Start); rank " + std::to_string(v.rank) + " waits for it in " +
         DescribeReceive(job, v, recv);
}

// Rank `v` waits in point-to-point for a peer that waits in a collective `v`
// never entered. Either `v` skipped the collective, or the peer went on to
// it without its half of the message. Only history tells them apart: when
// the two exchanged on that communicator before (on any tag), the call
// either made before its current one says which came first in a step:
// - a message between the two (not the one waited for): the step was
//   "collective, then message"; `v` went from one message to the next and
//   skipped the collective between (the seed's hang: a broadcast skipped
//   into the next step's exchange). False: the caller names `v`.
// - the collective's previous instance: the step was "message, then
//   collective"; the peer went on without its half. It alone is named.
// Otherwise, or with no exchange ever on the communicator, nothing says
// which of the two strayed: both are named, each with its side. True when
// it named.
bool BlameByStepOrder(BlameContext& ctx, const RankView& v, const RankSet& in_scc) {
  const Job& job = ctx.job;
  const CallPoint* recv = WaitedReceive(v);
  const CallPoint* send = v.current.op == fmt::Op::kSend ? &v.current : nullptr;
  if (!send && v.current.op == fmt::Op::kWait) {
    for (const CallPoint& p : v.pending) {
      if (p.op == fmt::Op::kSend && p.peer >= 0) send = &p;
    }
  }
  const CallPoint* c = recv ? recv : send;
  if (!c || c->peer < 0) return false;
  const int32_t peer = job.CommByRank(c->comm, c->peer);
  if (peer < 0 || !in_scc.Contains(peer)) return false;
  const RankView& p = job.ranks[size_t(peer)];
  if (p.state != RankState::kInCall || !IsCollective(p.current)) return false;
  // Exchanged on the communicator before, on any tag (mpi4py's object
  // collectives take a new tag for each call).
  uint64_t v_sent = 0, v_received = 0, p_sent = 0, p_received = 0;
  const int32_t v_there = CommRankOf(job, c->comm, v.rank);
  for (const P2pTraffic& t : v.p2p) {
    if (t.comm == c->comm && t.peer == c->peer) v_sent += t.sent, v_received += t.received;
  }
  for (const P2pTraffic& t : p.p2p) {
    if (t.comm == c->comm && t.peer == v_there) p_sent += t.sent, p_received += t.received;
  }
  const bool history = recv ? v_received || p_sent : v_sent > 1 || p_received;
  const std::string call = DescribeReceive(job, v, *c);
  const std::string peer_side = std::string(recv ? "never sent what rank " : "never received what rank ") +
                                std::to_string(v.rank) + (recv ? " waits for in " : " sends it in ") + call +
                                "; it is in " + DescribeCall(job, p.current);
  // A message between the two of the step before (not the one waited for)
  // just before, or the collective's previous instance.
  auto message_before = [&](const CallPoint& b, int32_t between) {
    return b.valid && b.comm == c->comm && IsP2p(b) && b.peer == between && !(b.op == c->op && b.seq == c->seq);
  };
  auto collective_before = [&](const CallPoint& b) {
    return b.valid && IsCollective(b) && b.comm == p.current.comm && b.seq + 1 == p.current.seq;
  };
  if (history && (message_before(v.previous, c->peer) || message_before(p.previous, v_there))) return false;
  if (history && (collective_before(v.previous) || collective_before(p.previous))) {
    ctx.Blame(peer, peer_side + " (in the steps before, the message came before the collective)");
    return true;
  }
  const std::string either = " (nothing in the trace says which strayed: rank " + std::to_string(v.rank) +
                             " never entered " + DescribeCall(job, p.current) + ", or rank " +
                             std::to_string(peer) + " went on to it " +
                             (recv ? "without sending" : "without receiving") + ")";
  ctx.Blame(peer, peer_side + either);
  ctx.Blame(v.rank, ctx.NeverEntered(v.rank) + "; " + NowIn(v) + call + either);
  return true;
}

bool SkippedIntoP2pApplies(const BlameContext& ctx, int comp) {
  if (!ctx.comps.cyclic[size_t(comp)]) return false;
  bool coll = false, p2p = false;
  for (int g : ctx.comps.members[size_t(comp)]) {
    const Group& k = ctx.classes.groups[size_t(g)];
    if (!InCall(k)) return false;
    coll |= IsCollective(k.call);
    p2p |= IsP2p(k.call) || k.call.op == fmt::Op::kProbe;
    // A wait on point-to-point requests waits as a receive or send does.
    if (k.call.op == fmt::Op::kWait) {
      for (int32_t r : k.ranks.Ranks()) {
        for (const CallPoint& p : ctx.job.ranks[size_t(r)].pending) p2p |= IsP2p(p);
      }
    }
  }
  return coll && p2p;
}

bool WeighCollectiveOrder(BlameContext& ctx, int comp, const std::map<int32_t, int32_t>& held);  // below

// The ranks of the cycle held in a receive or send by a peer of the cycle
// that waits in a collective they are no member of: rank -> that peer.
std::map<int32_t, int32_t> HeldByPeersElsewhere(const BlameContext& ctx, const RankSet& in_scc) {
  const Job& job = ctx.job;
  std::map<int32_t, int32_t> held;
  for (int32_t r : in_scc.Ranks()) {
    const RankView& v = job.ranks[size_t(r)];
    if (v.state != RankState::kInCall || IsCollective(v.current)) continue;
    const CallPoint* c = WaitedReceive(v);
    if (!c && v.current.op == fmt::Op::kSend) c = &v.current;
    if (!c || c->peer < 0) continue;
    const int32_t peer = job.CommByRank(c->comm, c->peer);
    if (peer < 0 || peer == r || !in_scc.Contains(peer)) continue;
    const RankView& p = job.ranks[size_t(peer)];
    if (p.state == RankState::kInCall && IsCollective(p.current) && CommRankOf(job, p.current.comm, r) < 0) {
      held[r] = peer;
    }
  }
  return held;
}

void SkippedIntoP2pBlame(BlameContext& ctx, int comp) {
  RankSet in_scc;
  for (int g : ctx.comps.members[size_t(comp)]) in_scc.Merge(ctx.classes.groups[size_t(g)].ranks);
  // A rank held by a peer in a collective it is no member of skipped
  // nothing: the cycle is weighed as one of collectives, through it.
  const std::map<int32_t, int32_t> held = HeldByPeersElsewhere(ctx, in_scc);
  if (!held.empty() && WeighCollectiveOrder(ctx, comp, held)) return;
  for (int g : ctx.comps.members[size_t(comp)]) {
    const Group& k = ctx.classes.groups[size_t(g)];
    if (!IsCollective(k.call)) continue;
    for (int32_t r : k.waiting_for.Ranks()) {
      if (!in_scc.Contains(r)) continue;
      const RankView& v = ctx.job.ranks[size_t(r)];
      if (v.state != RankState::kInCall || IsCollective(v.current)) continue;
      int32_t sender = -1;
      if (const std::string unstarted = NeverStarted(ctx.job, v, &sender); !unstarted.empty()) {
        ctx.Blame(sender, unstarted);
        continue;
      }
      const std::string mismatch = MessageMismatch(ctx.job, v, &sender);
      if (!mismatch.empty()) {
        ctx.Blame(sender, mismatch);
        ctx.Blame(r, mismatch);
        continue;
      }
      if (BlameByStepOrder(ctx, v, in_scc)) continue;
      ctx.Blame(r, ctx.NeverEntered(r) + "; " + NowIn(v) + DescribeCall(ctx.job, v.current) + WildcardRace(ctx.job, v));
    }
  }
}

bool CollectiveOrderApplies(const BlameContext& ctx, int comp) { return ctx.comps.cyclic[size_t(comp)]; }

// The weighing of a cycle through collectives. `held`: ranks of the cycle
// held in a receive (or send) by a peer that waits in a collective they are
// no member of (user-level trees, mpi4py's object collectives on their own
// communicator): they cannot have skipped that collective, and what they
// do not enter while held is counted against the peer that holds them, as
// a missing member (+1), never as a root (+2): the peer's part in the call
// that waits for them is not known. True when it named a culprit.
bool WeighCollectiveOrder(BlameContext& ctx, int comp, const std::map<int32_t, int32_t>& held) {
  const Job& job = ctx.job;
  RankSet in_scc;
  for (int g : ctx.comps.members[size_t(comp)]) in_scc.Merge(ctx.classes.groups[size_t(g)].ranks);
  std::map<int32_t, int> score;
  auto against = [&](int32_t r, int points) {
    auto h = held.find(r);
    if (h == held.end()) score[r] += points;
    else score[h->second] += 1;
  };
  for (int g : ctx.comps.members[size_t(comp)]) {
    const Group& k = ctx.classes.groups[size_t(g)];
    if (!InCall(k)) continue;
    // 1. The call its class-mates came from: a rank that arrived from
    //    another call took another path.
    auto origin = [&](int32_t r) {
      const CallPoint& p = job.ranks[size_t(r)].previous;
      return std::pair<uint16_t, std::string>{p.name, p.comm >= 0 ? job.comms[size_t(p.comm)].family : ""};
    };
    std::map<std::pair<uint16_t, std::string>, int> prev;
    for (int32_t r : k.ranks.Ranks()) prev[origin(r)]++;
    auto majority = std::max_element(prev.begin(), prev.end(), [](auto& a, auto& b) { return a.second < b.second; });
    if (prev.size() > 1 && majority->second * 2 > int(k.ranks.Count())) {
      for (int32_t r : k.ranks.Ranks()) {
        if (origin(r) != majority->first && !held.count(r)) score[r] += 2;
      }
    }
    if (!IsCollective(k.call)) continue;
    // 4. Behind its class-mates on a sibling communicator: ranks in the same
    //    collective at the same place ran the same code, so each has entered
    //    as many collectives on its own communicator of a family (its
    //    pipeline, its half of a split) as the others on theirs. One that
    //    entered fewer, where a member waits for it in the next one, skipped it.
    std::map<std::string, uint64_t> most;
    for (int32_t r : k.ranks.Ranks()) {
      for (const auto& [c, n] : job.ranks[size_t(r)].entered) {
        if (c != k.call.comm) most[job.comms[size_t(c)].family] = std::max(most[job.comms[size_t(c)].family], n);
      }
    }
    for (int32_t r : k.ranks.Ranks()) {
      for (const auto& [c, n] : job.ranks[size_t(r)].entered) {
        if (c == k.call.comm || n >= most[job.comms[size_t(c)].family]) continue;
        for (int32_t m : job.Members(c)) {
          const CallPoint& mc = job.ranks[size_t(m)].current;
          if (m != r && in_scc.Contains(m) && job.ranks[size_t(m)].state == RankState::kInCall && mc.comm == c &&
              IsCollective(mc) && mc.seq == n + 1) {
            score[r] += 2;
            break;
          }
        }
      }
    }
    // 2. A rooted collective cannot finish without its root; only a root
    //    that never entered it (one that did its part, an eager broadcast
    //    send, and went on is not what the call waits for).
    if (k.call.call_flags & fmt::kCallRooted) {
      int32_t root = job.CommByRank(k.call.comm, k.call.peer);
      if (root >= 0 && !k.ranks.Contains(root) && in_scc.Contains(root) &&
          job.ranks[size_t(root)].Entered(k.call.comm) < k.call.seq) {
        against(root, 2);
      }
    }
    // 3. The few members missing from a call most members are in.
    if (k.waiting_for.Count() < k.ranks.Count()) {
      for (int32_t r : k.waiting_for.Ranks()) {
        if (in_scc.Contains(r)) against(r, 1);
      }
    }
  }
  int best = 0;
  for (const auto& [r, sc] : score) best = std::max(best, sc);
  bool named = false;
  for (const auto& [r, sc] : score) {
    if (sc != best || best == 0) continue;
    ctx.Blame(r, ctx.NeverEntered(r) + "; " + NowIn(job.ranks[size_t(r)]) + DescribeCall(job, job.ranks[size_t(r)].current));
    named = true;
  }
  return named;
}

void CollectiveOrderBlame(BlameContext& ctx, int comp) { WeighCollectiveOrder(ctx, comp, {}); }

}  // namespace

const BlameRule kBlameRules[] = {
    {"died-first", "the sink that holds the rank that died first, without an exit record", DiedFirstApplies,
     DiedFirstBlame},
    {"finished", "a sink class in MPI_Finalize that others wait for in point-to-point calls", FinishedApplies,
     FinishedBlame},
    {"waits-for-nobody", "a sink class outside any call that others wait for", WaitsForNobodyApplies,
     WaitsForNobodyBlame},
    {"untraced-call", "a sink class blocked in a call seen only on its stacks", UntracedCallApplies,
     UntracedCallBlame},
    {"no-rank-call", "a sink class inside a call that waits for no rank (a kernel, a host call)", NoRankCallApplies,
     NoRankCallBlame},
    {"polls-for-nobody", "a sink class polling (Iprobe, Test) for no rank it names, that others wait for",
     PollsForNobodyApplies, PollsForNobodyBlame},
    {"everyone-entered", "a sink class whose peers are all in the call with it", EveryoneEnteredApplies,
     EveryoneEnteredBlame},
    {"lock-cycle", "a cycle through a file lock and the call its holder waits in", LockCycleApplies, LockCycleBlame},
    {"receive-cycle", "a cycle of ranks that each wait for all their messages, also beyond sinks",
     ReceiveCycleApplies, P2pCycleBlame, true},
    {"p2p-cycle", "a cycle of point-to-point waits", P2pCycleApplies, P2pCycleBlame},
    {"skipped-into-p2p", "a cycle through a collective and point-to-point waits", SkippedIntoP2pApplies,
     SkippedIntoP2pBlame},
    {"collective-order", "a cycle through collectives", CollectiveOrderApplies, CollectiveOrderBlame},
};
const size_t kNumBlameRules = sizeof(kBlameRules) / sizeof(kBlameRules[0]);

}  // namespace hangtrace::diagnose
