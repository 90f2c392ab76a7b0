#include "merger/job_list.h"

#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "merger/node_dump.h"
#include "merger/trace_reader.h"

namespace hangtrace {
namespace fs = std::filesystem;

int64_t NowRealNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kRunning: return "running";
    case JobState::kHung: return "hung";
    case JobState::kStopped: return "stopped";
    case JobState::kExited: return "exited";
    case JobState::kFailed: return "failed";
    case JobState::kCrashed: return "crashed";
    case JobState::kGone: return "gone";
  }
  return "?";
}

namespace {

void AddFile(JobSummary* j, const TraceSnapshot& s) {
  const fmt::ProcessInfo& p = s.process;
  ++j->files;
  j->hosts.insert(BoundedString(p.host, sizeof(p.host)));
  // What launched the job, told by its lowest rank's command line.
  if (j->command.empty() || (p.rank >= 0 && (j->command_rank < 0 || p.rank < j->command_rank))) {
    j->command = BoundedString(p.cmdline[0] ? p.cmdline : p.exe, p.cmdline[0] ? sizeof(p.cmdline) : sizeof(p.exe));
    j->command_rank = p.rank;
  }
  if (p.rank >= 0) j->ranks.insert(p.rank);
  j->world_size = std::max(j->world_size, p.world_size);
  // Wall-clock facts of the file itself, not converted ticks (a process
  // that ended before its clock was calibrated has only raw ticks).
  const int64_t start = p.clock.ref_real_ns;  // taken when the runtime started
  if (start > 0 && (j->start_real_ns == 0 || start < j->start_real_ns)) j->start_real_ns = start;
  int64_t last = int64_t(p.heartbeat_real_ns);
  if (p.end_ticks != 0 && p.clock.ticks_hz != 0) last = std::max(last, s.TicksToRealNs(p.end_ticks));
  j->last_real_ns = std::max(j->last_real_ns, last);

  const auto state = fmt::ProcState(p.state);
  if (state == fmt::ProcState::kExeced) return;  // its successor has a file of its own
  if (state == fmt::ProcState::kExited) {
    (p.exit_code == 0 ? j->exited_ok : j->exited_failed) += 1;
    return;
  }
  if (state == fmt::ProcState::kCrashed) {
    ++j->crashed;
    return;
  }
  switch (ProcessLiveness(s)) {
    case Liveness::kRunning: {
      ++j->alive;
      for (const ThreadInfo& t : s.threads) j->flagged += t.in_call && t.watchdog_flagged;
      return;
    }
    case Liveness::kStopped:
      ++j->stopped;
      return;
    case Liveness::kUnknown: {
      // Written on another machine or before a reboot: judged by its heartbeat.
      const double silent_s = double(NowRealNs() - last) / 1e9;
      (silent_s < kHeartbeatStaleSeconds ? j->alive : j->gone) += 1;
      return;
    }
    case Liveness::kZombie:
    case Liveness::kGone:
      ++j->gone;  // no exit record: killed
      return;
  }
}

JobState Decide(const JobSummary& j) {
  if (j.alive > 0) return j.flagged > 0 ? JobState::kHung : JobState::kRunning;
  if (j.stopped > 0) return JobState::kStopped;
  if (j.crashed > 0) return JobState::kCrashed;
  if (j.gone > 0) return JobState::kGone;
  if (j.exited_failed > 0) return JobState::kFailed;
  return JobState::kExited;
}

}  // namespace

std::vector<JobSummary> ListJobs(const std::string& root, std::string* error, std::vector<std::string>* warnings) {
  std::vector<JobSummary> jobs;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(root, ec);
  if (ec || !fs::exists(st)) {
    *error = root + " does not exist (no job has been traced here yet)";
    return jobs;
  }
  if (!fs::is_directory(st)) {
    *error = root + " is not a folder";
    return jobs;
  }
  fs::directory_iterator it(root, ec), end;
  if (ec) {
    *error = "cannot read " + root + ": " + ec.message();
    return jobs;
  }
  const FolderTrust trust(root);
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    std::error_code e2;
    if (!fs::is_directory(it->symlink_status(e2))) continue;  // files, links: not job folders
    if (const std::string why = trust.Distrust(it->path().string()); !why.empty()) {
      if (warnings) warnings->push_back(why);
      continue;
    }
    JobSummary j;
    j.path = it->path().string();
    j.job = it->path().filename().string();
    std::string err;
    std::vector<std::string> skipped;
    for (const std::string& file : FindTraceFiles(j.path, &err, &skipped)) {
      std::string why;
      auto s = ReadTraceFile(file, &why, {.events = false});
      if (s) {
        AddFile(&j, *s);
        struct stat fst;  // what it takes, not its (sparse) length
        if (lstat(file.c_str(), &fst) == 0) j.bytes += uint64_t(fst.st_blocks) * 512;
      } else {
        ++j.unreadable;
        if (warnings) warnings->push_back(why);
      }
    }
    if (warnings) warnings->insert(warnings->end(), skipped.begin(), skipped.end());
    bool bookkeeping = false;
    for (const auto& e : fs::directory_iterator(j.path, e2)) {
      bookkeeping |= e.is_regular_file(e2) && IsBookkeeping(e.path().filename().string());
    }
    if (std::ifstream where(j.path + "/report.where"); where) std::getline(where, j.report_folder);
    // A folder with hangtrace's own files only (the job's trace files
    // removed, or never written: a job whose report round is all that is
    // left) is listed, so that clean can take it.
    if (j.files + j.unreadable == 0 && !bookkeeping) continue;
    // A dump written into the trace folder is no job (its snapshots are
    // photographs of one): left out, and said.
    if (!FindNodeDumps(j.path).empty()) {
      if (warnings) warnings->push_back(j.path + " is a dump (node.json), not a job: hangtrace analyze " + j.path);
      continue;
    }
    j.state = Decide(j);
    jobs.push_back(std::move(j));
  }
  std::sort(jobs.begin(), jobs.end(), [](const JobSummary& a, const JobSummary& b) {
    return a.start_real_ns != b.start_real_ns ? a.start_real_ns > b.start_real_ns : a.job < b.job;
  });
  return jobs;
}

std::vector<std::string> TraceFoldersBeside(const std::string& root, const std::string& job) {
  std::vector<std::string> out;
  const fs::path path = fs::path(root).lexically_normal();
  const fs::path me = path.has_filename() ? path : path.parent_path();
  if (me.filename().string().rfind("hangtrace-", 0) != 0) return out;
  std::error_code ec;
  for (fs::directory_iterator it(me.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code e2;
    if (name.rfind("hangtrace-", 0) != 0 || it->path() == me || name.rfind("hangtrace-tests-", 0) == 0 ||
        !it->is_directory(e2) || it->is_symlink(e2)) {
      continue;
    }
    if (!job.empty() && !fs::is_directory(it->path() / job, e2)) continue;
    out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool IsBookkeeping(const std::string& name) {
  return name.rfind("report.round", 0) == 0 || name.rfind("report.log.", 0) == 0 || name == "report.where";
}

std::vector<ReportFolderSummary> ListReportFolders(const std::vector<JobSummary>& jobs,
                                                   const std::vector<std::string>& search,
                                                   std::vector<std::string>* warnings) {
  std::set<std::string> paths;
  for (const JobSummary& j : jobs) {
    if (!j.report_folder.empty()) paths.insert(j.report_folder);
  }
  for (const std::string& dir : search) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->path().filename().string().rfind("hangtrace-report-", 0) == 0) {
        paths.insert(fs::absolute(it->path(), ec).lexically_normal().string());
      }
    }
  }
  std::vector<ReportFolderSummary> out;
  for (const std::string& path : paths) {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;  // recorded, and removed since
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
      if (warnings) warnings->push_back(path + " is not a folder of this user's: left alone");
      continue;
    }
    ReportFolderSummary r;
    r.path = path;
    const std::string name = fs::path(path).filename().string();
    r.job = name.rfind("hangtrace-report-", 0) == 0 ? name.substr(17) : name;
    r.newest_real_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(path, fs::directory_options::none, ec), end; !ec && it != end;
         it.increment(ec)) {
      struct stat e;
      if (lstat(it->path().c_str(), &e) != 0) continue;
      r.bytes += uint64_t(e.st_blocks) * 512;
      r.newest_real_ns = std::max(r.newest_real_ns, int64_t(e.st_mtim.tv_sec) * 1000000000 + e.st_mtim.tv_nsec);
      const std::string entry = it->path().filename().string();
      const bool round = S_ISDIR(e.st_mode) && entry.rfind("round-", 0) == 0;
      const bool marker = S_ISREG(e.st_mode) && (entry == "round.started" || entry == "slow.said" ||
                                                 entry.rfind(".round.started", 0) == 0);
      if (it.depth() == 0) {
        // A run's folder, or (older layout) a round or a marker.
        if (S_ISDIR(e.st_mode) && !round) ++r.runs;
        else if (round) ++r.rounds;
        else if (!marker) r.looks_like_reports = false;
      } else if (it.depth() == 1 && it->path().parent_path().filename().string().rfind("round-", 0) != 0) {
        if (round) ++r.rounds;
        else if (!marker) r.looks_like_reports = false;
      }
    }
    for (const JobSummary& j : jobs) {
      r.job_live |= j.job == r.job && j.Live();
      r.job_known |= j.job == r.job;
    }
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const ReportFolderSummary& a, const ReportFolderSummary& b) {
    return a.newest_real_ns != b.newest_real_ns ? a.newest_real_ns > b.newest_real_ns : a.path < b.path;
  });
  return out;
}

std::string Ago(int64_t now_real_ns, int64_t then_real_ns) {
  if (then_real_ns <= 0) return "?";
  const double s = std::max(0.0, double(now_real_ns - then_real_ns) / 1e9);
  char buf[32];
  if (s < 120) snprintf(buf, sizeof(buf), "%.0f s", s);
  else if (s < 7200) snprintf(buf, sizeof(buf), "%.0f min", s / 60);
  else if (s < 172800) snprintf(buf, sizeof(buf), "%.1f h", s / 3600);
  else snprintf(buf, sizeof(buf), "%.0f days", s / 86400);
  return buf;
}

}  // namespace hangtrace
