// hangtrace ls: the jobs under the trace folder, newest first, with what
// each is doing now and the path to hand to analyze.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "cmds/commands.h"
#include "merger/job_list.h"
#include "merger/rank_set.h"
#include "tracer/config.h"

namespace hangtrace {

std::string ByteSize(uint64_t bytes) {
  char buf[32];
  if (bytes < (1u << 20)) snprintf(buf, sizeof(buf), "%.0f KiB", double(bytes) / 1024);
  else if (bytes < (1ull << 30)) snprintf(buf, sizeof(buf), "%.1f MiB", double(bytes) / (1 << 20));
  else snprintf(buf, sizeof(buf), "%.1f GiB", double(bytes) / (1ull << 30));
  return buf;
}

std::string RanksBrief(const JobSummary& j) {
  if (j.ranks.empty()) return std::to_string(j.files) + (j.files == 1 ? " process" : " processes");
  RankSet set;
  for (int32_t r : j.ranks) set.Add(r);
  std::string text = set.Brief(24);
  if (j.world_size > 0) text += " of " + std::to_string(j.world_size);
  return text;
}

// The automatic report's folders of these jobs and of the folders
// searched: where each is, its rounds, and whether its job still runs here.
void PrintReportFolders(const std::vector<JobSummary>& jobs, const std::vector<std::string>& search, int64_t now) {
  // Another user's report folders here are theirs to list: not said.
  const std::vector<ReportFolderSummary> reports = ListReportFolders(jobs, search, nullptr);
  if (reports.empty()) return;
  printf("\nreport folders (the automatic report's; hangtrace clean removes those of ended jobs):\n");
  size_t width = 3;
  for (const ReportFolderSummary& r : reports) width = std::max(width, r.job.size());
  for (const ReportFolderSummary& r : reports) {
    printf("  %-*s  %-11s  %2zu round(s)  last %7s ago  %8s  %s\n", int(width), r.job.c_str(),
           r.job_live ? "job running" : r.job_known ? "job ended" : "job unknown", r.rounds,
           Ago(now, r.newest_real_ns).c_str(), ByteSize(r.bytes).c_str(), r.path.c_str());
  }
}

int LsCommand(int argc, char** argv) {
  CLI::App app{
      "List the traced jobs under the trace folder, newest first: state, ranks, hosts, when it\n"
      "started and was last seen, the disk its files take, and the folder to pass to\n"
      "`hangtrace analyze`. States: running (a process alive), hung (alive, with a call the\n"
      "watchdog flagged), stopped (a process in state T), exited (every process exited 0),\n"
      "failed (every process ended, one with a nonzero status), crashed (a fatal signal was\n"
      "recorded), gone (a process vanished without an exit record: killed).\n\n"
      "examples:\n"
      "  hangtrace ls\n"
      "  hangtrace ls /scratch/traces       # a --dir / HANGTRACE_DIR of your own\n",
      "hangtrace ls"};
  std::string root = ExpandUser(Config::FromEnvironment().dir);
  app.add_option("dir", root, "the trace folder (default: HANGTRACE_DIR, else /dev/shm/hangtrace-$USER)");
  std::vector<std::string> search;
  app.add_option("--reports", search,
                 "also list the report folders (hangtrace-report-*) here (default: the current folder); repeat for "
                 "more")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  HT_PARSE(app, argc, argv);
  if (search.empty()) search.push_back(".");

  std::string error;
  std::vector<std::string> warnings;
  std::vector<JobSummary> jobs = ListJobs(root, &error, &warnings);
  for (const std::string& w : warnings) fprintf(stderr, "hangtrace ls: %s\n", w.c_str());
  if (!error.empty()) {
    fprintf(stderr, "hangtrace ls: %s\n", error.c_str());
    return kExitCouldNot;
  }
  const int64_t now = NowRealNs();
  // Each user's jobs are in a folder of their own, and root's holds root's:
  // root is told where the others are (it may read them).
  auto others = [&] {
    if (geteuid() != 0) return;
    for (const std::string& other : TraceFoldersBeside(root)) {
      printf("another user's trace folder: %s (hangtrace ls %s)\n", other.c_str(), other.c_str());
    }
  };
  if (jobs.empty()) {
    printf("no traced job in %s\n", root.c_str());
    others();
    PrintReportFolders(jobs, search, now);
    return 0;
  }
  // Columns as wide as their widest entry (a long job name or rank list
  // must not push the others out of line).
  // The command that was launched, shortened: its program's name and the
  // first arguments (job ids are opaque numbers; this says which is which).
  auto command = [](const std::string& cmdline) {
    std::string text = cmdline;
    const size_t space = text.find(' ');
    const size_t slash = text.rfind('/', space);
    if (slash != std::string::npos) text = text.substr(slash + 1);
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return text.empty() ? std::string("?") : text;
  };
  struct Row {
    std::string job, state, ranks, hosts, started, seen, size, cmd, path;
  };
  std::vector<Row> rows = {{"JOB", "STATE", "RANKS", "HOSTS", "STARTED", "LAST SEEN", "SIZE", "COMMAND", "PATH"}};
  for (const JobSummary& j : jobs) {
    rows.push_back({j.job, JobStateName(j.state), RanksBrief(j), std::to_string(j.hosts.size()),
                    Ago(now, j.start_real_ns) + " ago",
                    j.Live() && j.state != JobState::kStopped ? "now" : Ago(now, j.last_real_ns) + " ago",
                    ByteSize(j.bytes), command(j.command), j.path});
  }
  size_t w[8] = {};
  for (const Row& r : rows) {
    const std::string* f[8] = {&r.job, &r.state, &r.ranks, &r.hosts, &r.started, &r.seen, &r.size, &r.cmd};
    for (int i = 0; i < 8; ++i) w[i] = std::max(w[i], f[i]->size());
  }
  for (const Row& r : rows) {
    printf("%-*s  %-*s  %-*s  %-*s  %-*s  %-*s  %-*s  %-*s  %s\n", int(w[0]), r.job.c_str(), int(w[1]),
           r.state.c_str(), int(w[2]), r.ranks.c_str(), int(w[3]), r.hosts.c_str(), int(w[4]), r.started.c_str(),
           int(w[5]), r.seen.c_str(), int(w[6]), r.size.c_str(), int(w[7]), r.cmd.c_str(), r.path.c_str());
  }
  // What to do next, for the newest job: analyze a job of ranks; a job of
  // processes without a rank has nothing to diagnose across ranks.
  const JobSummary& newest = jobs.front();
  if (!newest.ranks.empty()) printf("\nthe diagnosis of one: hangtrace analyze %s\n", newest.path.c_str());
  else printf("\nits processes have no rank: hangtrace inspect %s\n", newest.path.c_str());
  const bool named = app.count("dir") > 0;
  if (jobs.size() > 1) printf("remove the finished ones: hangtrace clean%s\n", named ? (" " + root).c_str() : "");
  others();
  PrintReportFolders(jobs, search, now);
  return 0;
}

}  // namespace hangtrace
