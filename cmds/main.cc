// hangtrace: one binary, a table of subcommands, one source file each.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cmds/commands.h"

namespace hangtrace {
namespace {

const CommandEntry kCommands[] = {
    {"run", "run a command traced: hangtrace run [--dir D] [--timeout S] CMD ARGS...", RunCommand},
    {"analyze", "the diagnosis of a job: who waits in which call, for whom, and who caused it",
     AnalyzeCommand},
    {"simulate", "write synthetic trace files of a TP x PP x DP job with a fault, and its truth",
     SimulateCommand},
    {"inspect", "show what trace files hold: process, threads, current calls, stacks, events",
     InspectCommand},
    {"dump", "on a node: snapshot the traced processes of a job, with every thread's native stack",
     DumpCommand},
    {"srun-dump", "from the login node: dump every node of a hung SLURM job, then analyze", SrunDumpCommand},
    {"auto-report", "run by a traced job when its watchdog fires: one report for the whole job in its log",
     AutoReportCommand},
    {"ls", "list the traced jobs in the trace folder: state, ranks, hosts, age, the path to analyze", LsCommand},
    {"clean", "remove the trace folders of jobs that have ended (gives /dev/shm back)", CleanCommand},
    {"env", "list the HANGTRACE_* environment variables with defaults and meaning", EnvCommand},
};

}  // namespace

const CLI::Validator& Seconds() {
  static const CLI::Validator check(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = strtod(text.c_str(), &end);
        if (end == text.c_str() || *end || !(v >= 0)) return "'" + text + "' is not a number of seconds >= 0";
        return "";
      },
      "SECONDS");
  return check;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

void SuggestOption(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = std::string(argv[i]).substr(0, std::string(argv[i]).find('='));
    if (word.size() < 3 || word.rfind("--", 0) != 0) continue;
    std::string best;
    size_t best_distance = 3;
    bool known = false;
    for (const CLI::Option* o : app.get_options()) {
      for (const std::string& name : o->get_lnames()) {
        const size_t d = EditDistance(word.substr(2), name);
        known |= d == 0;
        if (d < best_distance) best_distance = d, best = "--" + name;
      }
    }
    if (!known && !best.empty()) fprintf(stderr, "did you mean %s (for %s)?\n", best.c_str(), word.c_str());
  }
}

namespace {

void Usage(FILE* out) {
  fprintf(out,
          "hangtrace: find which ranks of a hung MPI/NCCL job sit in which call, and why.\n\n"
          "usage: hangtrace COMMAND [OPTIONS]   (hangtrace COMMAND --help for each)\n\n"
          "commands:\n");
  for (const CommandEntry& c : kCommands) fprintf(out, "  %-11s %s\n", c.name, c.summary);
  fprintf(out,
          "\nexample:\n"
          "  mpirun -np 8 hangtrace run --timeout 60 ./app       # trace every rank\n"
          "  hangtrace ls                                        # the traced jobs, and their paths\n"
          "  hangtrace analyze /dev/shm/hangtrace-$USER/<job>/    # the diagnosis\n"
          "  hangtrace dump -p <pids> -o snap/                    # any processes, traced or not: stacks\n"
          "\nexit status of analyze: 0 no hang, 3 a hang/deadlock/mismatch/crash found, 1 could not\n"
          "analyze, 2 usage error\n");
}

}  // namespace
}  // namespace hangtrace

int main(int argc, char** argv) {
  using namespace hangtrace;
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    Usage(stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("hangtrace %s\n", HANGTRACE_VERSION);
    return 0;
  }
  for (const CommandEntry& c : kCommands) {
    if (!strcmp(argv[1], c.name)) return c.main(argc - 1, argv + 1);
  }
  // Did you mean: the command nearest in edits, if it is near at all.
  const CommandEntry* best = nullptr;
  size_t best_distance = 3;
  for (const CommandEntry& c : kCommands) {
    const size_t d = EditDistance(argv[1], c.name);
    if (d < best_distance) best_distance = d, best = &c;
  }
  if (best) {
    fprintf(stderr, "hangtrace: unknown command '%s'; did you mean '%s'?\n", argv[1], best->name);
    return kExitUsage;
  }
  fprintf(stderr, "hangtrace: unknown command '%s'\n\n", argv[1]);
  Usage(stderr);
  return kExitUsage;
}
