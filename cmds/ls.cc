// hangtrace ls: the jobs under the trace folder, newest first, with what
// each is doing now and the path to hand to analyze.

#include <CLI/CLI.hpp>
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

int LsCommand(int argc, char** argv) {
  CLI::App app{
      "List the traced jobs under the trace folder, newest first: state (running, hung, stopped,\n"
      "exited, failed, crashed, gone), ranks, hosts, when it started and was last seen, the disk\n"
      "its files take, and the folder to pass to `hangtrace analyze`.\n\n"
      "examples:\n"
      "  hangtrace ls\n"
      "  hangtrace ls /scratch/traces       # a --dir / HANGTRACE_DIR of your own\n",
      "hangtrace ls"};
  std::string root = Config::FromEnvironment().dir;
  app.add_option("dir", root, "the trace folder (default: HANGTRACE_DIR, else /dev/shm/hangtrace-$USER)");
  HT_PARSE(app, argc, argv);

  std::string error;
  std::vector<std::string> warnings;
  std::vector<JobSummary> jobs = ListJobs(root, &error, &warnings);
  for (const std::string& w : warnings) fprintf(stderr, "hangtrace ls: %s\n", w.c_str());
  if (!error.empty()) {
    fprintf(stderr, "hangtrace ls: %s\n", error.c_str());
    return kExitCouldNot;
  }
  if (jobs.empty()) {
    printf("no traced job in %s\n", root.c_str());
    return 0;
  }
  const int64_t now = NowRealNs();
  printf("%-14s %-8s %-22s %-5s %-11s %-11s %-9s %s\n", "JOB", "STATE", "RANKS", "HOSTS", "STARTED", "LAST SEEN",
         "SIZE", "PATH");
  for (const JobSummary& j : jobs) {
    printf("%-14s %-8s %-22s %-5zu %-11s %-11s %-9s %s\n", j.job.c_str(), JobStateName(j.state), RanksBrief(j).c_str(),
           j.hosts.size(), (Ago(now, j.start_real_ns) + " ago").c_str(),
           j.Live() && j.state != JobState::kStopped ? "now" : (Ago(now, j.last_real_ns) + " ago").c_str(),
           ByteSize(j.bytes).c_str(), j.path.c_str());
  }
  printf("\nthe diagnosis of one: hangtrace analyze %s\n", jobs.front().path.c_str());
  if (jobs.size() > 1) printf("remove the finished ones: hangtrace clean\n");
  return 0;
}

}  // namespace hangtrace
