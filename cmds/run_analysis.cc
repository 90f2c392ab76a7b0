#include "cmds/run_analysis.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "cmds/commands.h"
#include "merger/diagnose.h"
#include "merger/frames.h"
#include "merger/html_report.h"
#include "tracer/config.h"
#include "merger/job_list.h"
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

// An output file the user named (--perfetto, --graph, --dot), written so
// that nothing planted at its name is followed or overwritten, whoever runs
// the analysis (root, in a shared folder): the output goes to a new file
// beside it (mkstemp: O_EXCL), which then takes the name (rename replaces
// a name, never follows it). A name held by another user's file, a link or
// anything but a regular file is refused.
class OutputFile {
 public:
  explicit OutputFile(std::string path) : path_(std::move(path)) {}
  ~OutputFile() {
    if (fd_ >= 0) close(fd_);
    if (!temp_.empty()) unlink(temp_.c_str());
  }
  bool Open(std::string* error) {
    if (!NameIsOurs(error)) return false;
    std::string pattern = path_ + ".XXXXXX";
    fd_ = mkostemp(pattern.data(), O_CLOEXEC);
    if (fd_ < 0) {
      *error = "cannot write " + path_ + ": " + strerror(errno);
      return false;
    }
    temp_ = pattern;
    const mode_t mask = umask(0);
    umask(mask);
    fchmod(fd_, 0666 & ~mask);  // as a plain create would make it
    return true;
  }
  int fd() const { return fd_; }
  // A path that opens this very file (for a stream).
  std::string StreamPath() const { return "/proc/self/fd/" + std::to_string(fd_); }
  bool Write(const std::string& text, std::string* error) {
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = write(fd_, text.data() + at, text.size() - at);
      if (n <= 0) {
        *error = "error writing " + path_ + ": " + strerror(n < 0 ? errno : ENOSPC);
        return false;
      }
      at += size_t(n);
    }
    return true;
  }
  bool Commit(std::string* error) {
    if (!NameIsOurs(error)) return false;
    if (rename(temp_.c_str(), path_.c_str()) != 0) {
      *error = "cannot write " + path_ + ": " + strerror(errno);
      return false;
    }
    temp_.clear();
    return true;
  }

 private:
  bool NameIsOurs(std::string* error) const {
    struct stat st;
    if (lstat(path_.c_str(), &st) != 0) return true;  // a new name
    if (S_ISLNK(st.st_mode)) {
      *error = path_ + " is a symbolic link: refused (remove it, or name another file)";
    } else if (!S_ISREG(st.st_mode)) {
      *error = path_ + " is not a regular file: refused";
    } else if (st.st_uid != geteuid()) {
      *error = path_ + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user: refused";
    } else {
      return true;
    }
    return false;
  }
  std::string path_, temp_;
  int fd_ = -1;
};

// The documented exit status of a verdict.
int ExitStatusOf(Verdict v) {
  switch (v) {
    case Verdict::kNoHang: return kExitNoHang;
    case Verdict::kUnknown: return kExitCouldNot;
    default: return kExitFound;
  }
}

}  // namespace

int RunAnalysis(const AnalysisRequest& r);

namespace {

// The runs of `job` (paths that hold several), newest first: each
// analyzed on its own under a heading (text), or the newest alone (JSON:
// one object), the others named on stderr with the way to pick one.
int AnalyzeEachRun(const AnalysisRequest& r, const Job& job) {
  std::vector<std::pair<std::string, RunFiles>> runs(job.runs.begin(), job.runs.end());
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    return a.second.start_real_ns != b.second.start_real_ns ? a.second.start_real_ns > b.second.start_real_ns
                                                            : a.first > b.first;
  });
  const bool text = r.format == "text";
  const int64_t now = NowRealNs();
  fprintf(stderr, "%s: these paths hold the files of %zu runs of one job id (concurrent steps, or reruns): %s\n",
          r.command, runs.size(),
          text ? "each is analyzed on its own, newest first" : "the newest is reported; --run ID picks another");
  for (const auto& [id, f] : runs) {
    fprintf(stderr, "  run %-28s %zu file(s), started %s ago, e.g. %s\n", id.empty() ? "(unknown)" : id.c_str(),
            f.files, f.start_real_ns ? Ago(now, f.start_real_ns).c_str() : "?", f.example.c_str());
  }
  int newest = kExitCouldNot;
  for (size_t i = 0; i < runs.size() && (text || i == 0); ++i) {
    AnalysisRequest one = r;
    one.run = runs[i].first;
    if (i > 0) one.perfetto.clear(), one.dot.clear(), one.graph.clear(), one.html.clear(), one.json.clear();  // outputs of the newest only
    if (text) {
      printf("%s== run %s (%zu of %zu, %s)\n", i ? "\n" : "", runs[i].first.empty() ? "(unknown)" : runs[i].first.c_str(),
             i + 1, runs.size(), i ? "older" : "the newest");
      fflush(stdout);
    }
    const int rc = RunAnalysis(one);
    if (i == 0) newest = rc;
  }
  return newest;
}

}  // namespace

int RunAnalysis(const AnalysisRequest& request) {
  AnalysisRequest r = request;
  const char* cmd = r.command;
  const bool text = r.format == "text";
  // Two looks in one folder: the second, read against the first (the
  // folder whole would hold each rank twice). Beside another path, or as
  // --earlier, such a folder stands for its newer look.
  const Looks only_path = r.paths.size() == 1 ? LooksIn(r.paths[0]) : Looks::kNone;
  if (only_path == Looks::kTwo && r.earlier.empty() && r.interval == 0) {
    const std::string folder = r.paths[0];
    r.paths = {folder + "/second"};
    r.earlier = {folder + "/first"};
    if (text) {
      fprintf(stderr, "%s: %s holds two looks at the job: %s/second, read against %s/first\n", cmd, folder.c_str(),
              folder.c_str(), folder.c_str());
    }
  } else if (only_path == Looks::kFirstOnly) {
    const std::string folder = r.paths[0];
    r.paths = {folder + "/first"};
    if (text) {
      fprintf(stderr, "%s: %s holds one look, %s/first: its second never came (the dump was stopped between them?)\n",
              cmd, folder.c_str(), folder.c_str());
    }
  } else {
    for (std::vector<std::string>* list : {&r.paths, &r.earlier}) {
      for (std::string& p : *list) {
        if (LooksIn(p) == Looks::kTwo) p += "/second";
      }
    }
  }
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
  // Two looks are two photographs of one run: the same folder twice is one
  // look (nothing would move: every rank "stuck"). Refused before reading.
  {
    std::error_code ec;
    for (const std::string& p : r.paths) {
      for (const std::string& e : r.earlier) {
        if (std::filesystem::equivalent(p, e, ec)) {
          fprintf(stderr, "%s: --earlier %s is the same look as %s: two looks are two dumps, taken seconds apart\n",
                  cmd, e.c_str(), p.c_str());
          return kExitUsage;
        }
      }
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
  // The user's folders: the setting (the automatic report's helper runs
  // with the job's environment), then the command line's.
  opts.user_paths = SplitUserPaths(Config::FromEnvironment().user_paths);
  opts.user_paths.insert(opts.user_paths.end(), r.user_paths.begin(), r.user_paths.end());
  opts.run = r.run;
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
    nlohmann::json processes = nlohmann::json::array();
    for (const std::string& p : r.paths) {
      for (const std::string& folder : FindNodeDumps(p)) {
        NodeDump node;
        std::string error;
        if (!ReadNodeDump(folder, &node, &error)) continue;
        for (const NodeProcess& np : node.processes) {
          if (np.rank >= 0) continue;
          if (text) fputs(ProcessStacksText(np).c_str(), stdout);
          else processes.push_back({{"pid", np.pid}, {"cmdline", np.cmdline}, {"stacks_text", ProcessStacksText(np)}});
          printed = true;
        }
      }
    }
    if (printed) {
      const std::string why = "these processes have no rank (no MPI, torch or SLURM rank in their environment): "
                              "there is no job to diagnose across ranks";
      if (!text) {
        // Still the JSON contract: a verdict that says why it cannot decide.
        printf("%s\n", JsonText({{"schema", "hangtrace.analysis/1"}, {"verdict", "unknown"}, {"summary", why},
                                  {"processes", processes}}, 2).c_str());
      }
      fprintf(stderr, "%s: %s%s\n", cmd, why.c_str(), text ? " (their stacks are above)" : "");
      if (!r.html.empty()) fprintf(stderr, "%s: so no page was written to %s\n", cmd, r.html.c_str());
      return kExitCouldNot;
    }
    for (const std::string& w : job.warnings) fprintf(stderr, "%s: %s\n", cmd, w.c_str());
    fprintf(stderr,
            "%s: no readable trace file under the given paths (a process that made no traced call leaves none "
            "when it exits 0, and has none while it runs unless it is a launcher's rank; `hangtrace dump -p PID` "
            "reads a running one's stacks)\n",
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
  // One job id, several runs (concurrent steps of one allocation, a rerun
  // in the same folder): never one diagnosis. Each run on its own, newest
  // first; the exit status is the newest run's.
  if (!r.run && job.runs.size() > 1) return AnalyzeEachRun(r, job);
  if (r.run && job.files == 0) {
    fprintf(stderr, "%s: no trace file of run %s under the given paths (runs there:", cmd, r.run->c_str());
    for (const auto& [id, f] : job.runs) fprintf(stderr, " %s", id.empty() ? "(unknown)" : id.c_str());
    fprintf(stderr, ")\n");
    return kExitCouldNot;
  }
  if (!r.earlier.empty() && !earlier.jobs.empty() && !job.jobs.empty() &&
      earlier.jobs.begin()->first != job.jobs.begin()->first) {
    fprintf(stderr, "%s: --earlier holds job %s, the paths job %s: two looks must be at one job\n", cmd,
            earlier.jobs.begin()->first.c_str(), job.jobs.begin()->first.c_str());
    return kExitCouldNot;
  }
  if (!r.earlier.empty()) {
    // A look at other processes says nothing of these (every rank "moved").
    std::set<std::pair<std::string, int32_t>> later_processes;
    for (const RankView& v : job.ranks) {
      if (v.pid > 0) later_processes.insert({v.host, v.pid});
    }
    bool shared = later_processes.empty();
    for (const RankView& v : earlier.ranks) shared |= later_processes.count({v.host, v.pid}) > 0;
    if (!shared && any_of(earlier.ranks.begin(), earlier.ranks.end(), [](const RankView& v) { return v.pid > 0; })) {
      fprintf(stderr, "%s: --earlier holds none of the processes the paths hold (no host and pid in common): two "
                      "looks must be at one run of the job\n", cmd);
      return kExitCouldNot;
    }
  }
  Diagnosis d = Diagnose(job, compare ? &earlier : nullptr);
  if (r.progressing) *r.progressing = d.progressing;
  const std::string text_report = text || !r.html.empty() ? TextReport(job, d) : "";
  auto json_text = [&] {
    nlohmann::json j = JsonReport(job, d);
    if (r.json_extra.is_object()) j.update(r.json_extra);
    return JsonText(j, 2) + "\n";
  };
  if (text) {
    fputs((ColorWanted(STDOUT_FILENO) ? Colorize(text_report) : text_report).c_str(), stdout);
  } else {
    fputs(json_text().c_str(), stdout);
  }
  int rc = ExitStatusOf(d.verdict);
  if (!r.json.empty()) {  // from the same reading of the files
    std::string err;
    OutputFile file(r.json);
    if (!(file.Open(&err) && file.Write(json_text(), &err) && file.Commit(&err))) {
      fprintf(stderr, "%s: %s\n", cmd, err.c_str());
      rc = kExitCouldNot;
    }
  }
  // A picture as DOT, or as SVG when the name ends in .svg (Graphviz).
  auto picture = [&](const std::string& path, const std::string& dot_text, const char* what) {
    std::string err;
    const bool svg = path.size() > 4 && path.compare(path.size() - 4, 4, ".svg") == 0;
    OutputFile file(path);
    const bool ok = file.Open(&err) && (svg ? RenderSvg(dot_text, file.fd(), &err) : file.Write(dot_text, &err)) &&
                    file.Commit(&err);
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
    } else if (OutputFile file(r.perfetto); file.Open(&err) && WritePerfetto(job, d, file.StreamPath(), &err) &&
                                              file.Commit(&err)) {
      if (text) printf("\nPerfetto trace: %s (open in https://ui.perfetto.dev)\n", r.perfetto.c_str());
    } else {
      fprintf(stderr, "%s: %s\n", cmd, err.c_str());
      rc = kExitCouldNot;
    }
  }
  if (!r.html.empty()) {
    std::string err;
    OutputFile file(r.html);
    if (file.Open(&err) && file.Write(HtmlReport(job, d, text_report), &err) && file.Commit(&err)) {
      if (text && r.say_outputs) printf("\nthe report as a page: %s (opens offline in any browser)\n", r.html.c_str());
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
