// hangtrace analyze: the diagnosis of a job from its trace files.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "cmds/commands.h"
#include "cmds/run_analysis.h"
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
      "  hangtrace analyze traces/ --html report.html    # one page to browse, offline\n"
      "  hangtrace analyze traces/ --graph waits.svg --dot stacks.svg --perfetto job.json\n"
      "  hangtrace analyze /dev/shm/hangtrace-$USER/12345/ --interval 5    # live: slow, or hung?\n"
      "  hangtrace analyze dump2/ --earlier dump1/   # two dumps, seconds apart: slow, or hung?\n"
      "  hangtrace analyze                    # the only job in the trace folder (hangtrace ls)\n\n"
      "A folder that holds several runs of one job id (concurrent srun steps, a rerun) is analyzed\n"
      "run by run, newest first; --run picks one.\n\n"
      "verdicts: hang, deadlock, mismatch, crash, no-hang (with evidence: every rank exited, moved,\n"
      "or computes), unknown (the evidence cannot decide; the report says what would).\n\n"
      "exit status: 0 no hang, 3 a hang, deadlock, mismatch or crash found, 1 could not analyze\n"
      "(nothing readable, several jobs mixed) or unknown, 2 usage error\n",
      "hangtrace analyze"};
  std::vector<std::string> paths;
  std::vector<std::string> earlier;
  std::string format = "text", perfetto, dot, graph;
  double interval = 0;
  int threads = 0;
  app.add_option("path", paths, "trace files, or folders holding them (default: the only job in the trace folder)")
      ->expected(-1);
  app.add_option("-f,--format", format, "text (default) or json (schema hangtrace.analysis/1)")
      ->check(CLI::IsMember({"text", "json"}));
  std::string html;
  app.add_option("--html", html,
                 "also write the report as one web page that opens offline: verdict, classes, who waits for whom, "
                 "merged stacks, last calls, a timeline");
  app.add_option("--perfetto", perfetto, "also write a Perfetto/Chrome trace: one track per rank and thread");
  app.add_option("--graph", graph,
                 "also write the wait-for graph: classes of ranks, who waits for whom, culprits and cycles in red "
                 "(Graphviz DOT; F.svg renders it when Graphviz is installed)");
  app.add_option("--dot", dot,
                 "also write the merged stack tree (Graphviz DOT, or F.svg), when stacks were captured");
  app.add_option("--interval", interval,
                 "read the files twice, this many seconds apart: ranks whose sequence numbers moved are "
                 "slow, not hung (for a job that is still running)")
      ->check(Seconds());
  app.add_option("--earlier", earlier,
                 "an earlier look at the same job (a dump taken a few seconds before): ranks that moved "
                 "since are slow, not hung (for a dump, which --interval cannot read twice)")
      ->expected(1, -1);
  app.add_option("--threads", threads, "reader threads (default: all cores)");
  std::string run;
  app.add_option("--run", run,
                 "only this run of the job (files of several runs under one job id, as concurrent srun steps "
                 "or a rerun leave, are otherwise analyzed run by run, newest first)");
  std::vector<std::string> user_paths;
  app.add_option("--user-path", user_paths,
                 "a folder of your program's own code (repeat it; HANGTRACE_USER_PATHS too): a rank's place is "
                 "the innermost frame of your code, and by default frames under site-packages, dist-packages "
                 "or the system's folders are libraries'");
  HT_PARSE(app, argc, argv);

  if (paths.empty()) {
    // No path: the trace folder's only job; with several, which one is asked.
    const std::string root = ExpandUser(Config::FromEnvironment().dir);
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

  AnalysisRequest request;
  request.paths = paths;
  request.format = format;
  request.perfetto = perfetto;
  request.dot = dot;
  request.graph = graph;
  request.html = html;
  request.interval = interval;
  request.earlier = earlier;
  request.threads = threads;
  request.user_paths = user_paths;
  if (app.count("--run")) request.run = run;
  return RunAnalysis(request);
}

}  // namespace hangtrace
