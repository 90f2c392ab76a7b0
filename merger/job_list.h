// The jobs under a trace folder, in brief: what `hangtrace ls` prints and
// what `hangtrace clean` decides on. Reads each file's header and tables
// only (not the ring), so listing thousands of files stays quick.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace hangtrace {

enum class JobState { kRunning, kHung, kStopped, kExited, kFailed, kCrashed, kGone };
// "running", "hung", "stopped", "exited", "failed", "crashed", "gone".
const char* JobStateName(JobState s);

struct JobSummary {
  std::string path;           // the job's folder: what to pass to analyze
  std::string job;            // its name (the job id)
  std::set<std::string> hosts;
  size_t files = 0;           // readable trace files
  size_t unreadable = 0;
  std::set<int32_t> ranks;    // ranks known from the files
  int32_t world_size = -1;    // the largest world size any file states
  int64_t start_real_ns = 0;  // the earliest process start (0: unknown)
  int64_t last_real_ns = 0;   // the latest sign of life (exit, crash, heartbeat)
  uint64_t bytes = 0;         // disk the files take
  std::string command;        // what was launched: the command of its lowest rank (or first process)
  int32_t command_rank = -1;  // the rank `command` is of (-1: a process without one)
  // Processes by what they are now.
  size_t alive = 0, stopped = 0, exited_ok = 0, exited_failed = 0, crashed = 0, gone = 0;
  size_t flagged = 0;         // live processes with a call the watchdog flagged
  JobState state = JobState::kGone;
  // Where its automatic reports went (report.where in its folder): the
  // report folder is outside the trace folder, often in the launch folder.
  std::string report_folder;
  // Whether any process of the job may still write (alive or stopped here).
  bool Live() const { return alive + stopped > 0; }
};

// Every job folder directly under `root` (a folder of job folders, like
// /dev/shm/hangtrace-$USER), newest first. Links are not followed; folders
// without trace files are left out. What could not be read is described in
// `warnings`; `error` when `root` itself cannot be used.
std::vector<JobSummary> ListJobs(const std::string& root, std::string* error, std::vector<std::string>* warnings);

// The other users' trace folders beside `root` (hangtrace-* in its parent,
// as /dev/shm/hangtrace-$USER has them), for a hint: root's own folder holds
// only root's jobs. With `job`, only those that hold a folder of that job.
std::vector<std::string> TraceFoldersBeside(const std::string& root, const std::string& job = "");

// hangtrace's own files in a job's trace folder beside the trace files:
// the node's round of a run (report.round.RUN), the report helper's log
// (report.log.PID), where the report went (report.where).
bool IsBookkeeping(const std::string& name);

// A folder of automatic reports (hangtrace-report-JOB): its rounds, per run.
struct ReportFolderSummary {
  std::string path;
  std::string job;              // from its name
  size_t runs = 0, rounds = 0;
  int64_t newest_real_ns = 0;   // its newest entry's modification
  uint64_t bytes = 0;
  bool job_live = false;        // a job of that name has a process alive or stopped here
  bool job_known = false;       // a job of that name has a trace folder here
  // Holds only what the automatic report writes (run folders of rounds,
  // markers): a folder renamed to look like one is not taken for one.
  bool looks_like_reports = true;
};

// The report folders of `jobs` (their report.where), and those named
// hangtrace-report-* directly under each folder of `search` (the folders
// jobs were launched from: the current one by default), ours and not links,
// newest first.
std::vector<ReportFolderSummary> ListReportFolders(const std::vector<JobSummary>& jobs,
                                                   const std::vector<std::string>& search,
                                                   std::vector<std::string>* warnings);

// CLOCK_REALTIME now, in ns: what the files' wall-clock facts compare with.
int64_t NowRealNs();

// "12 s", "3 min", "2.5 h", "4 days": how long ago, for people.
std::string Ago(int64_t now_real_ns, int64_t then_real_ns);

}  // namespace hangtrace
