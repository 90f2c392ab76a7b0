// hangtrace analyze: the diagnosis of a job from its trace files.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "cmds/commands.h"
#include "merger/diagnose.h"
#include "merger/job_list.h"
#include "merger/report.h"
#include "tracer/config.h"

namespace hangtrace {

int AnalyzeCommand(int argc, char** argv) {
  CLI::App app{
      "Read the trace files of a job (folders of *.htrace, or files) and say which ranks sit in\n"
      "which call on which communicator, who they wait for, and who caused it. The first lines\n"
      "are the verdict and the culprits; classes, mismatches, cycles and merged stacks follow.\n\n"
      "examples:\n"
      "  hangtrace analyze /dev/shm/hangtrace-$USER/12345/\n"
      "  hangtrace analyze traces/ --format json > report.json\n"
      "  hangtrace analyze traces/ --perfetto job.json --dot stacks.dot   # ui.perfetto.dev, graphviz\n"
      "  hangtrace analyze /dev/shm/hangtrace-$USER/12345/ --interval 5    # live: slow, or hung?\n"
      "  hangtrace analyze                    # the only job in the trace folder (hangtrace ls)\n\n"
      "exit status: 0 no hang, 3 a hang, deadlock, mismatch or crash found, 1 could not analyze\n"
      "(nothing readable, several jobs mixed), 2 usage error\n",
      "hangtrace analyze"};
  std::vector<std::string> paths;
  std::string format = "text", perfetto, dot;
  double interval = 0;
  int threads = 0;
  app.add_option("path", paths, "trace files, or folders holding them (default: the only job in the trace folder)")
      ->expected(-1);
  app.add_option("-f,--format", format, "text (default) or json (schema hangtrace.analysis/1)")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--perfetto", perfetto, "also write a Perfetto/Chrome trace: one track per rank and thread");
  app.add_option("--dot", dot, "also write the merged stack tree as Graphviz DOT (when stacks were captured)");
  app.add_option("--interval", interval,
                 "read the files twice, this many seconds apart: ranks whose sequence numbers moved are "
                 "slow, not hung (for a job that is still running)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", threads, "reader threads (default: all cores)");
  HT_PARSE(app, argc, argv);

  if (paths.empty()) {
    // No path: the trace folder's only job; with several, which one is asked.
    const std::string root = Config::FromEnvironment().dir;
    std::string error;
    std::vector<JobSummary> jobs = ListJobs(root, &error, nullptr);
    if (!error.empty() || jobs.empty()) {
      fprintf(stderr, "hangtrace analyze: no path given, and %s\n",
              error.empty() ? ("no traced job in " + root).c_str() : error.c_str());
      return kExitUsage;
    }
    if (jobs.size() > 1) {
      fprintf(stderr, "hangtrace analyze: no path given, and %s holds %zu jobs; name one:\n", root.c_str(),
              jobs.size());
      for (const JobSummary& j : jobs) {
        fprintf(stderr, "  hangtrace analyze %s    # %s, %zu files\n", j.path.c_str(), JobStateName(j.state), j.files);
      }
      return kExitUsage;
    }
    paths.push_back(jobs.front().path);
    if (format == "text") fprintf(stderr, "hangtrace analyze: the only job in %s: %s\n", root.c_str(), paths[0].c_str());
  }

  LoadOptions opts;
  opts.threads = threads;
  // A progress line on a terminal, once reading takes over a second.
  const auto started = std::chrono::steady_clock::now();
  bool progress_shown = false;
  if (isatty(STDERR_FILENO)) {
    opts.progress = [&](size_t done, size_t total) {
      if (std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) return;
      fprintf(stderr, "\rhangtrace analyze: read %zu of %zu trace files", done, total);
      progress_shown = true;
    };
  }
  Job earlier;
  if (interval > 0) {
    earlier = LoadJob(paths, opts);
    if (format == "text") fprintf(stderr, "hangtrace analyze: read %zu files; reading again in %.1f s\n", earlier.files, interval);
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
  }
  Job job = LoadJob(paths, opts);
  if (progress_shown) fprintf(stderr, "\rhangtrace analyze: read %zu trace files in %.1f s\n", job.files,
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  const bool any_rank = std::any_of(job.ranks.begin(), job.ranks.end(),
                                    [](const RankView& v) { return v.state != RankState::kMissing; });
  if (job.files == 0 && !any_rank) {
    for (const std::string& w : job.warnings) fprintf(stderr, "hangtrace analyze: %s\n", w.c_str());
    fprintf(stderr, "hangtrace analyze: no readable trace file under the given paths\n");
    return kExitCouldNot;
  }
  if (job.jobs.size() > 1) {
    // Ranks and sequence numbers of different jobs mean nothing together.
    fprintf(stderr, "hangtrace analyze: these paths hold the files of %zu jobs; analyze one job at a time:\n",
            job.jobs.size());
    for (const auto& [id, f] : job.jobs) {
      const std::string folder = f.example.substr(0, f.example.rfind('/'));
      fprintf(stderr, "  job %-16s %zu file(s), e.g. in %s\n", id.empty() ? "(none)" : id.c_str(), f.files,
              folder.c_str());
    }
    return kExitCouldNot;
  }
  Diagnosis d = Diagnose(job, interval > 0 ? &earlier : nullptr);
  if (format == "json") {
    printf("%s\n", JsonText(JsonReport(job, d), 2).c_str());
  } else {
    const std::string report = TextReport(job, d);
    fputs((ColorWanted(STDOUT_FILENO) ? Colorize(report) : report).c_str(), stdout);
  }
  int rc = d.verdict == Verdict::kNoHang ? kExitNoHang : kExitFound;
  if (!perfetto.empty()) {
    std::string err;
    if (WritePerfetto(paths, perfetto, &err)) {
      if (format == "text") printf("\nPerfetto trace: %s (open in https://ui.perfetto.dev)\n", perfetto.c_str());
    } else {
      fprintf(stderr, "hangtrace analyze: %s\n", err.c_str());
      rc = kExitCouldNot;
    }
  }
  if (!dot.empty()) {
    if (!HasStacks(job)) {
      fprintf(stderr, "hangtrace analyze: no stacks in these traces; %s not written\n", dot.c_str());
    } else {
      std::ofstream(dot) << StackTreeDot(MergeStacks(job));
      if (format == "text") printf("stack tree: %s (dot -Tsvg %s > stacks.svg)\n", dot.c_str(), dot.c_str());
    }
  }
  return rc;
}

}  // namespace hangtrace
