// hangtrace clean: removes the trace folders of jobs that have ended, so
// that /dev/shm (memory) is given back. A job with a process still alive or
// stopped on this machine is never touched: its files are mapped and in use.
#include <fcntl.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cmds/commands.h"
#include "merger/job_list.h"
#include "tracer/config.h"

namespace hangtrace {

std::string ByteSize(uint64_t bytes);  // ls.cc

namespace {

// Removes the *.htrace files in the folder `path` (never through a link,
// never a subfolder), then the folder if nothing else is left. Returns the
// number removed; `left` says what stayed.
int RemoveJobFolder(const std::string& path, std::string* left) {
  int dir = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    *left = "cannot open: " + std::string(strerror(errno));
    return 0;
  }
  DIR* d = fdopendir(dir);
  int removed = 0, kept = 0;
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    names.push_back(name);
  }
  for (const std::string& name : names) {
    struct stat st;
    const bool trace = name.size() > 7 && name.compare(name.size() - 7, 7, ".htrace") == 0;
    if ((trace || IsBookkeeping(name)) && fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(st.st_mode) && unlinkat(dir, name.c_str(), 0) == 0) {
      removed += trace;
    } else {
      ++kept;
    }
  }
  closedir(d);
  if (kept > 0) {
    *left = std::to_string(kept) + " other entr" + (kept == 1 ? "y" : "ies") + " left in place";
  } else if (rmdir(path.c_str()) != 0) {
    *left = "folder not removed: " + std::string(strerror(errno));
  }
  return removed;
}

// Removes what is under the folder `dir` (an open descriptor) and is this
// user's, depth first, never through a link; true when all of it went.
bool RemoveUnder(int dir) {
  DIR* d = fdopendir(dup(dir));
  if (!d) return false;
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
  }
  closedir(d);
  bool all = true;
  for (const std::string& name : names) {
    struct stat st;
    if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid()) {
      all = false;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      const int sub = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      const bool emptied = sub >= 0 && RemoveUnder(sub);
      if (sub >= 0) close(sub);
      all &= emptied && unlinkat(dir, name.c_str(), AT_REMOVEDIR) == 0;
    } else {
      all &= unlinkat(dir, name.c_str(), 0) == 0;  // a link itself, never what it points to
    }
  }
  return all;
}

// Removes a report folder (hangtrace-report-JOB: its runs, rounds, dumps
// and reports), never through a link and only what is ours; what stayed is
// said in `left`.
bool RemoveReportFolder(const std::string& path, std::string* left) {
  const int dir = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    *left = "cannot open: " + std::string(strerror(errno));
    return false;
  }
  const bool all = RemoveUnder(dir);
  close(dir);
  if (!all) *left = "entries of another user, or that could not be removed, left in place";
  else if (rmdir(path.c_str()) != 0) *left = "folder not removed: " + std::string(strerror(errno));
  return left->empty();
}

}  // namespace

int CleanCommand(int argc, char** argv) {
  CLI::App app{
      "Remove the trace folders of jobs that have ended (exited, failed, crashed or gone), giving\n"
      "their memory in /dev/shm back. Jobs with a process still alive or stopped on this machine\n"
      "are kept. Analyze a job before you clean it: its files are its only record.\n\n"
      "examples:\n"
      "  hangtrace clean -n                   # what would go\n"
      "  hangtrace clean --older-than 3600    # ended jobs last seen over an hour ago\n"
      "  hangtrace clean --job 12345\n"
      "  hangtrace clean --job 12345 /scratch/traces   # a trace folder of your own\n\n"
      "The automatic report's folders (hangtrace-report-JOB, in the folder a job was launched\n"
      "from) go with their jobs: the one each job's trace folder names, and those found in the\n"
      "current folder (--reports names others). One whose job this machine knows nothing of (it\n"
      "may run on other nodes) goes only when named: hangtrace clean --job JOB.\n",
      "hangtrace clean"};
  std::string root = ExpandUser(Config::FromEnvironment().dir);
  bool dry_run = false;
  double older_than = 0;
  std::vector<std::string> only;
  app.add_option("dir", root, "the trace folder (default: HANGTRACE_DIR, else /dev/shm/hangtrace-$USER)");
  app.add_flag("-n,--dry-run", dry_run, "say what would be removed, remove nothing");
  app.add_option("--older-than", older_than, "only jobs last seen at least this many seconds ago")
      ->check(Seconds());
  app.add_option("-j,--job", only, "only this job (by name, as `hangtrace ls` lists it); repeat for more")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  std::vector<std::string> search;
  app.add_option("--reports", search,
                 "look for report folders (hangtrace-report-*) here (default: the current folder); repeat for more")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  HT_PARSE(app, argc, argv);
  if (search.empty()) search.push_back(".");

  std::string error;
  std::vector<std::string> warnings;
  std::vector<JobSummary> jobs = ListJobs(root, &error, &warnings);
  for (const std::string& w : warnings) fprintf(stderr, "hangtrace clean: %s\n", w.c_str());
  if (!error.empty()) {
    fprintf(stderr, "hangtrace clean: %s\n", error.c_str());
    return kExitCouldNot;
  }
  const int64_t now = NowRealNs();
  int rc = 0;
  size_t removed_jobs = 0;
  uint64_t freed = 0;
  std::set<std::string> seen;
  for (const JobSummary& j : jobs) {
    if (!only.empty() && std::find(only.begin(), only.end(), j.job) == only.end()) continue;
    seen.insert(j.job);
    if (j.Live()) {
      if (!only.empty()) {
        fprintf(stderr, "hangtrace clean: kept %s: %s, %zu process(es) alive or stopped\n", j.job.c_str(),
                JobStateName(j.state), j.alive + j.stopped);
        rc = 1;
      }
      continue;
    }
    if (double(now - j.last_real_ns) / 1e9 < older_than) continue;
    if (dry_run) {
      printf("would remove %s (%s, %zu files, %s)\n", j.path.c_str(), JobStateName(j.state), j.files + j.unreadable,
             ByteSize(j.bytes).c_str());
      continue;
    }
    std::string left;
    int n = RemoveJobFolder(j.path, &left);
    printf("removed %s (%s, %d files, %s)%s\n", j.path.c_str(), JobStateName(j.state), n, ByteSize(j.bytes).c_str(),
           left.empty() ? "" : ("; " + left).c_str());
    ++removed_jobs;
    freed += j.bytes;
  }
  // The report folders: with their job when it ended here; a job this
  // machine knows nothing of may run elsewhere, so its folder goes only
  // once untouched for an hour.
  size_t removed_reports = 0;
  for (const ReportFolderSummary& r : ListReportFolders(jobs, search, &warnings)) {
    if (!only.empty() && std::find(only.begin(), only.end(), r.job) == only.end()) continue;
    seen.insert(r.job);
    if (r.job_live) continue;
    // A job this machine knows nothing of may run on other nodes still:
    // its reports go only when it is named.
    const bool named = !only.empty();
    if (!r.job_known && !named) continue;
    if (double(now - r.newest_real_ns) / 1e9 < older_than) continue;
    if (std::filesystem::path(r.path).filename().string().rfind("hangtrace-report-", 0) != 0) {
      fprintf(stderr, "hangtrace clean: kept %s: a report folder HANGTRACE_REPORT_DIR named, not one hangtrace made\n",
              r.path.c_str());
      continue;
    }
    if (!r.looks_like_reports) {
      fprintf(stderr, "hangtrace clean: kept %s: it holds more than the automatic report writes (not a report folder)\n",
              r.path.c_str());
      rc = 1;
      continue;
    }
    if (dry_run) {
      printf("would remove %s (reports of job %s, %zu round(s), %s)\n", r.path.c_str(), r.job.c_str(), r.rounds,
             ByteSize(r.bytes).c_str());
      continue;
    }
    std::string left;
    RemoveReportFolder(r.path, &left);
    printf("removed %s (reports of job %s, %zu round(s), %s)%s\n", r.path.c_str(), r.job.c_str(), r.rounds,
           ByteSize(r.bytes).c_str(), left.empty() ? "" : ("; " + left).c_str());
    ++removed_reports;
    freed += r.bytes;
  }
  for (const std::string& name : only) {
    if (!seen.count(name)) {
      fprintf(stderr, "hangtrace clean: no job '%s' in %s (hangtrace ls lists them)\n", name.c_str(), root.c_str());
      rc = 1;
    }
  }
  if (!dry_run && only.empty()) {
    printf("%zu job(s) and %zu report folder(s) removed, %s given back; %zu job(s) kept\n", removed_jobs,
           removed_reports, ByteSize(freed).c_str(), jobs.size() - removed_jobs);
  }
  return rc;
}

}  // namespace hangtrace
