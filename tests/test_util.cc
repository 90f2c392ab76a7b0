#include "tests/test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "merger/trace_reader.h"

namespace hangtrace::testing {

TempDir::TempDir() {
  char tmpl[] = "/tmp/hangtrace-test-XXXXXX";
  path_ = mkdtemp(tmpl);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A program a test starts runs in a session of its own: one process group
// (a timeout ends everything it started), and, where the kernel groups
// sessions for scheduling (autogroup), its own fair share of the CPUs. An
// oversubscribed MPI job whose ranks poll and yield got almost none beside
// busy processes of the same session (4 ranks, 0.3% of a core each, beside
// 8 busy loops: 5,000 communicators took minutes, untraced as traced).
void StartOwnSession() {
  if (setsid() < 0) setpgid(0, 0);
}

ProgramResult RunProgram(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& env, double timeout_s) {
  TempDir io;
  std::string out = io.path() + "/out", err = io.path() + "/err";
  pid_t pid = fork();
  if (pid == 0) {
    StartOwnSession();
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  ProgramResult r;
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      // The whole group: a launcher (mpirun) and every rank it started,
      // stopped ones too (SIGKILL ends a SIGSTOPped process).
      kill(-pid, SIGTERM);
      for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      status = SIGKILL;  // reported as killed by the timeout
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  r.out = ReadFileText(out);
  r.err = ReadFileText(err);
  return r;
}

Started::Started(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env) {
  int fds[2];
  if (pipe(fds) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    StartOwnSession();
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    dup2(fds[1], 1);
    close(fds[0]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  out_fd_ = fds[0];
  fcntl(out_fd_, F_SETFL, O_NONBLOCK);
}

Started::~Started() {
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

bool Started::WaitFor(const std::string& text, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (out_.find(text) == std::string::npos) {
    char buf[4096];
    ssize_t n = read(out_fd_, buf, sizeof(buf));
    if (n > 0) {
      out_.append(buf, size_t(n));
      continue;
    }
    if (n == 0 || std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

int Started::Wait(double timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  // Its output is read meanwhile (a full pipe would stop it) and to the end.
  auto drain = [&] {
    char buf[4096];
    for (ssize_t n; (n = read(out_fd_, buf, sizeof(buf))) > 0;) out_.append(buf, size_t(n));
  };
  while (pid_ > 0) {
    drain();
    pid_t w = waitpid(pid_, &status, WNOHANG);
    if (w == pid_) {
      pid_ = -1;
      // What its children (mpirun's ranks) still hold of the pipe.
      for (int i = 0; i < 20; ++i) {
        drain();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

std::vector<std::string> ListTraceFiles(const std::string& dir) {
  std::string error;
  return FindTraceFiles(dir, &error);
}

size_t CountKind(const TraceSnapshot& s, fmt::EventKind kind, const std::string& call) {
  return size_t(std::count_if(s.events.begin(), s.events.end(), [&](const Event& e) {
    return e.rec.kind == uint8_t(kind) && (call.empty() || s.CallName(e.rec.call) == call);
  }));
}

}  // namespace hangtrace::testing
