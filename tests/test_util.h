// Helpers shared by the tests: temporary folders and running a program with
// extra environment, capturing its output and how it ended.
#pragma once

#include <string>
#include <utility>
#include <vector>

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

std::string ReadFileText(const std::string& path);
std::vector<std::string> ListTraceFiles(const std::string& dir);

}  // namespace hangtrace::testing
