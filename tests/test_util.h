// Helpers shared by the tests: temporary folders and running a program with
// extra environment, capturing its output and how it ended.
#pragma once

#include <sys/types.h>

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

// A program started in the background (its own process group), ended with
// the whole group (SIGKILL) when this object goes away.
class Started {
 public:
  Started(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env);
  ~Started();
  pid_t pid() const { return pid_; }
  // Waits until its standard output holds `text`; false after `timeout_s`
  // or when it ended first. Output read so far is in out().
  bool WaitFor(const std::string& text, double timeout_s);
  const std::string& out() const { return out_; }
  // Waits for it to end; its exit code, or -1 when a signal ended it (or
  // it did not end in time).
  int Wait(double timeout_s);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string out_;
};

// What mpirun needs to run as root (the tests do, on CI); and no automatic
// report, which would write into the current folder and print a report in
// place of the watchdog lines these tests read (the auto-* scenarios of
// tests/jobs and tests/apps, and tests/slurm, test it).
inline const std::vector<std::pair<std::string, std::string>> kMpiAsRoot = {
    {"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}, {"HANGTRACE_REPORT", "0"}};

// Records of `kind` in a file, of call `call` ("" for any call).
size_t CountKind(const TraceSnapshot& s, fmt::EventKind kind, const std::string& call = "");

// Makes the calling (forked) process a session of its own, as a job
// started from a shell is: test_util.cc says why.
void StartOwnSession();

std::string ReadFileText(const std::string& path);
std::vector<std::string> ListTraceFiles(const std::string& dir);

}  // namespace hangtrace::testing
