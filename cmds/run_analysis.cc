#include "cmds/run_analysis.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "cmds/commands.h"
#include "merger/diagnose.h"
#include "merger/node_dump.h"
#include "merger/pictures.h"
#include "merger/report.h"

namespace hangtrace {
namespace {

// Whether any path is (or holds) a dump: a photograph, which does not move.
bool HoldsDump(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) {
    if (!FindNodeDumps(p).empty()) return true;
    std::string err;
    for (const std::string& f : FindTraceFiles(p, &err)) {
      if (!FindNodeDumps(f.substr(0, f.find_last_of('/'))).empty()) return true;
    }
  }
  return false;
}

// Writes `text` to a new file `path` (or replaces one of ours); false with
// the reason in `error`.
bool WriteText(const std::string& path, const std::string& text, std::string* error) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    *error = "cannot write " + path + ": " + strerror(errno);
    return false;
  }
  const bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  if (fclose(f) != 0 || !ok) {
    *error = "error writing " + path + ": " + strerror(errno);
    return false;
  }
  return true;
}

// The documented exit status of a verdict.
int ExitStatusOf(Verdict v) {
  switch (v) {
    case Verdict::kNoHang: return kExitNoHang;
    case Verdict::kUnknown: return kExitCouldNot;
    default: return kExitFound;
  }
}

}  // namespace

int RunAnalysis(const AnalysisRequest& r) {
  const char* cmd = r.command;
  const bool text = r.format == "text";
  // A dump's node.json given as a path: the dump is its folder.
  for (const std::string& p : r.paths) {
    const size_t slash = p.find_last_of('/');
    if (p.substr(slash == std::string::npos ? 0 : slash + 1) == kNodeFile) {
      const std::string folder = slash == std::string::npos ? "." : p.substr(0, slash);
      fprintf(stderr, "%s: %s is a dump's record of its node; pass the dump's folder: %s %s\n", cmd, p.c_str(), cmd,
              folder.c_str());
      return kExitUsage;
    }
  }
  if (r.interval > 0 && HoldsDump(r.paths)) {
    fprintf(stderr,
            "%s: --interval reads the files twice, but a dump is a photograph: it does not move.\n"
            "  Dump again a few seconds later and give both: %s NEW_DUMP --earlier OLD_DUMP\n",
            cmd, cmd);
    return kExitUsage;
  }
  LoadOptions opts;
  opts.threads = r.threads;
  // A progress line on a terminal, once reading takes over a second.
  const auto started = std::chrono::steady_clock::now();
  bool progress_shown = false;
  if (isatty(STDERR_FILENO)) {
    opts.progress = [&](size_t done, size_t total) {
      if (std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) return;
      fprintf(stderr, "\r%s: read %zu of %zu trace files", cmd, done, total);
      progress_shown = true;
    };
  }
  Job earlier;
  const bool compare = r.interval > 0 || !r.earlier.empty();
  if (!r.earlier.empty()) {
    earlier = LoadJob(r.earlier, opts);
  } else if (r.interval > 0) {
    earlier = LoadJob(r.paths, opts);
    if (text) fprintf(stderr, "%s: read %zu files; reading again in %.1f s\n", cmd, earlier.files, r.interval);
    std::this_thread::sleep_for(std::chrono::duration<double>(r.interval));
  }
  Job job = LoadJob(r.paths, opts);
  if (progress_shown) {
    fprintf(stderr, "\r%s: read %zu trace files in %.1f s\n", cmd, job.files,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  job.warnings.insert(job.warnings.end(), r.warnings.begin(), r.warnings.end());
  const bool any_rank = std::any_of(job.ranks.begin(), job.ranks.end(),
                                    [](const RankView& v) { return v.state != RankState::kMissing; });
  if (job.files == 0 && !any_rank) {
    // A dump of processes that are no ranks (hangtrace dump -p PID --out):
    // nothing to diagnose across ranks, but their stacks are there.
    bool printed = false;
    for (const std::string& p : r.paths) {
      for (const std::string& folder : FindNodeDumps(p)) {
        NodeDump node;
        std::string error;
        if (!ReadNodeDump(folder, &node, &error)) continue;
        for (const NodeProcess& np : node.processes) {
          if (np.rank >= 0) continue;
          fputs(ProcessStacksText(np).c_str(), stdout);
          printed = true;
        }
      }
    }
    if (printed) {
      fprintf(stderr, "%s: these processes have no rank (no MPI, torch or SLURM rank in their environment): "
                      "their stacks are above; there is no job to diagnose across ranks\n", cmd);
      return kExitCouldNot;
    }
    for (const std::string& w : job.warnings) fprintf(stderr, "%s: %s\n", cmd, w.c_str());
    fprintf(stderr,
            "%s: no readable trace file under the given paths (a process that made no traced call and exited 0 "
            "leaves none)\n",
            cmd);
    return kExitCouldNot;
  }
  // Ranks and sequence numbers of different jobs mean nothing together.
  for (const Job* j : {&job, compare ? &earlier : nullptr}) {
    if (!j || j->jobs.size() <= 1) continue;
    fprintf(stderr, "%s: these paths hold the files of %zu jobs; analyze one job at a time:\n", cmd, j->jobs.size());
    for (const auto& [id, f] : j->jobs) {
      const std::string folder = f.example.substr(0, f.example.rfind('/'));
      fprintf(stderr, "  job %-16s %zu file(s), e.g. in %s\n", id.empty() ? "(none)" : id.c_str(), f.files,
              folder.c_str());
    }
    return kExitCouldNot;
  }
  if (!r.earlier.empty() && !earlier.jobs.empty() && !job.jobs.empty() &&
      earlier.jobs.begin()->first != job.jobs.begin()->first) {
    fprintf(stderr, "%s: --earlier holds job %s, the paths job %s: two looks must be at one job\n", cmd,
            earlier.jobs.begin()->first.c_str(), job.jobs.begin()->first.c_str());
    return kExitCouldNot;
  }
  Diagnosis d = Diagnose(job, compare ? &earlier : nullptr);
  if (text) {
    const std::string report = TextReport(job, d);
    fputs((ColorWanted(STDOUT_FILENO) ? Colorize(report) : report).c_str(), stdout);
  } else {
    nlohmann::json j = JsonReport(job, d);
    if (r.json_extra.is_object()) j.update(r.json_extra);
    printf("%s\n", JsonText(j, 2).c_str());
  }
  int rc = ExitStatusOf(d.verdict);
  // A picture as DOT, or as SVG when the name ends in .svg (Graphviz).
  auto picture = [&](const std::string& path, const std::string& dot_text, const char* what) {
    std::string err;
    const bool svg = path.size() > 4 && path.compare(path.size() - 4, 4, ".svg") == 0;
    const bool ok = svg ? RenderSvg(dot_text, path, &err) : WriteText(path, dot_text, &err);
    if (!ok) {
      fprintf(stderr, "%s: %s\n", cmd, err.c_str());
      rc = kExitCouldNot;
    } else if (text) {
      printf("%s: %s%s\n", what, path.c_str(),
             svg ? "" : (" (dot -Tsvg " + path + " > picture.svg)").c_str());
    }
  };
  if (!r.perfetto.empty()) {
    std::string err;
    if (d.with_trace.Empty()) {
      fprintf(stderr, "%s: no rank has a trace file, so there is no timeline; %s not written\n", cmd,
              r.perfetto.c_str());
    } else if (WritePerfetto(job, d, r.perfetto, &err)) {
      if (text) printf("\nPerfetto trace: %s (open in https://ui.perfetto.dev)\n", r.perfetto.c_str());
    } else {
      fprintf(stderr, "%s: %s\n", cmd, err.c_str());
      rc = kExitCouldNot;
    }
  }
  if (!r.graph.empty()) picture(r.graph, WaitGraphDot(job, d), "wait-for graph");
  if (!r.dot.empty()) {
    if (!HasStacks(job)) {
      fprintf(stderr, "%s: no stacks in these traces; %s not written\n", cmd, r.dot.c_str());
    } else {
      picture(r.dot, StackTreeDot(job, d, MergeStacks(job)), "stack tree");
    }
  }
  return rc;
}

}  // namespace hangtrace
