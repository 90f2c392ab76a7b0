// Helpers shared by the tests: temporary folders and running a program with
// extra environment, capturing its output and how it ended.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "merger/trace_reader.h"

namespace hangtrace::testing {

// A fresh folder under /tmp, removed (recursively) at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct ProgramResult {
  int exit_code = -1;    // when it exited
  int term_signal = 0;   // when a signal ended it
  std::string out, err;
};

// Runs argv with `env` added to this process's environment, in a process
// group of its own. After `timeout_s` the whole group gets SIGTERM, then
// SIGKILL, and term_signal is SIGKILL.
ProgramResult RunProgram(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         double timeout_s = 30);

// What mpirun needs to run as root (the tests do, on CI).
inline const std::vector<std::pair<std::string, std::string>> kMpiAsRoot = {
    {"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};

// Records of `kind` in a file, of call `call` ("" for any call).
size_t CountKind(const TraceSnapshot& s, fmt::EventKind kind, const std::string& call = "");

std::string ReadFileText(const std::string& path);
std::vector<std::string> ListTraceFiles(const std::string& dir);

}  // namespace hangtrace::testing
