// hangtrace auto-report: the automatic report of a hung job, run on each
// node by the traced job itself when its watchdog fires (tracer/
// auto_report.cc starts it; docs/DUMP.md, "The automatic report").
//
//   1. opens the report folder OUT (shared by every node) once and checks
//      it (tracer/report_folder.h: ours, no one else may write in it unless
//      it is sticky, room on its file system), and this run's folder in it
//      (RUN: one job id may hold several runs, each reported on its own);
//   2. joins the run's round: the one announced in RUN/round.started
//      within the last minute, else a new one, announced there (a node
//      whose ranks all compute, and so never fire, sees it and joins);
//   3. dumps this node's processes of the run compact, no stacks (the ranks
//      captured theirs when the watchdog fired), into ROUND/first/, waits
//      --settle seconds, and dumps again into ROUND/second/: the second
//      look tells a slow job from a hung one;
//   4. the first node to get here reports: it waits until the node dumps
//      cover every rank, or --wait seconds, analyzes the second look against
//      the first, writes ROUND/report.txt, report.json and report.html, and puts the
//      report's block into its log (--log), which the rank that started it
//      prints on its stderr, the job's log. A node that sent nothing by then
//      has its ranks named as missing, never blamed.
// The other nodes' helpers exit after their dumps, saying nothing.
//
// Every file in OUT is made and opened relative to the descriptors opened
// in step 1 (the dumps and the analysis reach them through /proc/self/fd),
// never through a path checked first and opened after. The helper holds
// none of the job's descriptors (its stdin, stdout and stderr are
// /dev/null), ends itself after --deadline seconds, and SIGTERM ends it.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
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
#include "tracer/report_folder.h"

namespace hangtrace {
namespace {

using Clock = std::chrono::steady_clock;
namespace rf = report_folder;

constexpr int kRoundGapS = 60;  // a round stays joinable this long

// Where the helper's lines go: its log file (the rank that started it
// prints it), else stderr (run by hand).
class Log {
 public:
  explicit Log(std::string path) : path_(std::move(path)) {}
  void Say(const std::string& text) { text_ += text.empty() || text.back() == '\n' ? text : text + "\n"; }
  // Written once, at the end: the rank prints it when the helper is gone.
  ~Log() {
    if (text_.empty()) return;
    if (path_.empty()) {
      if (write(2, text_.data(), text_.size()) < 0) {
      }
      return;
    }
    // The log lives in the job's trace folder, which is ours and closed to
    // others (the runtime checked it): made new, never through a link.
    const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (write(fd, text_.data(), text_.size()) < 0) {
    }
    close(fd);
  }

 private:
  std::string path_, text_;
};

// A path that reaches the folder `fd` from this process and its children
// (which inherit it): never re-resolved through the names above it.
std::string ThroughFd(int fd, const std::string& below = "") {
  return "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd) + (below.empty() ? "" : "/" + below);
}

// A round's name as JoinRound makes it, and nothing else: the marker is
// read back from a shared folder, and its content becomes a folder's name.
bool ValidRound(const std::string& round) {
  if (round.rfind("round-", 0) != 0 || round.size() > 40) return false;
  for (char c : round.substr(6)) {
    if (!isdigit(static_cast<unsigned char>(c)) && c != '-') return false;
  }
  return true;
}

std::string FirstLine(int dir, const std::string& name) {
  std::string text;
  if (!rf::Read(dir, name, &text, 128)) return "";
  return text.substr(0, text.find('\n'));
}

// The round this node joins: the one announced within the last minute, or
// a new one it announces (written aside and renamed: a reader never sees
// half a name; two nodes announcing at once both read back the one that
// stayed).
std::string JoinRound(int run) {
  const long long at = rf::ModifiedAt(run, "round.started");
  if (at >= 0 && time(nullptr) - at < kRoundGapS) {
    if (std::string round = FirstLine(run, "round.started"); ValidRound(round)) return round;
  }
  char name[64];
  const time_t now = time(nullptr);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(name, sizeof(name), "round-%Y%m%d-%H%M%S", &tm);
  rf::WriteWhole(run, "round.started", std::string(name) + "\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string round = FirstLine(run, "round.started");
  return ValidRound(round) ? round : name;
}

// Runs this binary's `dump` of the run's processes into `out`, for a
// minute at most (a process that cannot be read must not hold the report);
// its exit status.
int Dump(const std::string& dir, const std::string& job, const std::string& run, const std::string& out) {
  std::string stdout_text, stderr_text;
  // The ranks' stacks are their own captures; their own processes that are
  // no ranks (DataLoader workers) capture none, and are read from outside,
  // by the rules every capture follows (docs/DUMP.md).
  return Capture({SelfPath(), "dump", "--dir", dir, "--job", job, "--run", run, "--no-stacks", "--child-stacks",
                  "--quiet", "--looks", "1", "--out", out},
                 60, &stdout_text, &stderr_text);
}

// The ranks the node dumps of `look` hold, and the world size they name;
// `dumps`: how many node dumps it holds (each folder with its node.json).
RankSet Covered(const std::string& look, int32_t* world, size_t* dumps = nullptr) {
  RankSet ranks;
  const std::vector<std::string> folders = FindNodeDumps(look);
  if (dumps) *dumps = folders.size();
  for (const std::string& folder : folders) {
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

// Waits, at most `wait` seconds, until the node dumps in `look` (open as
// `dir`) cover every rank of the world they name; the ranks they cover.
// On a shared file system with 2,048 nodes, listing the folder and reading
// every node.json each 200 ms is thousands of metadata operations a
// second: a poll is one stat of the folder (its link count is 2 plus its
// subfolders, one per node), and the folder is listed again only when it
// holds enough nodes to cover the ranks still missing, at the ranks per
// node seen so far (a job of like nodes: about twice, however many), or a
// node's folder was seen without its node.json yet (half a second on).
// At the end, a listing still short is made once more. A file system whose
// folders do not count their subfolders (link count 1) is listed each second.
RankSet AwaitNodes(int dir, const std::string& look, double wait, int32_t* world) {
  auto node_folders = [&]() -> long {
    struct stat st;
    if (fstat(dir, &st) != 0 || st.st_nlink < 2) return -1;
    return long(st.st_nlink) - 2;
  };
  size_t complete = 0;  // node dumps the last listing found whole
  auto list = [&] { return Covered(look, world, &complete); };
  const auto until = Clock::now() + std::chrono::duration<double>(wait);
  long listed = node_folders();
  RankSet covered = list();
  auto last_listing = Clock::now();
  auto whole = [&] { return *world > 0 && covered.Count() >= size_t(*world); };
  while (!whole() && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto since = Clock::now() - last_listing;
    const long now = node_folders();
    bool due;
    if (now < 0 || listed < 0) {
      due = since >= std::chrono::seconds(1);
    } else if (complete < size_t(listed)) {
      due = since >= std::chrono::milliseconds(500);  // a node still writing its dump
    } else {
      long needed = listed + 1;
      if (listed > 0 && *world > 0 && covered.Count() > 0) {
        const double per_node = double(covered.Count()) / double(listed);
        needed = listed + std::max(1L, long((double(*world) - double(covered.Count())) / per_node + 0.999));
      }
      due = now >= needed;
    }
    if (!due) continue;
    listed = now;
    covered = list();
    last_listing = Clock::now();
  }
  if (!whole() && (listed < 0 || node_folders() != listed || complete < size_t(listed))) covered = list();
  return covered;
}

// Runs the analysis with its stdout going to the new file `name` of
// `round`; its exit status (-1: the file could not be made).
int AnalyzeInto(AnalysisRequest request, int round, const std::string& name) {
  fflush(stdout);
  const int saved = dup(1);
  const int fd = rf::Create(round, name);
  if (fd < 0 || saved < 0) {
    if (fd >= 0) close(fd);
    if (saved >= 0) close(saved);
    return -1;
  }
  dup2(fd, 1);
  close(fd);
  const int status = RunAnalysis(request);
  const bool written = fflush(stdout) == 0 && !ferror(stdout) && fsync(1) == 0;
  const int write_error = errno;
  clearerr(stdout);
  dup2(saved, 1);
  close(saved);
  if (!written) {
    errno = write_error;  // a full file system: the report is not there, and must not be said to be
    return -1;
  }
  return status;
}

// Makes `fd` reach the children this process starts (the dumps).
void Inheritable(int fd) { fcntl(fd, F_SETFD, 0); }

}  // namespace

int AutoReportCommand(int argc, char** argv) {
  CLI::App app{
      "The automatic report of a hung job: run on each node by the traced job itself when its\n"
      "watchdog fires (HANGTRACE_REPORT=1, the default). Dumps this node's processes of the run\n"
      "twice, seconds apart, into OUT (a folder every node sees); the first node done waits for\n"
      "the others, analyzes, and writes one report for the whole job, which the rank that\n"
      "started it prints in the job's log.\n\n"
      "example (what the runtime runs):\n"
      "  hangtrace auto-report --dir /dev/shm/hangtrace-$USER --job 12345 --run slurm-12345.0.0 \\\n"
      "      --out $SLURM_SUBMIT_DIR/hangtrace-report-12345 --log /dev/shm/hangtrace-$USER/12345/report.log.4242\n",
      "hangtrace auto-report"};
  std::string dir, job, run, out, log_path, note;
  double timeout = 0, settle = 2, wait = 5, deadline = 180;
  app.add_option("--dir", dir, "the trace folder root of this node")->required();
  app.add_option("--job", job, "the job id: its folder under --dir")->required();
  app.add_option("--run", run,
                 "the run of the job (its processes' HANGTRACE_RUN; \"\" unknown): only its processes are dumped, "
                 "in a folder of its own in OUT");
  app.add_option("-o,--out", out, "the report folder, shared by every node")->required();
  app.add_option("--timeout", timeout, "the watchdog's timeout the job runs with (said in the report)")->check(Seconds());
  app.add_option("--settle", settle, "seconds between the two looks (default 2)")->check(Seconds());
  app.add_option("--wait", wait, "seconds the reporter waits for the other nodes after its own looks (default 5)")
      ->check(Seconds());
  app.add_option("--log", log_path, "where the lines for the job's log go (default: stderr)");
  app.add_option("--note", note, "a line said first (the runtime's: where the report goes, and why)");
  bool blocked = false;
  app.add_flag("--blocked", blocked,
               "the round was started by a rank blocked outside any traced call, not by a call past the timeout: "
               "a job that moved between the two looks says nothing in the log");
  std::string because;
  app.add_option("--because", because,
                 "with --blocked: what the rank was found doing (kept in the round's folder as started.why)");
  app.add_option("--deadline", deadline, "seconds after which the helper ends itself (default 180)")->check(Seconds());
  HT_PARSE(app, argc, argv);
  // Ends itself, whatever it waits for; and SIGTERM ends it, whatever the
  // job ignored (an ignored signal stays ignored across exec).
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGALRM}) signal(sig, SIG_DFL);
  alarm(unsigned(deadline > 1 ? deadline : 1));
  const auto t0 = Clock::now();
  Log log(log_path);
  if (!note.empty()) log.Say("hangtrace: automatic report: " + note);

  std::string why;
  const int folder = rf::Open(out, /*create=*/true, &why, nullptr, /*create_parents=*/true);
  const std::string run_name = run.empty() ? std::string("run") : run;
  const int run_dir = folder < 0 ? -1 : rf::OpenSub(folder, run_name, true, &why, out);
  if (run_dir < 0) {
    log.Say("hangtrace: no automatic report: " + why + "; run hangtrace srun-dump or hangtrace dump");
    return kExitCouldNot;
  }
  const std::string round_name = JoinRound(run_dir);
  const std::string where = out + "/" + run_name + "/" + round_name;
  const int round = rf::OpenSub(run_dir, round_name, true, &why, out + "/" + run_name);
  const int first = round < 0 ? -1 : rf::OpenSub(round, "first", true, &why, where);
  const int second = round < 0 ? -1 : rf::OpenSub(round, "second", true, &why, where);
  if (first < 0 || second < 0) {
    log.Say("hangtrace: no automatic report: " + why);
    return kExitCouldNot;
  }
  // Why a round without a call past the timeout was started: said in the
  // round's folder, where the question comes up (a round in a healthy job).
  if (!because.empty()) rf::WriteWhole(round, "started.why." + std::to_string(getpid()), because + "\n");
  Inheritable(first);
  Inheritable(second);
  // Room is looked at before each write: the file system may fill after the
  // runtime's look (others write there too).
  auto room = [&] {
    if (rf::HasRoom(folder, &why)) return true;
    log.Say("hangtrace: no automatic report: " + out + ": " + why);
    return false;
  };
  if (!room()) return kExitCouldNot;
  Dump(dir, job, run, ThroughFd(first));
  std::this_thread::sleep_for(std::chrono::duration<double>(settle));
  if (!room()) return kExitCouldNot;
  Dump(dir, job, run, ThroughFd(second));

  // The first node here reports; the others are done. Said as "found" to
  // the runtime that started this helper: a round another node reports is
  // held for its gap, never given back at once as one that found no hang
  // (a blocked rank would start another a timeout later, and again).
  const int claim = rf::Create(round, "reporter");
  if (claim < 0) return kExitFound;
  close(claim);
  const std::string first_path = ThroughFd(first), second_path = ThroughFd(second);
  int32_t world = -1;
  const RankSet covered = AwaitNodes(second, second_path, wait, &world);
  AnalysisRequest request;
  request.command = "hangtrace auto-report";
  request.paths = {second_path};
  request.earlier = {first_path};
  request.run = run;
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
  const std::string text_path = where + "/report.txt";
  if (!room()) return kExitCouldNot;
  // The page and the JSON are written by the text's analysis (one reading
  // of the dumps: at 2,048 nodes, reading them again doubled the
  // reporter's time), through the round's descriptor, as every file of the
  // round is.
  request.html = ThroughFd(round) + "/report.html";
  request.json = ThroughFd(round) + "/report.json";
  request.say_outputs = false;
  RankSet moved;
  request.progressing = &moved;
  const int status = AnalyzeInto(request, round, "report.txt");
  if (status < 0) {
    log.Say("hangtrace: no automatic report: cannot write " + text_path + ": " + strerror(errno));
    return kExitCouldNot;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  std::string text;
  rf::Read(round, "report.txt", &text, 1 << 20);
  std::vector<std::string> lines;
  for (std::istringstream in(text); std::getline(in, text);) lines.push_back(text);
  // Started by a rank blocked outside calls (a healthy phase can look so:
  // a rank waiting for a download, a timed wait, a rendezvous while the
  // others still start): no call outlasted the timeout, so a job that
  // moved between the two looks, or is not hung, gets nothing said. The
  // round's report stays in its folder. The run's next round is a new one:
  // a hang soon after gets its own (the runtime looks again a timeout later).
  if (blocked && (status == kExitNoHang || !moved.Empty())) {
    if (FirstLine(run_dir, "round.started") == round_name) unlinkat(run_dir, "round.started", 0);
    return kExitNoHang;
  }
  if (status == kExitNoHang) {
    // Slow, or every rank computes: one line, once per run.
    const int said = rf::Create(run_dir, "slow.said");
    if (said >= 0) {
      close(said);
      std::string verdict = lines.empty() ? "not hung" : lines[0];
      if (verdict.rfind("hangtrace: ", 0) == 0) verdict = verdict.substr(11);
      char head[160];
      snprintf(head, sizeof(head), "hangtrace: calls outlasted the watchdog's %g s, but the job moved between two looks "
               "%g s apart: ", timeout, settle);
      log.Say(head + verdict + " (said once; the report: " + text_path + ")");
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
  block << "hangtrace: the report: " << text_path << " (JSON: report.json, a page to browse: report.html); the dumps: " << where
        << "/second (hangtrace analyze " << where << "/second --earlier " << where << "/first)\n";
  log.Say(block.str());
  return status;
}

}  // namespace hangtrace
