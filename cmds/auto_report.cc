// hangtrace auto-report: the automatic report of a hung job, run on each
// node by the traced job itself when its watchdog fires (tracer/
// auto_report.cc starts it; docs/DUMP.md, "The automatic report").
//
//   1. joins the job's round in the report folder OUT (shared by every node):
//      the one announced in OUT/round.started within the last minute, else a
//      new one, announced there (a node whose ranks all compute, and so never
//      fire, sees the announcement and joins);
//   2. dumps this node compact, no stacks (the ranks captured theirs when the
//      watchdog fired), into OUT/<round>/first/, waits --settle seconds, and
//      dumps it again into OUT/<round>/second/: the second look that tells a
//      slow job from a hung one;
//   3. the first node to get here reports: it waits until the node dumps
//      cover every rank, or --wait seconds, then analyzes the second look
//      against the first and prints one report on stderr, the job's log
//      (and writes OUT/<round>/report.txt and report.json). A node that sent
//      nothing by then has its ranks named as missing, never blamed.
// The other nodes' helpers exit after their dumps, saying nothing.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cmds/commands.h"
#include "cmds/run_analysis.h"
#include "cmds/subprocess.h"
#include "merger/node_dump.h"
#include "merger/rank_set.h"
#include "tracer/procfs.h"

namespace hangtrace {
namespace {

using Clock = std::chrono::steady_clock;

bool MakeFolders(const std::string& path) {
  for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
    const std::string part = pos == std::string::npos ? path : path.substr(0, pos);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return false;
    if (pos == std::string::npos) return true;
  }
}

// The first line of a small file ("" when unreadable).
std::string FirstLine(const std::string& path) {
  char buf[128];
  if (ReadSmallFile(path.c_str(), buf, sizeof(buf)) <= 0) return "";
  std::string s = buf;
  return s.substr(0, s.find('\n'));
}

// A round's name as JoinRound makes it, and nothing else: the file is read
// back from a shared folder, and its content becomes a path.
bool ValidRound(const std::string& round) {
  if (round.rfind("round-", 0) != 0 || round.size() > 40) return false;
  for (char c : round.substr(6)) {
    if (!isdigit(static_cast<unsigned char>(c)) && c != '-') return false;
  }
  return true;
}

// The round this node joins: the one announced within the last minute, or a
// new one it announces (written aside and renamed: a reader never sees half
// a name; two nodes announcing at once both read back the one that stayed).
std::string JoinRound(const std::string& out) {
  const std::string marker = out + "/round.started";
  struct stat st;
  if (stat(marker.c_str(), &st) == 0 && time(nullptr) - st.st_mtime < 60) {
    if (std::string round = FirstLine(marker); ValidRound(round)) return round;
  }
  char name[64];
  const time_t now = time(nullptr);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(name, sizeof(name), "round-%Y%m%d-%H%M%S", &tm);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string aside = marker + "." + host + "." + std::to_string(getpid());
  {
    std::ofstream o(aside);
    o << name << "\n";
  }
  rename(aside.c_str(), marker.c_str());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::string round = FirstLine(marker);
  return ValidRound(round) ? round : name;
}

// Runs this binary's `dump` into `folder`, for a minute at most (a process
// that cannot be read must not hold the report); its exit status.
int Dump(const std::string& dir, const std::string& job, const std::string& folder) {
  std::string out, err;
  return Capture({SelfPath(), "dump", "--dir", dir, "--job", job, "--no-stacks", "--quiet", "--out", folder}, 60, &out,
                 &err);
}

// The ranks the node dumps of `look` hold, and the world size they name.
RankSet Covered(const std::string& look, int32_t* world) {
  RankSet ranks;
  for (const std::string& folder : FindNodeDumps(look)) {
    NodeDump node;
    std::string error;
    if (!ReadNodeDump(folder, &node, &error)) continue;
    for (const NodeProcess& p : node.processes) {
      if (p.rank >= 0) ranks.Add(p.rank);
      *world = std::max(*world, p.world_size);
    }
  }
  return ranks;
}

// Runs the analysis with its stdout going to `path`; its exit status.
int AnalyzeInto(AnalysisRequest request, const std::string& path) {
  fflush(stdout);
  const int saved = dup(1);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || saved < 0) return -1;
  dup2(fd, 1);
  close(fd);
  const int status = RunAnalysis(request);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  return status;
}

}  // namespace

int AutoReportCommand(int argc, char** argv) {
  CLI::App app{
      "The automatic report of a hung job: run on each node by the traced job itself when its\n"
      "watchdog fires (HANGTRACE_REPORT=1, the default). Dumps this node twice, seconds apart,\n"
      "into OUT (a folder every node sees); the first node done waits for the others, analyzes\n"
      "and prints one report for the whole job on stderr, the job's log.\n\n"
      "example (what the runtime runs):\n"
      "  hangtrace auto-report --dir /dev/shm/hangtrace-$USER --job 12345 --out $SLURM_SUBMIT_DIR/hangtrace-report-12345\n",
      "hangtrace auto-report"};
  std::string dir, job, out;
  double timeout = 0, settle = 2, wait = 5;
  app.add_option("--dir", dir, "the trace folder root of this node")->required();
  app.add_option("--job", job, "the job id: its folder under --dir")->required();
  app.add_option("-o,--out", out, "the report folder, shared by every node")->required();
  app.add_option("--timeout", timeout, "the watchdog's timeout the job runs with (said in the report)")->check(Seconds());
  app.add_option("--settle", settle, "seconds between the two looks (default 2)")->check(Seconds());
  app.add_option("--wait", wait, "seconds the reporter waits for the other nodes after its own looks (default 5)")
      ->check(Seconds());
  HT_PARSE(app, argc, argv);
  const auto t0 = Clock::now();

  if (!MakeFolders(out)) {
    fprintf(stderr, "hangtrace: automatic report: cannot make %s: %s; run hangtrace srun-dump or hangtrace dump\n",
            out.c_str(), strerror(errno));
    return kExitCouldNot;
  }
  // Ours, not a folder another user made for us to write into (or follow).
  struct stat st;
  if (lstat(out.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    fprintf(stderr, "hangtrace: automatic report: %s is not a folder of uid %u: not used (HANGTRACE_REPORT_DIR names "
                    "another)\n", out.c_str(), unsigned(geteuid()));
    return kExitCouldNot;
  }
  const std::string round = out + "/" + JoinRound(out);
  const std::string first = round + "/first", second = round + "/second";
  if (!MakeFolders(first) || !MakeFolders(second)) {
    fprintf(stderr, "hangtrace: automatic report: cannot make %s: %s\n", round.c_str(), strerror(errno));
    return kExitCouldNot;
  }
  Dump(dir, job, first);
  std::this_thread::sleep_for(std::chrono::duration<double>(settle));
  Dump(dir, job, second);

  // The first node here reports; the others are done.
  const int claim = open((round + "/reporter").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (claim < 0) return kExitNoHang;
  close(claim);
  int32_t world = -1;
  RankSet covered = Covered(second, &world);
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait);
  while ((world <= 0 || covered.Count() < size_t(world)) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    covered = Covered(second, &world);
  }
  AnalysisRequest request;
  request.command = "hangtrace auto-report";
  request.paths = {second};
  request.earlier = {first};
  if (world > 0 && covered.Count() < size_t(world)) {
    RankSet missing;
    for (int32_t r = 0; r < world; ++r) {
      if (!covered.Contains(r)) missing.Add(r);
    }
    char waited[32];
    snprintf(waited, sizeof(waited), "%.0f", wait);
    request.warnings.push_back("ranks " + missing.ToString() + " sent no dump within " + waited +
                               " s of this node's: their nodes are silent (dead, or their processes gone)");
  }
  const std::string text_path = round + "/report.txt";
  const int status = AnalyzeInto(request, text_path);
  request.format = "json";
  AnalyzeInto(request, round + "/report.json");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  std::ifstream in(text_path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (status == kExitNoHang) {
    // Slow, or every rank computes: one line, once per job.
    const int said = open((out + "/slow.said").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (said >= 0) {
      close(said);
      std::string verdict = lines.empty() ? "not hung" : lines[0];
      if (verdict.rfind("hangtrace: ", 0) == 0) verdict = verdict.substr(11);
      fprintf(stderr, "hangtrace: calls outlasted the watchdog's %g s, but the job moved between two looks %g s apart: "
                      "%s (said once; the report: %s)\n", timeout, settle, verdict.c_str(), text_path.c_str());
    }
    return kExitNoHang;
  }
  // One block, written at once: lines of other processes do not cut into it.
  // A long report leaves its merged stacks to the file: the rest (verdict,
  // classes, progress, warnings) is what the log must hold.
  constexpr size_t kMaxLines = 40;
  if (lines.size() > kMaxLines) {
    size_t from = 0;
    while (from < lines.size() && lines[from].rfind("stacks, merged", 0) != 0) ++from;
    size_t to = from + 1;
    while (to < lines.size() && (lines[to].empty() || lines[to][0] == ' ')) ++to;
    if (from < lines.size()) {
      const size_t cut = to - from;
      lines.erase(lines.begin() + long(from), lines.begin() + long(to));
      lines.insert(lines.begin() + long(from), "stacks, merged: " + std::to_string(cut - 1) + " lines in " + text_path);
    }
  }
  std::ostringstream block;
  block << "hangtrace: automatic report of job " << job << " (the watchdog's " << timeout << " s passed; "
        << covered.Count() << (world > 0 ? " of " + std::to_string(world) : std::string()) << " ranks dumped twice, "
        << settle << " s apart, in " << std::fixed;
  block.precision(1);
  block << seconds << " s)\n";
  for (size_t i = 0; i < lines.size() && i < kMaxLines; ++i) block << lines[i] << "\n";
  if (lines.size() > kMaxLines) block << "  ... " << lines.size() - kMaxLines << " more lines in " << text_path << "\n";
  block << "hangtrace: the report: " << text_path << " (JSON: report.json); the dumps: " << second
        << " (hangtrace analyze " << second << " --earlier " << first << ")\n";
  const std::string text = block.str();
  if (write(2, text.data(), text.size()) < 0) {
  }
  return status;
}

}  // namespace hangtrace
