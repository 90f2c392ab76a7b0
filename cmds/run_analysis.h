// The one front end of an analysis, for every command that judges a job
// (analyze, srun-dump): read the files (twice with --interval, or an
// earlier look with --earlier), refuse paths that mix jobs, diagnose,
// print, write the optional outputs, and return the documented exit status.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "merger/rank_set.h"

namespace hangtrace {

struct AnalysisRequest {
  const char* command = "hangtrace analyze";  // the prefix of its messages
  std::vector<std::string> paths;             // trace files, job folders, dump folders
  std::string format = "text";                // text or json
  std::string perfetto, dot, graph;           // optional outputs ("" none); .svg renders with Graphviz
  std::string html;                           // the report as one offline page ("" none)
  std::string json;                           // the JSON report also written to this file ("" none)
  bool say_outputs = true;                    // text: a line naming each output written
  double interval = 0;                        // > 0: read twice, this far apart
  std::vector<std::string> earlier;           // an earlier look at the same job (a dump)
  int threads = 0;                            // reader threads (0: all cores)
  std::vector<std::string> user_paths;        // folders of the user's code, beside HANGTRACE_USER_PATHS
  std::vector<std::string> warnings;          // said with the job's own (srun-dump: silent nodes)
  nlohmann::json json_extra;                  // merged into the JSON report (srun-dump: "dump")
  // Only this run of the job (fmt::ProcessInfo::run). Unset, paths that
  // hold several runs are analyzed run by run, newest first (JSON: the
  // newest; the others are named on stderr).
  std::optional<std::string> run;
  // Out, when set: the ranks that moved between the two looks (auto-report
  // decides on it: a round started by a blocked rank says nothing of a job
  // that moves).
  RankSet* progressing = nullptr;
};

// Prints the report on stdout (messages on stderr) and returns the exit
// status: kExitNoHang, kExitFound, kExitCouldNot (also for `unknown`).
int RunAnalysis(const AnalysisRequest& request);

}  // namespace hangtrace
