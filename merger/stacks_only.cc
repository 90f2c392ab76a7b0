// The diagnosis when stacks are all there is: a job nobody traced (a dump
// of its processes), or a traced job whose calls its traces do not hold
// (calls torch issues from C++, an MPI call hangtrace does not wrap: silent
// traces, and a dump's stacks). Each rank's place is the innermost communication or
// waiting call on its stacks (stack_calls.cc), without communicator,
// sequence number or history, so the rules are few and the words say so:
// which ranks sit in which call, and the ranks that are in none (or
// stopped, or gone) while the others wait, which is what a person reading
// `py-spy dump` on every rank would conclude. A file lock is the one wait
// whose other side the stacks name: its holder.
#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "merger/diagnose_stages.h"

namespace hangtrace::diagnose {

namespace {
// "computing" or "sleeping", and where: " in clock_nanosleep".
std::string Idle(const Job& job, const Group& g) {
  if (g.idle_frame < 0) return "in no communication call";
  const Frame& f = job.frames[size_t(g.idle_frame)];
  const std::string name = f.func.substr(0, f.func.find('('));
  const bool sleeping = name.find("sleep") != std::string::npos;
  return std::string(sleeping ? "sleeping" : "in no communication call") + " (in " + Shortened(f.Text()) + ")";
}
}  // namespace

Diagnosis DiagnoseFromStacks(const Job& job, const Job* earlier) {
  Diagnosis d;
  d.basis = "stacks";
  d.world_size = job.world_size;
  d.ended = JobEnded(job);
  bool any_traced = false;
  for (const RankView& v : job.ranks) any_traced |= v.state != RankState::kMissing && !v.from_stacks;
  if (earlier) {
    d.compared = true;
    d.progressing = FindProgress(job, *earlier);
  }
  // Groups: by state, call, innermost Python frame and evidence.
  std::map<std::tuple<int, uint16_t, int64_t, int, bool>, size_t> index;
  std::vector<std::map<int64_t, size_t>> idle_votes;
  for (const RankView& v : job.ranks) {
    if (v.state == RankState::kMissing) {
      d.missing.Add(v.rank);
      continue;
    }
    (v.from_stacks ? d.from_stacks : d.with_trace).Add(v.rank);
    const bool in = v.state == RankState::kInCall;
    const auto key =
        std::make_tuple(int(v.state), in ? v.current.name : uint16_t(0), PlaceKey(job, v.user_frame), int(v.basis),
                        v.main_stack_unread);
    auto [it, fresh] = index.emplace(key, d.groups.size());
    if (fresh) {
      Group g;
      g.state = v.state;
      g.basis = v.basis;
      g.call = in ? v.current : v.previous;
      g.user_frame = v.user_frame;
      g.main_stack_unread = v.main_stack_unread;
      d.groups.push_back(g);
      idle_votes.emplace_back();
    }
    Group& g = d.groups[it->second];
    if (in) {
      if (g.ranks.Empty()) g.thread = v.call_thread;
      else if (g.thread != v.call_thread) g.thread.clear();
    }
    if (!g.ranks.Empty() && g.user_frame != v.user_frame) g.user_frame = -1;  // not the same for all
    g.ranks.Add(v.rank);
    if (v.idle_frame >= 0) ++idle_votes[it->second][v.idle_frame];
    if (std::find(g.hosts.begin(), g.hosts.end(), v.host) == g.hosts.end() && g.hosts.size() < 8) g.hosts.push_back(v.host);
  }
  for (size_t i = 0; i < d.groups.size(); ++i) {
    size_t best = 0;
    for (const auto& [frame, n] : idle_votes[i]) {
      if (n > best) best = n, d.groups[i].idle_frame = frame;
    }
  }
  std::stable_sort(d.groups.begin(), d.groups.end(), [](const Group& a, const Group& b) {
    if (a.ranks.Count() != b.ranks.Count()) return a.ranks.Count() > b.ranks.Count();
    return a.ranks.First() < b.ranks.First();
  });
  d.mismatches = FindMismatches(job);

  RankSet waiting, suspects, no_stacks;
  std::vector<std::string> calls;
  for (const Group& g : d.groups) {
    if (g.state == RankState::kInCall) {
      waiting.Merge(g.ranks);
      const std::string& name = job.names[g.call.name];
      if (std::find(calls.begin(), calls.end(), name) == calls.end()) calls.push_back(name);
    }
    if (g.state == RankState::kCompute && g.basis != Basis::kStacks) no_stacks.Merge(g.ranks);
  }
  auto where = [&](const Group& g) { return WhereInProgram(job, g.user_frame); };
  std::string wait_text;
  if (!waiting.Empty()) {
    wait_text = waiting.Named() + (waiting.Count() == 1 ? " waits in " : " wait in ");
    for (size_t i = 0; i < calls.size() && i < 3; ++i) wait_text += (i ? ", " : "") + calls[i];
    if (calls.size() > 3) wait_text += ", ...";
  }
  // A file lock's holder: the ranks waiting for it wait for that rank.
  std::map<int32_t, RankSet> lock_waiters;
  std::map<int32_t, std::string> lock_file;
  for (const RankView& v : job.ranks) {
    if (v.state != RankState::kInCall || v.current.lock_holder < 0) continue;
    lock_waiters[v.current.lock_holder].Add(v.rank);
    for (const ThreadStack& t : v.stacks) {
      if (t.tid == v.call_tid && !t.lock_file.empty()) lock_file[v.current.lock_holder] = t.lock_file;
    }
  }
  bool lock_cycle = false;
  for (const auto& [holder, waiters] : lock_waiters) {
    const RankView& h = job.ranks[size_t(holder)];
    std::string why = "holds the file lock" + (lock_file.count(holder) ? " on " + lock_file[holder] : std::string()) +
                      " that " + waiters.Named() + (waiters.Count() == 1 ? " waits" : " wait") + " for";
    if (h.state == RankState::kInCall) {
      why += ", while it waits in " + job.names[h.current.name] + WhereInProgram(job, h.user_frame);
      if (h.current.lock_holder < 0) {
        // It waits for the others in a communication call: a cycle.
        lock_cycle = true;
        std::vector<int32_t> cycle = {holder};
        for (int32_t w : waiters.Ranks()) cycle.push_back(w);
        d.cycle_ranks.push_back(cycle);
        d.cycles.push_back({std::to_string(holder) + " waits in " + job.names[h.current.name],
                            waiters.Brief() + " wait for " + std::to_string(holder) + "'s file lock"});
      }
    }
    d.culprits.push_back({holder, h.host, h.pid, why + " (from stacks)"});
    suspects.Add(holder);
  }
  // A rank that cannot come while others wait (stopped, or its process
  // gone): a hang whatever the time, seen at one look.
  bool stuck_for_sure = false;
  RankSet at_work;  // ranks in no communication call running on a CPU at a look
  RankSet moved_outside;  // ranks in no communication call that moved between two looks: at work
  for (const Group& g : d.groups) {
    if (g.state != RankState::kCompute || g.basis != Basis::kStacks) continue;
    for (int32_t r : g.ranks.Ranks()) {
      if (d.progressing.Contains(r)) moved_outside.Add(r);
    }
  }
  for (const Group& g : d.groups) {
    std::string why;
    if (g.state == RankState::kStopped) why = "stopped (state T)";
    else if (g.state == RankState::kGone) why = "gone: its process ended";
    else if (g.state == RankState::kCompute && !waiting.Empty() && g.basis == Basis::kStacks) why = Idle(job, g) + where(g);
    if (why.empty()) continue;
    if (!wait_text.empty()) {
      why += " while " + wait_text;
      stuck_for_sure |= g.state == RankState::kStopped || g.state == RankState::kGone;
    }
    for (int32_t r : g.ranks.Ranks()) {
      // A rank that moved between two looks works: never a culprit.
      if (suspects.Contains(r) || d.progressing.Contains(r)) continue;
      const RankView& v = job.ranks[size_t(r)];
      // Outside any communication call and running on a CPU at a look
      // (/proc state R): it computes, at work; the others wait for a
      // long step, or a loop that never ends, which two looks seconds
      // apart cannot tell (a rank that computes 3 s every third step read
      // as the culprit of a hang, 7 of 7 looks).
      const bool running = v.dump_state == "R" || (earlier && size_t(r) < earlier->ranks.size() &&
                                                   earlier->ranks[size_t(r)].dump_state == "R");
      if (g.state == RankState::kCompute && running) {
        at_work.Add(r);
        continue;
      }
      d.culprits.push_back({r, v.host, v.pid, why + " (from stacks)"});
      suspects.Add(r);
    }
  }

  // Whom the classes wait for, as far as stacks tell: a lock's holder (and,
  // in a cycle, the holder waits for its waiters).
  for (Group& g : d.groups) {
    for (int32_t r : g.ranks.Ranks()) {
      const RankView& v = job.ranks[size_t(r)];
      if (v.state == RankState::kInCall && v.current.lock_holder >= 0) g.waiting_for.Add(v.current.lock_holder);
    }
  }
  for (const auto& cycle : d.cycle_ranks) {
    for (Group& g : d.groups) {
      if (!g.ranks.Contains(cycle[0])) continue;
      for (size_t i = 1; i < cycle.size(); ++i) g.waiting_for.Add(cycle[i]);
    }
  }
  std::vector<std::string> parts;
  for (const Group& g : d.groups) {
    const std::string who = g.ranks.Named(24);
    switch (g.state) {
      case RankState::kInCall: parts.push_back(who + " in " + job.names[g.call.name] + where(g)); break;
      case RankState::kCompute:
        parts.push_back(who + " " +
                        (g.basis == Basis::kStacks  ? Idle(job, g)
                         : g.main_stack_unread      ? "unknown (its main thread's native stack was not read)"
                                                    : "without stacks") +
                        where(g));
        break;
      case RankState::kStopped: parts.push_back(who + " stopped"); break;
      case RankState::kGone: parts.push_back(who + " gone"); break;
      default: parts.push_back(who + " " + RankStateName(g.state)); break;
    }
  }
  std::string list;
  for (size_t i = 0; i < parts.size() && i < 4; ++i) list += (i ? ", " : "") + parts[i];
  if (parts.size() > 4) list += ", and " + std::to_string(parts.size() - 4) + " more classes";
  const std::string basis = any_traced && !d.from_stacks.Empty() ? "from stacks (traces silent or absent): "
                            : any_traced ? "from stacks (their traces show no call they are in): "
                                         : "stacks only: ";

  const bool all_moving = d.compared && !waiting.Empty() && [&] {
    for (int32_t r : waiting.Ranks()) {
      if (!d.progressing.Contains(r)) return false;
    }
    return true;
  }();
  if (all_moving) {
    d.verdict = Verdict::kNoHang;
    d.summary = basis + "ranks " + d.progressing.Brief() + " moved between the two looks: slow, not hung (" + list + ")";
  } else if (waiting.Empty() && suspects.Empty()) {
    if (!no_stacks.Empty()) {
      d.verdict = Verdict::kUnknown;
      d.summary = basis + "no rank is in a communication call, but " + no_stacks.Named() +
                  (no_stacks.Count() == 1 ? " has" : " have") + " no stacks (" + list + ")";
    } else {
      d.verdict = Verdict::kNoHang;
      d.summary = basis + "no rank is in a communication call: every rank computes (" + list + ")";
    }
  } else if (!d.compared && !d.ended && !lock_cycle && !stuck_for_sure) {
    // One look at a running job, its stacks all there is: where each rank
    // is, never since when. A job at work looks like this at every instant
    // (ranks in a collective while one is still on its way there), so no
    // rank is named: only a second look, or a rank that cannot come (stopped,
    // gone) or a wait cycle, shows a hang.
    d.verdict = Verdict::kUnknown;
    d.culprits.clear();
    d.summary = basis + list + ". One look at a running job: stacks say where each rank is, not since when, and a "
                "job at work looks like this too: dump again a few seconds later and give the first with --earlier "
                "(hangtrace analyze NEW --earlier OLD; hangtrace dump looks twice by default)";
  } else if (suspects.Empty() && !lock_cycle && !stuck_for_sure && (!at_work.Empty() || !moved_outside.Empty())) {
    // The ranks the others wait for are at work: running on a CPU, or moved
    // between two looks. A long step, or a loop that never ends: stacks give
    // no duration (a trace would: how long each call usually waits), so
    // nobody is named.
    RankSet who = at_work;
    who.Merge(moved_outside);
    d.verdict = Verdict::kUnknown;
    d.culprits.clear();
    d.summary = basis + list + ". The ranks in calls wait, and " + who.Named() + (who.Count() == 1 ? " is" : " are") +
                " at work outside any communication call (" +
                (moved_outside.Empty() ? "running on a CPU" : "moved between the looks") +
                "): a long step looks like this too; look again later (hangtrace dump --settle 30), or trace the "
                "job (hangtrace run) for how long its calls wait";
  } else {
    d.verdict = lock_cycle ? Verdict::kDeadlock : Verdict::kHang;
    // Every rank in one receive: nobody sends. In one collective (or one
    // wait): slow, or stuck below it.
    fmt::Op only_op = fmt::Op::kNone;
    for (const Group& g : d.groups) {
      if (g.state == RankState::kInCall) only_op = g.call.op;
    }
    const bool one_call = suspects.Empty() && calls.size() == 1 && waiting.Count() == d.with_trace.Count() + d.from_stacks.Count();
    const bool all_receive = one_call && (only_op == fmt::Op::kRecv || only_op == fmt::Op::kProbe);
    d.below = one_call && !all_receive;
    d.summary = basis + list;
    if (all_receive) {
      d.notes.push_back("every rank waits to receive in " + calls[0] +
                        " and none sends: each waits for a message its peer sends only after (a receive-order "
                        "deadlock?)");
    }
    if (lock_cycle) {
      // A cycle through a file lock: its holder first.
      for (const Culprit& c : d.culprits) {
        if (c.why.rfind("holds the file lock", 0) != 0) continue;
        d.summary = basis + "rank " + std::to_string(c.rank) + " " + c.why.substr(0, c.why.size() - strlen(" (from stacks)"));
        break;
      }
    }
    if (!all_receive) d.notes.push_back(d.below ? "every rank is in " + calls[0] +
                                    ": slow, or stuck below it; no trace of it, so no communicator or sequence number"
                              : std::string(any_traced ? "their traces hold none of these calls"
                                                       : "no trace") +
                                    ", so no communicator or sequence number: the ranks' calls are not known to match" +
                                    (any_traced ? "" : " (trace the job with hangtrace run for that)"));
    if (!d.compared) {
      d.notes.push_back(
          d.ended ? "the job has ended: where its ranks were is all the stacks say"
                  : "one look: a slow job is not excluded (dump again a few seconds later and give the first with "
                    "--earlier: hangtrace analyze NEW --earlier OLD)");
    }
  }
  if (!d.missing.Empty()) d.notes.push_back("no dump of ranks " + d.missing.Brief() + ": they may hold the answer");
  return d;
}

}  // namespace hangtrace::diagnose
