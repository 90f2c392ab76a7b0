// From a Job to a diagnosis: classes of ranks, mismatches, the wait-for
// graph, its cycles and the culprits, and the verdict (docs/ANALYSIS.md).
#pragma once

#include <string>
#include <vector>

#include "merger/model.h"

namespace hangtrace {

enum class Verdict : uint8_t { kNoHang, kHang, kDeadlock, kMismatch, kCrash, kUnknown };
// "no-hang", "hang", "deadlock", "mismatch", "crash", "unknown": the JSON
// contract's names. `unknown`: the evidence cannot decide (the summary says
// why); `no-hang` is never said from silence.
const char* VerdictName(Verdict v);

// Ranks in the same state and the same place: call, communicator,
// sequence number, peer and tag, and innermost Python frame.
struct Group {
  RankSet ranks;
  RankState state = RankState::kMissing;
  Basis basis = Basis::kTrace;  // what its ranks' place stands on
  CallPoint call;            // representative (in_call: the call; else the last one)
  double in_call_s = 0;      // longest among its ranks
  RankSet waiting_for;       // ranks its ranks wait for
  std::vector<std::string> hosts;
  int64_t user_frame = -1;   // its ranks' place in the program (RankView::user_frame)
  // In a call: the name of the thread its ranks are in it on, when that is
  // not the main thread and the same for all of them ("" otherwise).
  std::string thread;
  // Outside any call: how long since its ranks' last traced call (the
  // longest; 0 unknown), and where they compute or sleep (Job::frames, -1).
  double outside_s = 0;
  int64_t idle_frame = -1;
  // Its ranks' main threads' native stacks were not read (RankView): where
  // they are is unknown, though other threads' stacks were read.
  bool main_stack_unread = false;
};

struct Culprit {
  int32_t rank = -1;
  std::string host;
  int32_t pid = 0;
  std::string why;
};

struct Mismatch {
  int32_t comm = -1;
  uint64_t seq = 0;
  std::string field;   // "op", "count", "datatype", "root", "redop"
  std::vector<std::pair<std::string, RankSet>> values;  // value -> ranks, most common first
  RankSet odd;         // the ranks that differ from the most common value
  // No value is the most common (two ranks of a two-rank comm, halves of
  // one), and no sibling communicator says which is right: nothing says
  // which side strayed, so every side is in `odd`.
  bool tie = false;
  // The ranks whose value is a collective seen only on their stacks (a call
  // hangtrace does not trace: DDP's gradient all-reduce, a gloo or NCCL
  // wait), each having entered every traced collective on `comm` before
  // `seq`: their call is what they do instead of the traced one, on a
  // communicator the trace does not show.
  RankSet untraced;
};

struct Diagnosis {
  int32_t world_size = 0;
  RankSet with_trace, missing;
  // What the diagnosis stands on: "trace" (the ranks' trace files), or
  // "stacks" (a dump of untraced processes: stacks and environment only).
  std::string basis = "trace";
  RankSet from_stacks;   // ranks known only from a dump's stacks
  Verdict verdict = Verdict::kNoHang;
  bool below = false;    // ranks all in one call that does not complete: below MPI
  std::vector<std::string> notes;  // facts that qualify the verdict, one line each
  std::string summary;
  std::vector<Culprit> culprits;
  std::vector<Group> groups;          // biggest first
  std::vector<Mismatch> mismatches;
  std::vector<std::vector<std::string>> cycles;   // each: its waits, in words
  std::vector<std::vector<int32_t>> cycle_ranks;  // each: its world ranks, in order
  RankSet progressing;                // moved since the earlier snapshot
  RankSet unseen;                     // ranks without a file, not blamed beside a convicted culprit
  bool compared = false;              // an earlier snapshot was given
  bool ended = false;                 // every process of the job has ended (analyzed after the fact)
  // With no-hang: the evidence of it; with unknown: why the evidence cannot
  // decide. Empty when the verdict came another way.
  std::string evidence;
  // A hang from one look at a running job: what shows its ranks are stuck
  // ("past the watchdog's 2 s", "40x the longest the same call took before").
  std::string stuck_because;
};

// `earlier`: the same job read earlier (or null). Ranks whose sequence
// numbers moved since are progressing: slow, not hung.
Diagnosis Diagnose(const Job& job, const Job* earlier = nullptr);

// "MPI_Bcast #3 on split root 1": a call for people.
std::string DescribeCall(const Job& job, const CallPoint& c);

// The culprits' ranks.
RankSet CulpritRanks(const Diagnosis& d);

// Whether a rank's own processes that are no ranks may be what holds it (a
// culprit, or a rank outside any call: it may wait on a DataLoader's
// worker): the reports name them and show their stacks.
inline bool ChildrenMayHoldIt(const RankView& v, const RankSet& culprits) {
  return !v.children.empty() && (culprits.Contains(v.rank) || v.state != RankState::kInCall);
}

// "pid 853 (python3): at __getitem__ (train.py:117), in time.sleep": a
// rank's own process that is no rank, where its main thread is.
std::string DescribeChild(const Job& job, const ChildProcess& c);

}  // namespace hangtrace
