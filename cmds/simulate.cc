// hangtrace simulate: synthetic trace files of a TP x PP x DP job, with a
// fault, and the truth file the analyzer is checked against.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "cmds/commands.h"
#include "merger/simulate.h"

namespace hangtrace {

int SimulateCommand(int argc, char** argv) {
  CLI::App app{
      "Write the trace files a TP x PP x DP training job would leave (real format, one per rank)\n"
      "with a fault from the trainer's catalogue at a rank and step, and its ground truth. Used to\n"
      "test and benchmark `hangtrace analyze` at any scale.\n\n"
      "faults (--fault KIND@rank=R[,step=S][,factor=F], repeatable; the trainer's catalogue):\n" +
          trainer::FaultHelp() +
          "\nexamples:\n"
      "  hangtrace simulate --tp 2 --pp 2 --dp 2 --fault seed-hang@rank=3,step=2 --out /tmp/sim\n"
      "  hangtrace analyze /tmp/sim/sim\n"
      "  hangtrace simulate --tp 8 --pp 16 --dp 128 --records 2000 --out /tmp/big   # 16384 ranks\n",
      "hangtrace simulate"};
  SimConfig c;
  std::vector<std::string> faults;
  std::string truth_path;
  app.add_option("--tp", c.tp, "tensor-parallel size (default 2)");
  app.add_option("--pp", c.pp, "pipeline stages (default 2)");
  app.add_option("--dp", c.dp, "data-parallel size (default 2)");
  app.add_option("--steps", c.steps, "training steps (default 4)");
  app.add_option("--micro", c.micro, "micro-batches per step (default 4)");
  app.add_option("--layers", c.layers, "layers per pipeline stage (default 2)");
  app.add_option("--records", c.records, "about this many records per rank (sets --steps)");
  app.add_option("--fault", faults, "KIND@rank=R[,step=S][,factor=F]; step defaults to the last");
  app.add_option("--out", c.out, "folder for the trace files (written to OUT/<job>/)")->required();
  app.add_option("--job", c.job, "job id, the subfolder (default sim)");
  app.add_option("--truth", truth_path, "where to write the truth (default OUT/<job>.truth.json)");
  app.add_option("--stuck", c.stuck_s, "seconds the hung ranks have waited at the snapshot (default 300)");
  app.add_option("--threads", c.threads, "writer threads (default: all cores)");
  app.add_flag("--torn-down", c.torn_down,
               "then every process still running exited from another thread (status 195), as Open MPI's ranks "
               "do when mpirun is killed: the files of a hung job looked at afterwards");
  app.add_option("--seq-base", c.seq_base,
                 "collectives every communicator did before the simulated steps (a long run: its rings hold "
                 "only the newest; default 0)");
  HT_PARSE(app, argc, argv);
  for (const std::string& f : faults) {
    trainer::Fault fault;
    std::string err;
    if (!trainer::ParseFault(f, &fault, &err)) {
      fprintf(stderr, "hangtrace simulate: %s\n", err.c_str());
      return kExitUsage;
    }
    c.faults.push_back(fault);
  }
  auto t0 = std::chrono::steady_clock::now();
  SimResult r;
  std::string err;
  if (!Simulate(c, &r, &err)) {
    fprintf(stderr, "hangtrace simulate: %s\n", err.c_str());
    return kExitUsage;
  }
  if (truth_path.empty()) truth_path = c.out + "/" + c.job + ".truth.json";
  std::ofstream(truth_path) << r.truth.dump(2) << "\n";
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fprintf(stderr, "hangtrace simulate: %zu ranks, %d steps, %llu records in %s/%s/ (%.1f s); truth in %s\n", r.files,
          r.steps, static_cast<unsigned long long>(r.records), c.out.c_str(), c.job.c_str(), s, truth_path.c_str());
  return 0;
}

}  // namespace hangtrace
