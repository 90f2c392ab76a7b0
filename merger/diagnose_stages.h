// The stages of the diagnosis, in order (docs/ANALYSIS.md follows them one
// to one). Diagnose() (diagnose.cc) runs them; each is a function of its own
// so that it can be read, and tested, alone:
//
//   Classify        ranks -> classes (same state, call, comm, seq [, peer])
//   FindProgress    two snapshots -> the ranks that moved
//   BuildWaitGraph  who each class waits for; edges between classes
//   FindComponents  strongly connected components: sinks and cycles
//   FindMismatches  collectives whose members passed different arguments
//   FindDeaths      how processes ended: killed, SIGTERMed, exited inside a
//                   call; which died first, which crashed first
//   ApplyBlameRules the culprits, one named rule per kind of component
//                   (blame_rules.cc, table kBlameRules)
//   DecideVerdict   hang, deadlock, mismatch, crash, no-hang (from evidence)
//                   or unknown
//   Summarize       the one sentence
#pragma once

#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "merger/diagnose.h"

namespace hangtrace::diagnose {

struct Classes {
  std::vector<Group> groups;     // in rank order of first appearance
  std::vector<int32_t> class_of; // world rank -> index in groups
};
Classes Classify(const Job& job);

// The ranks whose position moved between `earlier` and `job`.
RankSet FindProgress(const Job& job, const Job& earlier);

// Waitany, Waitsome, Testany, Testsome (C or Fortran): the call returns
// when any one of its requests completes.
bool CompletesAnyOf(const Job& job, const CallPoint& c);

// Who each rank in a call waits for (world ranks; missing ones count).
RankSet WaitsFor(const Job& job, const RankView& v);
// The call through which `o` waits for `rank` (its own, or a request its
// wait or test waits on: a point-to-point peer, a collective `rank` has not
// entered, a lock `rank` holds); null when it does not.
const CallPoint* WaitsOn(const Job& job, const RankView& o, int32_t rank);
// The world ranks a point-to-point call (or probe) waits for: its peer,
// and for a Sendrecv also the rank it receives from; -1 where none (other
// calls, unknown ranks).
std::array<int32_t, 2> WaitedPeers(const Job& job, const CallPoint& c);

struct WaitGraph {
  std::vector<RankSet> rank_targets;      // point-to-point and other per-rank waits
  std::vector<std::set<int32_t>> edges;   // class -> classes it waits for
  RankSet waited;                         // every rank some rank waits for
};
// Fills groups[].waiting_for too.
WaitGraph BuildWaitGraph(const Job& job, Classes* classes);

struct Components {
  std::vector<int> of;                    // class -> component
  std::vector<std::vector<int>> members;  // component -> classes
  std::vector<bool> sink;                 // waits for no class outside it (missing ranks aside)
  std::vector<bool> cyclic;               // has a cycle (a class waiting for itself included)
};
Components FindComponents(const WaitGraph& graph, const std::vector<Group>& groups);

std::vector<Mismatch> FindMismatches(const Job& job);

// Ranks whose processes died without an exit record, and which died first.
struct Deaths {
  RankSet killed;     // no exit record and no SIGTERM: SIGKILL, the OOM killer
  RankSet ended;      // died of the SIGTERM they received (a launcher, a scheduler)
  // Exited while inside a call that never returned: another thread ended
  // the process (an MPI library that lost its launcher), so it was torn
  // down where it waited.
  RankSet exited;
  std::string exit_codes;    // their exit statuses: "195", or "1 (ranks 0-2), 195 (rank 3)"
  int32_t first_crash = -1;  // the rank whose fatal signal came first (-1: none crashed)
  RankSet crashed_after;     // the others that crashed, after it
  int32_t first = -1; // the rank that died clearly before the others, if one did
  int64_t first_ns = 0;
  double next_after_s = -1;  // how long after it the next died (-1: none did)
  std::string ended_by;      // who sent the others' SIGTERM, when one sender did
  // Every rank is dead, and none had waited in its call for long: the job was
  // killed (or ended) while it ran, not while it hung.
  bool all_while_running = false;
  int64_t last_ns = 0;       // the last death
  // Exited with a failure status from inside a call before the launcher
  // ended the others (SIGTERM after it): an MPI error under
  // MPI_ERRORS_ARE_FATAL, an abort. The job crashed there, whatever the
  // others were doing when they were ended.
  RankSet failed_first;
};
Deaths FindDeaths(const Job& job);
// "14:03:07.512": a realtime ns in local time, to the millisecond.
std::string ClockTime(int64_t real_ns);

// What the blame rules found, for the verdict.
struct Findings {
  bool deadlock = false;        // a cycle of point-to-point waits
  bool mismatch_hang = false;   // a call everyone entered, explained by a mismatch
  bool crash = false;           // a culprit crashed or died
  bool below = false;           // a call everyone entered that does not complete
  bool missing_blamed = false;  // a culprit has no trace file
  // Ranks in a communication call whose communicator their trace did not
  // record (its table was full): whom they wait for is unknown.
  RankSet comm_unknown;
  // Ranks in a collective that other members have already returned from
  // (their count of collectives on it is past it): it completes for them
  // too unless something below MPI is wrong, and one look cannot tell
  // which (a healthy job read mid-call).
  RankSet completing;
  std::string completing_call;  // the first such call, said
};

// Everything a blame rule reads and writes.
struct BlameContext {
  const Job& job;
  const Classes& classes;
  const WaitGraph& graph;
  const Components& comps;
  const std::vector<Mismatch>& mismatches;
  const Deaths& deaths;
  std::vector<std::vector<std::string>>* cycles;
  std::map<int32_t, Culprit> culprits;
  // Each cycle of `cycles` as data: its world ranks, in the order they wait.
  std::vector<std::vector<int32_t>> cycle_ranks;
  Findings found;
  // Names `rank` a culprit (once; the first reason stays).
  void Blame(int32_t rank, const std::string& why);
  // "never entered MPI_Bcast #4 on pp1": what the biggest class waiting
  // for `rank` is in.
  std::string NeverEntered(int32_t rank) const;
};

// One rule: which components it explains and how. The first rule whose
// `applies` holds for a sink or cyclic component blames its culprits.
struct BlameRule {
  const char* name;   // as in docs/ANALYSIS.md
  const char* when;   // one line: the components it is for
  bool (*applies)(const BlameContext&, int component);
  void (*blame)(BlameContext&, int component);
  // Tried on components that wait on others too, not only on sinks.
  bool beyond_sinks = false;
};
extern const BlameRule kBlameRules[];
extern const size_t kNumBlameRules;

void ApplyBlameRules(BlameContext* ctx);

Verdict DecideVerdict(const Job& job, Diagnosis* d, BlameContext* ctx);
// With no rank waiting in a call: whether nothing hangs, from evidence
// (every rank exited, moved between two looks, or computes by its stacks or
// a recent call), and the sentence that says so, or why it is unknown.
std::string NoHangOrWhyUnknown(const Job& job, const Diagnosis& d, bool* no_hang);
std::string Summarize(const Job& job, const Diagnosis& d, const Deaths& deaths);

// "passes count 128 to MPI_Allreduce #33 on tp0 (the other members pass
// 256)": why an odd rank of a mismatch is a culprit; in parentheses, so that
// the rank's own place in the program, said after it, reads as its own.
std::string MismatchWhy(const Job& job, const Mismatch& m, int32_t rank);
// " at train_step (pretrain.py:212)", or "" without a Python frame.
std::string WhereInProgram(const Job& job, int64_t frame);
std::string SignalName(int sig);

inline bool IsP2p(const CallPoint& c) { return c.call_flags & fmt::kCallP2p; }
inline bool IsCollective(const CallPoint& c) { return c.call_flags & fmt::kCallCollective; }

// A job whose every rank is known only from a dump's stacks (no trace):
// the whole diagnosis, on its own rules (stacks_only.cc).
Diagnosis DiagnoseFromStacks(const Job& job, const Job* earlier);
// Every process of the job has ended (none is known to run).
bool JobEnded(const Job& job);


}  // namespace hangtrace::diagnose
