// From a Job to a diagnosis: classes of ranks, mismatches, the wait-for
// graph, its cycles and the culprits, and the verdict (docs/ANALYSIS.md).
#pragma once

#include <string>
#include <vector>

#include "merger/model.h"

namespace hangtrace {

enum class Verdict : uint8_t { kNoHang, kHang, kDeadlock, kMismatch, kCrash };
// "no-hang", "hang", "deadlock", "mismatch", "crash": the JSON contract's names.
const char* VerdictName(Verdict v);

// Ranks in the same state and the same call (comm, seq).
struct Group {
  RankSet ranks;
  RankState state = RankState::kMissing;
  CallPoint call;            // representative (in_call: the call; else the last one)
  double in_call_s = 0;      // longest among its ranks
  RankSet waiting_for;       // ranks its ranks wait for
  std::vector<std::string> hosts;
  int64_t python_frame = -1; // its ranks' most common innermost Python frame (Job::frames)
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
  bool compared = false;              // an earlier snapshot was given
};

// `earlier`: the same job read earlier (or null). Ranks whose sequence
// numbers moved since are progressing: slow, not hung.
Diagnosis Diagnose(const Job& job, const Job* earlier = nullptr);

// "MPI_Bcast #3 on split root 1": a call for people.
std::string DescribeCall(const Job& job, const CallPoint& c);

}  // namespace hangtrace
