// The stages of loading a job, in order (docs/ANALYSIS.md, "Loading",
// follows them one to one). LoadJob (load.cc) runs them, the first three
// per file on several reader threads, the rest once over the whole job:
//
//   ReadFacts         a snapshot's process facts: identity, how it ended,
//                     liveness (snapshot_facts.cc)
//   ScanRecords       its records: the call it is in, collective signatures,
//                     point-to-point traffic, open requests, device work
//                     (record_scan.cc)
//   AttachStacks      the stacks it captured itself, or a dump's newer ones
//                     (stacks_attach.cc)
//   -- merged: one process per rank, chosen by evidence (load.cc) --
//   AddUntracedRanks  ranks a dump found without a trace file
//   FinishStacks      native frames named, Python frames mixed in, the
//                     communication call each rank's stacks show
//   DecideRankStates  each rank's state from its facts, once (rank_state.cc)
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "merger/model.h"
#include "merger/node_dump.h"
#include "merger/trace_reader.h"

namespace hangtrace::load {

// The job the reader threads fill together: names, communicators and frames
// are shared, and taken under `mu`.
struct SharedJob {
  Job* job;
  std::mutex mu;
  // Under mu: interns a name (a call, a kernel).
  uint16_t Intern(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    return job->Intern(name);
  }
};

// A dump folder's node.json, read once, and its processes by pid.
struct FolderDump {
  NodeDump node;
  std::unordered_map<int32_t, size_t> by_pid;  // index into node.processes
  bool read = false;                           // false: none there, or unreadable (a warning says)
};

// What one reader thread found, merged at the end (no lock per record).
struct Partial {
  std::vector<RankView> ranks;
  std::vector<SigWindow> first_sig;
  std::vector<Job::Odd> odd;
  std::vector<std::string> warnings;
  uint64_t records = 0;
  size_t files = 0;
  std::map<std::string, JobFiles> jobs;
  std::map<std::string, RunFiles> runs;
  // The dump of the folder of this worker's last file (NodeDumps).
  std::string dump_folder;
  const FolderDump* dump = nullptr;
};

// The dumps' node.json files of one load, each read once: by the first
// reader thread that meets a trace file in its folder, or by
// AddUntracedRanks for a folder of untraced processes alone.
class NodeDumps {
 public:
  // The dump's record of `pid`, if the file's folder is a dump's. A worker
  // remembers the folder of its last file: files come sorted, so the lock
  // is taken once per folder and worker, not once per file.
  const NodeProcess* Find(const std::string& trace_path, int32_t pid, Partial* out);
  const FolderDump& Of(const std::string& folder);
  std::vector<std::string> warnings;

 private:
  std::mutex mu_;
  std::unordered_map<std::string, FolderDump> dumps_;  // nodes stay where they are
};

// --- ReadFacts ---------------------------------------------------------------------------

// Whether the snapshot is a rank's (not a fork child, an exec'ed image, or a
// process without a rank); what is skipped and why goes to `warnings`.
bool IsRankFile(const TraceSnapshot& s, const std::string& path, std::vector<std::string>* warnings);
// The process facts of a snapshot: identity, how it ended, liveness (the
// dump's photograph of it when `dumped`, else /proc now).
RankView ReadFacts(const TraceSnapshot& s, const std::string& path, const NodeProcess* dumped);

// --- ScanRecords -------------------------------------------------------------------------

// A file's call and communicator indexes as the job's.
struct FileMaps {
  std::vector<uint16_t> calls;  // file call index -> Job::names
  std::vector<uint16_t> matched_as;  // file call index -> the name its collectives match by
  std::vector<int32_t> comms;   // file comm index -> Job::comms (-1: unusable)
  std::vector<uint64_t> since;  // file comm index -> when its communicator took the slot
  // The communicator of a record (Job::comms), -1 none: a record on a
  // reused slot from before its communicator took it was a former one's.
  int32_t CommOf(const fmt::Record& r) const {
    return r.comm < comms.size() && r.ticks >= since[r.comm] ? comms[r.comm] : -1;
  }
};
// Registers the file's calls and communicators in the job (under the lock).
FileMaps MapFile(const TraceSnapshot& s, const std::string& path, int32_t rank, SharedJob* shared,
                 std::vector<std::string>* warnings);
void ScanRecords(const TraceSnapshot& s, const FileMaps& maps, SharedJob* shared, RankView* v, Partial* out);
// The records before each lane's tail (lane i from index tail_from[i]) that
// what ScanRecords finds still depends on: the newest send and receive of
// each point-to-point (comm, peer, tag), the counted ones (wildcard receives,
// persistent sends started), nonblocking requests never completed, device
// work never finished. A compact dump keeps these and the tails
// (trace_compact.cc); collective signatures older than the tails are not
// kept. In time order.
std::vector<const Event*> RecordsScanNeedsBefore(const TraceSnapshot& s, const std::vector<uint64_t>& tail_from);

// --- AttachStacks ------------------------------------------------------------------------

void AttachStacks(const TraceSnapshot& s, const NodeProcess* dumped, SharedJob* shared, RankView* v);

// The ranks of `dump_folders` (FindTraceFiles's) that have no trace file.
void AddUntracedRanks(const std::vector<std::string>& dump_folders, NodeDumps* dumps, Job* job);

// --- DecideRankStates --------------------------------------------------------------------

void DecideRankStates(Job* job);

}  // namespace hangtrace::load
