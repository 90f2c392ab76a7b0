// Lays out an automatic report's round as N nodes of R ranks leave it in
// the shared report folder (docs/DUMP.md, "The automatic report"): for each
// node, ROUND/first/nodeNNNNN/ and ROUND/second/nodeNNNNN/ hold the compact
// copies of its ranks' trace files and its node.json, as `hangtrace dump
// --no-stacks` writes them; RUN/round.started names the round. The ranks
// are the trace files of a simulated job (`hangtrace simulate`), R per node
// in rank order; both looks hold the same snapshot (a hung job that did not
// move). RUN is the files' run ("run" when they name none), printed last
// for the reporter's --run. For bench_report_scale.sh, which then runs the
// reporter on it.
//   report_folder_at_scale SIM_JOB_FOLDER OUT RANKS_PER_NODE [THREADS]
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "merger/node_dump.h"
#include "merger/report.h"
#include "merger/trace_compact.h"
#include "merger/trace_reader.h"

namespace fs = std::filesystem;
using namespace hangtrace;

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s SIM_JOB_FOLDER OUT RANKS_PER_NODE [THREADS]\n", argv[0]);
    return 2;
  }
  const std::string in = argv[1], out = argv[2];
  const int per_node = atoi(argv[3]);
  const unsigned threads = argc > 4 ? unsigned(atoi(argv[4])) : std::max(1u, std::thread::hardware_concurrency());
  if (per_node <= 0) {
    fprintf(stderr, "RANKS_PER_NODE must be positive\n");
    return 2;
  }
  std::string error;
  // Rank -> file, from each file's own header.
  std::map<int32_t, std::string> by_rank;
  int32_t world = 0;
  std::string job, file_run;
  for (const std::string& path : FindTraceFiles(in, &error)) {
    ReadOptions options;
    options.events = false;
    auto s = ReadTraceFile(path, &error, options);
    if (!s) {
      fprintf(stderr, "%s: %s\n", path.c_str(), error.c_str());
      return 1;
    }
    by_rank[s->process.rank] = path;
    world = std::max(world, s->process.world_size);
    if (job.empty()) job = BoundedString(s->process.job, sizeof(s->process.job));
    file_run = BoundedString(s->process.run, sizeof(s->process.run));
  }
  if (by_rank.empty()) {
    fprintf(stderr, "%s: no trace files%s\n", in.c_str(), error.empty() ? "" : (": " + error).c_str());
    return 1;
  }
  const std::string run = file_run.empty() ? "run" : file_run;
  char round[64];
  const time_t now = time(nullptr);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(round, sizeof(round), "round-%Y%m%d-%H%M%S", &tm);
  const std::string run_dir = out + "/" + run, round_dir = run_dir + "/" + round;
  fs::create_directories(round_dir + "/first");
  fs::create_directories(round_dir + "/second");
  std::ofstream(run_dir + "/round.started") << round << "\n";

  std::vector<std::vector<std::pair<int32_t, std::string>>> nodes;
  for (const auto& [rank, path] : by_rank) {
    if (nodes.empty() || nodes.back().size() == size_t(per_node)) nodes.emplace_back();
    nodes.back().push_back({rank, path});
  }
  std::atomic<size_t> next{0}, failed{0};
  const auto t0 = std::chrono::steady_clock::now();
  auto work = [&] {
    for (size_t n; (n = next.fetch_add(1)) < nodes.size();) {
      char host[32];
      snprintf(host, sizeof(host), "node%05zu", n);
      NodeDump node;
      node.host = host;
      node.job = job;
      const std::string first = round_dir + "/first/" + host, second = round_dir + "/second/" + host;
      fs::create_directories(first);
      fs::create_directories(second);
      for (const auto& [rank, path] : nodes[n]) {
        const std::string name = fs::path(path).filename().string();
        const int from = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        const int to = open((first + "/" + name).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CompactCopyStats stats;
        std::string why;
        if (from < 0 || to < 0 || !WriteCompactCopy(from, path, to, kCompactBudgetBytes, &stats, &why)) {
          ++failed;
          fprintf(stderr, "%s: %s\n", path.c_str(), why.c_str());
        }
        if (from >= 0) close(from);
        if (to >= 0) close(to);
        std::error_code ec;
        fs::copy_file(first + "/" + name, second + "/" + name, ec);  // the same look twice: nobody moved
        if (ec) ++failed;
        NodeProcess p;
        p.pid = 100000 + rank;
        p.rank = rank;
        p.world_size = world;
        p.rank_from = "trace";
        p.trace = name;
        p.liveness = Liveness::kRunning;
        p.heartbeat_age_s = 0.05;
        p.state_before = p.state_after = "S";
        node.processes.push_back(p);
      }
      const std::string text = JsonText(NodeToJson(node), 1) + "\n";
      std::ofstream(first + "/" + kNodeFile) << text;
      std::ofstream(second + "/" + kNodeFile) << text;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < threads; ++k) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fprintf(stderr, "%zu nodes of %d ranks (%zu ranks, world %d) in %s, %.1f s\n", nodes.size(), per_node,
          by_rank.size(), world, round_dir.c_str(), s);
  printf("%s\n", file_run.c_str());
  return failed ? 1 : 0;
}
