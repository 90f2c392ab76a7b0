#include "cmds/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace hangtrace {

int Capture(const std::vector<std::string>& argv, double timeout_s, std::string* out, std::string* err,
            const std::function<void(double)>& tick) {
  int po[2], pe[2];
  if (pipe(po) || pipe(pe)) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(pe[1], 2);
    close(po[0]);
    close(pe[0]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    fprintf(stderr, "cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  fcntl(po[0], F_SETFL, O_NONBLOCK);
  fcntl(pe[0], F_SETFL, O_NONBLOCK);
  auto start = std::chrono::steady_clock::now();
  int status = 0;
  bool timed_out = false, termed = false;
  for (;;) {
    char buf[4096];
    ssize_t n;
    while ((n = read(po[0], buf, sizeof(buf))) > 0) out->append(buf, size_t(n));
    while ((n = read(pe[0], buf, sizeof(buf))) > 0) err->append(buf, size_t(n));
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (spent > timeout_s && !termed) {
      kill(pid, SIGTERM);  // srun forwards it to the dumps, which detach and exit
      termed = timed_out = true;
    }
    if (spent > timeout_s + 3) kill(pid, SIGKILL);
    if (tick) tick(spent);
    usleep(20 * 1000);
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(po[0], buf, sizeof(buf))) > 0) out->append(buf, size_t(n));
  while ((n = read(pe[0], buf, sizeof(buf))) > 0) err->append(buf, size_t(n));
  close(po[0]);
  close(pe[0]);
  if (timed_out) return -2;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, size_t(n)) : "hangtrace";
}

}  // namespace hangtrace
