// Process start cost, for bench_start.sh. Two modes:
//
//   process_start spawn ROUNDS LIB HANGTRACE [VAR=VALUE...] -- PROGRAM [ARGS...]
//     Each round starts PROGRAM three ways, one after the other (so drift
//     hits all alike): untraced, with LD_PRELOAD=LIB, and under
//     `HANGTRACE run --`; prints "round untraced_ms preload_ms run_ms",
//     each the wall time from posix_spawn to its wait. VAR=VALUE are set
//     for PROGRAM only (a rank's variables, which its launcher sets and
//     this process, its parent, does not have).
//
//   process_start fork COUNT
//     Forks COUNT children that _exit(0) at once and prints the median
//     microseconds from fork to the parent's wait (the child's whole life:
//     the atfork handlers on both sides, the child's exit). Run it traced
//     and untraced to compare.
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

// The environment without LD_PRELOAD and HANGTRACE_*, plus `extra`.
std::vector<std::string> CleanEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0 || strncmp(*e, "HANGTRACE_", 10) == 0) continue;
    env.emplace_back(*e);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

double TimeSpawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::vector<char*> av, ev;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env) ev.push_back(const_cast<char*>(e.c_str()));
  av.push_back(nullptr);
  ev.push_back(nullptr);
  const double start = NowMs();
  pid_t pid;
  if (posix_spawnp(&pid, av[0], nullptr, nullptr, av.data(), ev.data()) != 0) {
    perror(av[0]);
    exit(2);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const double took = NowMs() - start;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "%s did not exit 0 (status 0x%x)\n", av[0], status);
    exit(2);
  }
  return took;
}

int Spawn(int argc, char** argv) {
  int dashes = 5;
  while (dashes < argc && strcmp(argv[dashes], "--") != 0) ++dashes;
  if (argc < 5 || dashes + 1 >= argc) {
    fprintf(stderr, "usage: process_start spawn ROUNDS LIB HANGTRACE [VAR=VALUE...] -- PROGRAM [ARGS...]\n");
    return 2;
  }
  const int rounds = atoi(argv[2]);
  const std::string lib = argv[3], hangtrace = argv[4];
  std::vector<std::string> extra(argv + 5, argv + dashes);
  std::vector<std::string> program(argv + dashes + 1, argv + argc);
  std::vector<std::string> under_run = {hangtrace, "run", "--"};
  under_run.insert(under_run.end(), program.begin(), program.end());
  const auto plain = CleanEnvironment(extra);
  extra.push_back("LD_PRELOAD=" + lib);
  const auto preload = CleanEnvironment(extra);
  printf("round  untraced_ms  preload_ms  run_ms\n");
  for (int i = 1; i <= rounds; ++i) {
    const double a = TimeSpawn(program, plain);
    const double b = TimeSpawn(program, preload);
    const double c = TimeSpawn(under_run, plain);
    printf("%d  %.4f  %.4f  %.4f\n", i, a, b, c);
  }
  return 0;
}

int Fork(int argc, char** argv) {
  const int count = argc > 2 ? atoi(argv[2]) : 200;
  std::vector<double> us;
  for (int i = 0; i < count; ++i) {
    const double start = NowMs();
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    int status = 0;
    waitpid(pid, &status, 0);
    us.push_back((NowMs() - start) * 1e3);
  }
  std::sort(us.begin(), us.end());
  printf("fork_us %.1f\n", us[us.size() / 2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "spawn") == 0) return Spawn(argc, argv);
  if (argc > 1 && strcmp(argv[1], "fork") == 0) return Fork(argc, argv);
  fprintf(stderr, "usage: process_start spawn ROUNDS LIB HANGTRACE [VAR=VALUE...] -- PROGRAM [ARGS...] | fork COUNT\n");
  return 2;
}
