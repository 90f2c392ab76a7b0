// hangtrace run: execs a command with libhangtrace.so preloaded.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cmds/commands.h"
#include "tracer/config.h"

namespace hangtrace {
namespace {

// build/bin/hangtrace -> build/lib/libhangtrace.so; installed bin/ -> lib/.
std::string FindPreloadLibrary() {
  if (std::string lib = ExpandUser(Config::FromEnvironment().lib); !lib.empty()) return lib;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  std::string dir(self);
  dir = dir.substr(0, dir.rfind('/'));
  for (const char* rel : {"/../lib/libhangtrace.so", "/../" HANGTRACE_INSTALL_LIBDIR "/libhangtrace.so", "/libhangtrace.so"}) {
    std::string p = dir + rel;
    char real[PATH_MAX];
    if (realpath(p.c_str(), real) && access(real, R_OK) == 0) return real;
  }
  return "";
}

}  // namespace

int RunCommand(int argc, char** argv) {
  CLI::App app{
      "Run CMD with every MPI, NCCL and CUDA call of the process, and torch.distributed's in Python,\n"
      "recorded into a crash-durable trace file (one per process, in DIR/<job>/). Works under\n"
      "mpirun, mpiexec and srun: put it after the launcher.\n\n"
      "Options of hangtrace go before the command; everything from the command on is the\n"
      "command's own (as with perf, strace, py-spy). A '--' before the command is allowed.\n\n"
      "examples:\n"
      "  mpirun -np 64 hangtrace run ./app --steps 100\n"
      "  srun hangtrace run --timeout 300 python train.py --lr 3e-4\n"
      "  hangtrace run --dir /tmp/traces --blocking coll -- ./app\n",
      "hangtrace run"};
  std::string dir, blocking;
  double timeout = -1;
  uint64_t ring = 0;
  std::string job;
  bool no_stacks = false;
  std::vector<std::string> cmd;
  app.add_option("--dir", dir, "folder for trace files (HANGTRACE_DIR; default /dev/shm/hangtrace-$USER)");
  app.add_option("--timeout", timeout,
                 "watchdog seconds: a call in flight longer is marked, all thread stacks are captured "
                 "and one line is printed (HANGTRACE_TIMEOUT; default 120; 0 turns it off)")
      ->check(Seconds());
  app.add_option("--blocking", blocking,
                 "off, coll, kernels or all: synchronize after each traced collective and/or kernel "
                 "launch, a selective and recorded CUDA_LAUNCH_BLOCKING=1 (HANGTRACE_BLOCKING)");
  app.add_option("--ring", ring, "event slots per thread lane, 64 bytes each (HANGTRACE_RING; default 65536)");
  app.add_option("--job", job, "job id naming the subfolder (HANGTRACE_JOB; default from SLURM/mpirun)");
  app.add_flag("--no-stacks", no_stacks, "never capture stacks inside the process (HANGTRACE_STACKS=0)");
  app.prefix_command();  // the first word that is not ours starts the command
  app.footer("CMD ARGS...  the command to run, with its own options");
  HT_PARSE(app, argc, argv);
  cmd = app.remaining();
  if (!cmd.empty() && cmd.front() == "--") {
    cmd.erase(cmd.begin());
  } else if (!cmd.empty() && cmd.front().size() > 1 && cmd.front()[0] == '-') {
    fprintf(stderr, "hangtrace run: unknown option '%s' (options of hangtrace run: --help)\n", cmd.front().c_str());
    return kExitUsage;
  }
  if (cmd.empty()) {
    fprintf(stderr, "hangtrace run: no command given (hangtrace run [OPTIONS] CMD ARGS...; --help for more)\n");
    return kExitUsage;
  }

  BlockingMode mode;
  if (!blocking.empty() && !ParseBlockingMode(blocking, &mode)) {
    fprintf(stderr, "hangtrace run: --blocking must be off, coll, kernels or all, not '%s'\n", blocking.c_str());
    return kExitUsage;
  }
  std::string lib = FindPreloadLibrary();
  if (lib.empty()) {
    fprintf(stderr,
            "hangtrace run: cannot find libhangtrace.so next to this binary (../lib/); "
            "set HANGTRACE_LIB to its path\n");
    return kExitUsage;
  }
  std::string preload = lib;
  if (const char* old = getenv("LD_PRELOAD"); old && *old) {
    std::string rest = old;
    if (rest.find(lib) == std::string::npos) preload += ":" + rest;
    else preload = rest;  // already there: keep the user's order
  }
  setenv("LD_PRELOAD", preload.c_str(), 1);
  // The Python hook beside the library (LIBDIR/hangtrace/python): first on
  // PYTHONPATH, so its sitecustomize runs (and then the program's own).
  if (Config::FromEnvironment().torch) {
    const std::string hook = lib.substr(0, lib.rfind('/')) + "/hangtrace/python";
    if (access((hook + "/sitecustomize.py").c_str(), R_OK) == 0) {
      const char* old = getenv("PYTHONPATH");
      setenv("PYTHONPATH", (old && *old ? hook + ":" + old : hook).c_str(), 1);
    }
  }
  if (!dir.empty()) setenv("HANGTRACE_DIR", dir.c_str(), 1);
  // The automatic report runs this binary on the job's nodes.
  if (char self[4096]; !getenv("HANGTRACE_CLI") && realpath("/proc/self/exe", self)) setenv("HANGTRACE_CLI", self, 1);
  if (timeout >= 0) setenv("HANGTRACE_TIMEOUT", std::to_string(timeout).c_str(), 1);
  if (!blocking.empty()) setenv("HANGTRACE_BLOCKING", blocking.c_str(), 1);
  if (ring) setenv("HANGTRACE_RING", std::to_string(ring).c_str(), 1);
  if (!job.empty()) setenv("HANGTRACE_JOB", job.c_str(), 1);
  if (no_stacks) setenv("HANGTRACE_STACKS", "0", 1);

  std::vector<char*> args;
  for (std::string& a : cmd) args.push_back(a.data());
  args.push_back(nullptr);
  execvp(args[0], args.data());
  fprintf(stderr, "hangtrace run: cannot execute '%s': %s\n", args[0], strerror(errno));
  return 127;
}

}  // namespace hangtrace
