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
    if (trace && fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        unlinkat(dir, name.c_str(), 0) == 0) {
      ++removed;
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
      "  hangtrace clean --job 12345 /scratch/traces   # a trace folder of your own\n",
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
      ->expected(1)
      ->allow_extra_args(false);
  HT_PARSE(app, argc, argv);

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
  for (const std::string& name : only) {
    if (!seen.count(name)) {
      fprintf(stderr, "hangtrace clean: no job '%s' in %s (hangtrace ls lists them)\n", name.c_str(), root.c_str());
      rc = 1;
    }
  }
  if (!dry_run && only.empty()) {
    printf("%zu job(s) removed, %s given back; %zu kept\n", removed_jobs, ByteSize(freed).c_str(),
           jobs.size() - removed_jobs);
  }
  return rc;
}

}  // namespace hangtrace
