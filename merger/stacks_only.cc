// The diagnosis of a job nobody traced: a dump's stacks are all there is.
// Each rank's position is the innermost communication call on its stacks
// (stack_calls.cc: FindStackCall), without communicator, sequence number or
// history, so the rules are few and the words say so: which ranks sit in
// which call, and the ranks that are in none (or stopped, or gone) while
// the others wait, which is what a person reading `py-spy dump` on every
// rank would conclude.
#include <algorithm>
#include <map>

#include "merger/diagnose_stages.h"

namespace hangtrace::diagnose {

Diagnosis DiagnoseFromStacks(const Job& job) {
  Diagnosis d;
  d.basis = "stacks";
  d.world_size = job.world_size;
  // Groups: by state, and by call for ranks in one.
  std::map<std::pair<int, uint16_t>, size_t> index;
  std::vector<std::map<int64_t, size_t>> python_votes;
  for (const RankView& v : job.ranks) {
    if (v.state == RankState::kMissing) {
      d.missing.Add(v.rank);
      continue;
    }
    (v.from_stacks ? d.from_stacks : d.with_trace).Add(v.rank);
    const auto key = std::make_pair(int(v.state), v.state == RankState::kInCall ? v.current.name : uint16_t(0));
    auto [it, fresh] = index.emplace(key, d.groups.size());
    if (fresh) {
      Group g;
      g.state = v.state;
      g.call = v.current;
      d.groups.push_back(g);
      python_votes.emplace_back();
    }
    Group& g = d.groups[it->second];
    g.ranks.Add(v.rank);
    if (std::find(g.hosts.begin(), g.hosts.end(), v.host) == g.hosts.end() && g.hosts.size() < 8) g.hosts.push_back(v.host);
    if (v.python_frame >= 0) ++python_votes[it->second][v.python_frame];
  }
  for (size_t i = 0; i < d.groups.size(); ++i) {
    size_t best = 0;
    for (const auto& [frame, n] : python_votes[i]) {
      if (n > best) best = n, d.groups[i].python_frame = frame;
    }
  }
  std::stable_sort(d.groups.begin(), d.groups.end(), [](const Group& a, const Group& b) {
    if (a.ranks.Count() != b.ranks.Count()) return a.ranks.Count() > b.ranks.Count();
    return a.ranks.First() < b.ranks.First();
  });

  RankSet waiting, suspects;
  std::vector<std::string> calls;
  for (const Group& g : d.groups) {
    if (g.state == RankState::kInCall) {
      waiting.Merge(g.ranks);
      calls.push_back(job.names[g.call.name]);
    }
  }
  auto where = [&](const Group& g) { return WhereInProgram(job, g.python_frame); };
  std::string wait_text;
  if (!waiting.Empty()) {
    wait_text = waiting.Named() + (waiting.Count() == 1 ? " waits in " : " wait in ");
    for (size_t i = 0; i < calls.size() && i < 3; ++i) wait_text += (i ? ", " : "") + calls[i];
    if (calls.size() > 3) wait_text += ", ...";
  }
  for (const Group& g : d.groups) {
    std::string why;
    if (g.state == RankState::kStopped) why = "stopped (state T)";
    else if (g.state == RankState::kGone) why = "gone: its process ended";
    else if (g.state == RankState::kCompute && !waiting.Empty()) why = "in no communication call" + where(g);
    if (why.empty()) continue;
    if (!wait_text.empty()) why += " while " + wait_text;
    for (int32_t r : g.ranks.Ranks()) {
      const RankView& v = job.ranks[size_t(r)];
      d.culprits.push_back({r, v.host, v.pid, why + " (from stacks)"});
      suspects.Add(r);
    }
  }

  std::vector<std::string> parts;
  for (const Group& g : d.groups) {
    const std::string who = g.ranks.Named(24);
    switch (g.state) {
      case RankState::kInCall: parts.push_back(who + " in " + job.names[g.call.name] + where(g)); break;
      case RankState::kCompute: parts.push_back(who + " in no communication call" + where(g)); break;
      case RankState::kStopped: parts.push_back(who + " stopped"); break;
      case RankState::kGone: parts.push_back(who + " gone"); break;
      default: parts.push_back(who + " " + RankStateName(g.state)); break;
    }
  }
  std::string list;
  for (size_t i = 0; i < parts.size() && i < 4; ++i) list += (i ? ", " : "") + parts[i];
  if (parts.size() > 4) list += ", and " + std::to_string(parts.size() - 4) + " more classes";

  if (waiting.Empty() && suspects.Empty()) {
    d.verdict = Verdict::kNoHang;
    d.summary = "stacks only: no rank is inside a communication call (" + list + ")";
  } else {
    d.verdict = Verdict::kHang;
    d.below = suspects.Empty() && calls.size() == 1;
    d.summary = "stacks only: " + list;
    d.notes.push_back(d.below ? "every rank is in " + calls[0] +
                                    ": slow, or stuck below MPI; no trace, so no communicator or sequence number"
                              : "no trace, so no communicator or sequence number: the ranks' calls are not known to "
                                "match (trace the job with hangtrace run for that)");
  }
  if (!d.missing.Empty()) d.notes.push_back("no dump of ranks " + d.missing.Brief() + ": they may hold the answer");
  return d;
}

}  // namespace hangtrace::diagnose
