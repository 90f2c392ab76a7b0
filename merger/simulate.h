// `hangtrace simulate`: synthetic trace files, in the real format, of a
// TP x PP x DP training job of any size, with faults from the trainer's
// catalogue injected at a rank and step, and the ground truth of each.
//
// Every rank runs the step a Megatron-style trainer runs (rank order: TP
// fastest, then PP, then DP): for each micro-batch a forward pass (receive
// activations from the previous stage, one TP all-reduce per layer, send to
// the next stage) and later a backward pass (the same, in reverse, with
// gradients), then the data-parallel gradient all-reduce, the last stage's
// loss broadcast to its pipeline group, and the all-reduce(MAX) of the done
// flag over world. Steps before the faulty one complete. The faulty step is
// executed by a small engine (a collective completes when every member
// arrived with the same arguments; a send and its receive complete
// together), so where each rank ends up is what a real job would show.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainer/faults.h"

namespace hangtrace {

struct SimConfig {
  int tp = 2, pp = 2, dp = 2;
  int steps = 4;               // steps the job runs (the faulty one is among them)
  int micro = 4;               // micro-batches per step
  int layers = 2;              // layers per pipeline stage
  uint32_t records = 0;        // if set: steps chosen to give about this many records per rank
  std::vector<trainer::Fault> faults;  // the trainer's catalogue; step -1: the last step
  std::string out;             // folder; files go to OUT/<job>/
  std::string job = "sim";
  double stuck_s = 300;        // how long the hung ranks have waited at snapshot time
  uint64_t seq_base = 0;       // collectives every comm did before the simulated steps
  // After the snapshot the job was torn down: every process still running
  // exited from another thread (status 195, Open MPI's exit when mpirun is
  // killed), wherever it was. What a hung job's files look like afterwards.
  bool torn_down = false;
  int threads = 0;             // writer threads (0: all cores)
};

struct SimResult {
  nlohmann::json truth;  // schema hangtrace.truth/1
  size_t files = 0;
  uint64_t records = 0;
  int steps = 0;
};

bool Simulate(const SimConfig& config, SimResult* result, std::string* error);

}  // namespace hangtrace
