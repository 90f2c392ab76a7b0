// hangtrace: one binary, a table of subcommands, one source file each.
#include <cstdio>
#include <cstring>

#include "cmds/commands.h"

namespace hangtrace {
namespace {

const CommandEntry kCommands[] = {
    {"run", "run a command traced: hangtrace run [--dir D] [--timeout S] -- CMD ARGS...", RunCommand},
    {"analyze", "the diagnosis of a job: who waits in which call, for whom, and who caused it",
     AnalyzeCommand},
    {"simulate", "write synthetic trace files of a TP x PP x DP job with a fault, and its truth",
     SimulateCommand},
    {"inspect", "show what trace files hold: process, threads, current calls, stacks, events",
     InspectCommand},
    {"dump", "on a node: snapshot the traced processes of a job, with every thread's native stack",
     DumpCommand},
    {"srun-dump", "from the login node: dump every node of a hung SLURM job, then analyze", SrunDumpCommand},
    {"env", "list the HANGTRACE_* environment variables with defaults and meaning", EnvCommand},
};

void Usage(FILE* out) {
  fprintf(out,
          "hangtrace: find which ranks of a hung MPI/NCCL job sit in which call, and why.\n\n"
          "usage: hangtrace COMMAND [OPTIONS]   (hangtrace COMMAND --help for each)\n\n"
          "commands:\n");
  for (const CommandEntry& c : kCommands) fprintf(out, "  %-10s %s\n", c.name, c.summary);
  fprintf(out,
          "\nexample:\n"
          "  mpirun -np 8 hangtrace run --timeout 60 -- ./app    # trace every rank\n"
          "  hangtrace analyze /dev/shm/hangtrace-$USER/<job>/    # the diagnosis\n"
          "  hangtrace inspect /dev/shm/hangtrace-$USER/<job>/    # each process on its own\n");
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
  fprintf(stderr, "hangtrace: unknown command '%s'\n\n", argv[1]);
  Usage(stderr);
  return 2;
}
