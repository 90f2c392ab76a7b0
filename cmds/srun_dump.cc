// hangtrace srun-dump JOBID: the live dump of a hung SLURM job, from the
// login node. It asks SLURM for the job's nodes, runs `hangtrace dump` on
// each of them in one overlapping step (srun --overlap: it needs no free
// resources of the job and does not disturb its steps), waits for the nodes
// up to a deadline, then analyzes what came back and prints the report. A
// node that does not answer in time is named, and the others are analyzed.
// It looks twice by default, --settle seconds apart (OUT/first, OUT/second),
// and analyzes the second look against the first: one look at a running job
// cannot tell a slow job from a hung one, nor call a hang before a wait is
// long enough to show it (docs/ANALYSIS.md, "One look").
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <functional>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cmds/commands.h"
#include "cmds/run_analysis.h"
#include "cmds/subprocess.h"
#include "merger/diagnose.h"
#include "merger/model.h"
#include "merger/report.h"

namespace hangtrace {
namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}


std::string Stamp() {
  time_t t = time(nullptr);
  char b[32];
  strftime(b, sizeof(b), "%Y%m%d-%H%M%S", localtime(&t));
  return b;
}

}  // namespace

int SrunDumpCommand(int argc, char** argv) {
  CLI::App app{
      "The live dump of a hung SLURM job, from the login node: finds the job's nodes, runs\n"
      "`hangtrace dump` on every one in an overlapping step (srun --overlap, one task per node),\n"
      "collects the dumps in a shared folder, analyzes them and prints the report. Nodes that do\n"
      "not answer within --node-timeout are named; the rest is analyzed. It looks twice, --settle\n"
      "seconds apart (OUT/first, OUT/second): ranks that moved between the looks are slow, not hung,\n"
      "and ranks that did not are hung whatever their calls usually take (--looks 1: one look).\n\n"
      "examples:\n"
      "  hangtrace srun-dump 12345\n"
      "  hangtrace srun-dump 12345 --out /shared/$USER/dump-12345 --node-timeout 30\n"
      "  scripts/hangtrace-srun-dump 12345     (the same)\n",
      "hangtrace srun-dump"};
  std::string jobid, out, dir, format = "text";
  double node_timeout = 20, settle = 2;
  int looks = 2;
  bool no_stacks = false;
  app.add_option("jobid", jobid, "SLURM job id")->required();
  app.add_option("-o,--out", out,
                 "dump folder, on a file system every node sees (default ./hangtrace-dump-JOBID-<time>)");
  app.add_option("--node-timeout", node_timeout, "seconds to wait for the nodes (default 20)")->check(Seconds());
  app.add_option("--dir", dir, "trace folder root on the nodes (default: the runtime's, $HANGTRACE_DIR)");
  app.add_flag("--no-stacks", no_stacks, "trace files and process state only: attach to nothing");
  app.add_option("--looks", looks, "1 or 2 (default): dumps taken, --settle seconds apart")
      ->check(CLI::Range(1, 2));
  app.add_option("--settle", settle, "seconds between the two looks (default 2)")->check(Seconds());
  app.add_option("-f,--format", format, "text (default) or json")->check(CLI::IsMember({"text", "json"}));
  HT_PARSE(app, argc, argv);
  const auto t0 = std::chrono::steady_clock::now();

  // The job: running, and where.
  std::string sq_out, sq_err;
  int rc = Capture({"squeue", "-h", "-j", jobid, "-o", "%T|%N"}, 30, &sq_out, &sq_err);
  if (rc == -1 || rc == 127) {
    fprintf(stderr, "hangtrace srun-dump: cannot run squeue (is SLURM's client installed here?)\n");
    return kExitCouldNot;
  }
  sq_out = Trim(sq_out);
  // squeue could not ask: the controller is down, or no SLURM is configured
  // here. That is the cause to say, not "job unknown".
  const std::string sq_why = Trim(sq_err);
  if (rc != 0 && (sq_why.find("controller") != std::string::npos || sq_why.find("onnect") != std::string::npos ||
                  sq_why.find("slurm.conf") != std::string::npos || sq_why.find("ould not establish") != std::string::npos)) {
    fprintf(stderr, "hangtrace srun-dump: SLURM's controller did not answer (squeue: %s); run it where SLURM works\n",
            sq_why.c_str());
    return kExitCouldNot;
  }
  if (rc != 0 || sq_out.empty()) {
    fprintf(stderr, "hangtrace srun-dump: job %s is not known to SLURM (finished, or a wrong id)%s%s\n",
            jobid.c_str(), sq_err.empty() ? "" : ": ", Trim(sq_err).c_str());
    return kExitCouldNot;
  }
  std::string state = sq_out.substr(0, sq_out.find('|'));
  std::string nodelist = sq_out.substr(sq_out.find('|') + 1);
  if (state != "RUNNING") {
    fprintf(stderr, "hangtrace srun-dump: job %s is %s, not RUNNING: there is nothing live to dump%s\n",
            jobid.c_str(), state.c_str(),
            state == "COMPLETING" ? " (its trace files stay on the nodes: run `hangtrace dump` there)" : "");
    return kExitCouldNot;
  }
  std::string hn_out, hn_err;
  Capture({"scontrol", "show", "hostnames", nodelist}, 30, &hn_out, &hn_err);
  std::vector<std::string> nodes;
  std::istringstream hs(hn_out);
  for (std::string n; hs >> n;) nodes.push_back(n);
  if (nodes.empty()) {
    fprintf(stderr, "hangtrace srun-dump: cannot expand the node list '%s': %s\n", nodelist.c_str(),
            Trim(hn_err).c_str());
    return kExitCouldNot;
  }
  if (out.empty()) out = "hangtrace-dump-" + jobid + "-" + Stamp();
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  out = std::filesystem::absolute(out).string();
  fprintf(stderr, "hangtrace srun-dump: job %s runs on %zu node(s) (%s); dumping into %s\n", jobid.c_str(),
          nodes.size(), nodelist.c_str(), out.c_str());

  // One dump per node, in one step that overlaps the job's own.
  std::string cfg_out, cfg_err;
  Capture({"scontrol", "show", "config"}, 30, &cfg_out, &cfg_err);
  bool gpu_gres = cfg_out.find("GresTypes") != std::string::npos &&
                  cfg_out.find("gpu", cfg_out.find("GresTypes")) < cfg_out.find('\n', cfg_out.find("GresTypes"));
  // Dumps the nodes `asked` into `folder`; those of them that did not answer.
  auto dump_into = [&](const std::string& folder, const std::vector<std::string>& asked) {
    std::filesystem::create_directories(folder, ec);
    std::string asked_list;
    for (const std::string& n : asked) asked_list += (asked_list.empty() ? "" : ",") + n;
    std::vector<std::string> cmd = {"srun", "--jobid=" + jobid, "--overlap", "--ntasks-per-node=1",
                                    "--nodes=" + std::to_string(asked.size()),
                                    "--nodelist=" + (asked.size() == nodes.size() ? nodelist : asked_list),
                                    "--mpi=none", "--kill-on-bad-exit=0", "--quiet", "--export=ALL,HANGTRACE_OFF=1"};
    if (gpu_gres) cmd.push_back("--gres=gpu:0");  // no GPU is needed, and none may be free
    for (const std::string& a : {SelfPath(), std::string("dump"), std::string("--job"), jobid, std::string("--out"),
                                 folder, std::string("--quiet"), std::string("--looks"), std::string("1")}) {
      cmd.push_back(a);
    }
    if (!dir.empty()) cmd.insert(cmd.end(), {"--dir", dir});
    if (no_stacks) cmd.push_back("--no-stacks");
    std::string sr_out, sr_err;
    // On a terminal, once it takes over a second: how many nodes have answered.
    double shown_at = 0;
    bool progress_shown = false;
    auto progress = [&](double spent) {
      if (!isatty(STDERR_FILENO) || spent < 1.0 || spent - shown_at < 0.5) return;
      shown_at = spent;
      size_t done = 0;
      std::error_code walk_ec;
      for (const auto& e : std::filesystem::directory_iterator(folder, walk_ec)) {
        done += std::filesystem::exists(e.path() / "node.json", walk_ec);
      }
      fprintf(stderr, "\rhangtrace srun-dump: %zu of %zu node(s) dumped, %.0f s of %.0f", done, asked.size(), spent,
              node_timeout);
      progress_shown = true;
    };
    const int step_rc = Capture(cmd, node_timeout, &sr_out, &sr_err, progress);
    if (progress_shown) fprintf(stderr, "\n");
    if (step_rc != 0 && !Trim(sr_err).empty()) {
      std::string e = Trim(sr_err);
      fprintf(stderr, "hangtrace srun-dump: srun %s:\n  %s\n",
              step_rc == -2 ? "was stopped at the deadline" : ("exited with " + std::to_string(step_rc)).c_str(),
              e.c_str());
      if (e.find("ermission") != std::string::npos || e.find("ccess denied") != std::string::npos) {
        // Who may: the job's owner. SLURM refuses root a step in another
        // user's job unless configured otherwise.
        std::string owner, ignored;
        Capture({"squeue", "-h", "-j", jobid, "-o", "%u"}, 10, &owner, &ignored);
        owner = Trim(owner);
        if (owner.empty()) owner = "the job's owner";
        fprintf(stderr, "hangtrace srun-dump: SLURM refused this user a step in job %s: run it as %s%s\n",
                jobid.c_str(), owner.c_str(),
                geteuid() == 0 && owner != "the job's owner"
                    ? (" (sudo -u " + owner + " hangtrace srun-dump " + jobid + ")").c_str()
                    : "");
      }
    }
    // Which nodes answered.
    std::vector<std::string> silent;
    for (const std::string& n : asked) {
      bool found = std::filesystem::exists(folder + "/" + n + "/node.json");
      if (!found) {  // a node whose hostname is longer than its SLURM name (FQDN)
        for (const auto& e : std::filesystem::directory_iterator(folder, ec)) {
          std::string name = e.path().filename().string();
          if (name.rfind(n + ".", 0) == 0 && std::filesystem::exists(e.path() / "node.json")) found = true;
        }
      }
      if (!found) silent.push_back(n);
    }
    return silent;
  };
  const std::string second = looks == 2 ? out + "/second" : out;
  std::vector<std::string> silent, asked = nodes;
  if (looks == 2) {
    silent = dump_into(out + "/first", nodes);
    if (silent.size() == nodes.size()) {
      fprintf(stderr, "hangtrace srun-dump: no node answered within %.0f s; nothing to analyze\n", node_timeout);
      return kExitCouldNot;
    }
    // A node silent at the first look is not asked again: it would hold the
    // second look for the whole --node-timeout, and its ranks are missing
    // from the analysis either way.
    if (!silent.empty()) {
      asked.clear();
      std::string names;
      for (const std::string& n : nodes) {
        if (std::find(silent.begin(), silent.end(), n) == silent.end()) asked.push_back(n);
        else names += (names.empty() ? "" : ",") + n;
      }
      fprintf(stderr, "hangtrace srun-dump: the second look skips node(s) %s, silent at the first\n", names.c_str());
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(settle));
  }
  for (const std::string& n : dump_into(second, asked)) silent.push_back(n);
  const double dump_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (silent.size() == nodes.size()) {
    fprintf(stderr, "hangtrace srun-dump: no node answered within %.0f s; nothing to analyze\n", node_timeout);
    return kExitCouldNot;
  }

  AnalysisRequest request;
  request.command = "hangtrace srun-dump";
  request.paths = {second};
  if (looks == 2) request.earlier = {out + "/first"};
  request.format = format;
  if (!silent.empty()) {
    std::string names;
    for (const std::string& n : silent) names += (names.empty() ? "" : ",") + n;
    request.warnings.push_back("no dump from node(s) " + names + " within " + std::to_string(int(node_timeout)) +
                               " s: their ranks are missing from this analysis");
  }
  request.json_extra = {{"dump", {{"folder", out}, {"nodes", nodes.size()}, {"silent_nodes", silent}, {"seconds", dump_s}}}};
  const int status = RunAnalysis(request);
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fprintf(stderr, "hangtrace srun-dump: %zu of %zu node(s) answered; %s %.1f s, with analysis %.1f s; folder %s%s\n",
          nodes.size() - silent.size(), nodes.size(), looks == 2 ? "two dumps" : "dump", dump_s, total_s, out.c_str(),
          looks == 2 ? " (first/, second/)" : "");
  return status;
}

}  // namespace hangtrace
