// Compacts every trace file of a folder as `hangtrace dump` does on a node
// (merger/trace_compact.h), whatever host wrote it: for bench_compact.sh,
// on `hangtrace simulate`'s synthetic jobs. Prints files, bytes before and
// after (allocated), and the time, on several threads.
//   compact_folder IN OUT [THREADS]
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "merger/trace_compact.h"
#include "merger/trace_reader.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s IN OUT [THREADS]\n", argv[0]);
    return 2;
  }
  const std::string in = argv[1], out = argv[2];
  const unsigned threads = argc > 3 ? unsigned(atoi(argv[3])) : std::max(1u, std::thread::hardware_concurrency());
  std::string error;
  const std::vector<std::string> files = hangtrace::FindTraceFiles(in, &error);
  if (!error.empty()) {
    fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  std::filesystem::create_directories(out);
  std::atomic<size_t> next{0}, failed{0};
  std::atomic<uint64_t> before{0}, after{0}, records{0};
  const auto t0 = std::chrono::steady_clock::now();
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      const std::string& path = files[i];
      const std::string name = out + "/" + std::filesystem::path(path).filename().string();
      int from = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      int to = open(name.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      hangtrace::CompactCopyStats stats;
      std::string why;
      if (from < 0 || to < 0 || !hangtrace::WriteCompactCopy(from, path, to, hangtrace::kCompactBudgetBytes, &stats, &why)) {
        ++failed;
        fprintf(stderr, "%s: %s\n", path.c_str(), why.c_str());
      }
      before += stats.source_bytes;
      after += stats.bytes;
      records += stats.records;
      if (from >= 0) close(from);
      if (to >= 0) close(to);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < threads; ++k) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("%zu files: %.1f MB -> %.1f MB (%.1f KB -> %.1f KB per file), %llu records kept, %.2f s\n", files.size(),
         double(before) / 1e6, double(after) / 1e6, double(before) / 1024.0 / double(files.size()),
         double(after) / 1024.0 / double(files.size()), static_cast<unsigned long long>(records.load()), s);
  return failed ? 1 : 0;
}
