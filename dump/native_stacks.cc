#include "dump/native_stacks.h"

#include <cxxabi.h>
#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unordered_map>

namespace hangtrace {
namespace {

// Threads this process has seized and not yet detached, for DetachAllTraced
// (read from a signal handler: fixed array, atomic slots).
constexpr int kMaxAttached = 4096;
int g_attached[kMaxAttached];

void Remember(int tid) {
  for (int& slot : g_attached) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&slot, &expected, tid, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
  }
}

void Forget(int tid) {
  for (int& slot : g_attached) {
    int expected = tid;
    if (__atomic_compare_exchange_n(&slot, &expected, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
  }
}

std::string ReadSmall(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

// Field 3 of /proc/.../stat (after the parenthesized name).
char StateOf(const std::string& stat_path) {
  std::string s = ReadSmall(stat_path);
  size_t p = s.rfind(')');
  return p != std::string::npos && p + 2 < s.size() ? s[p + 2] : '?';
}

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

std::string Demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  free(d);
  return out;
}

// Seizes and interrupts one thread; true when it stopped within the timeout.
bool StopThread(int tid, int timeout_ms, std::string* error) {
  if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
    *error = std::string("ptrace(SEIZE): ") + strerror(errno) +
             (errno == EPERM ? " (another tracer, or ptrace restricted: see docs/TROUBLESHOOTING.md)" : "");
    return false;
  }
  Remember(tid);
  if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
    *error = std::string("ptrace(INTERRUPT): ") + strerror(errno);
    return false;
  }
  const double deadline = Now() + timeout_ms / 1000.0;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(tid, &status, __WALL | WNOHANG);
    if (r == tid) {
      if (WIFSTOPPED(status)) return true;
      *error = "exited while being attached";
      Forget(tid);
      return false;
    }
    if (r < 0) {
      *error = std::string("waitpid: ") + strerror(errno);
      return false;
    }
    if (Now() > deadline) {
      *error = "did not stop within " + std::to_string(timeout_ms) + " ms (uninterruptible sleep?)";
      return false;
    }
    usleep(200);
  }
}

struct FrameCollector {
  std::vector<uint64_t> pcs;
  size_t max;
};

int OnFrame(Dwfl_Frame* frame, void* arg) {
  auto* c = static_cast<FrameCollector*>(arg);
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
  // A return address points after the call: look up the call itself.
  c->pcs.push_back(activation ? pc : pc - 1);
  return c->pcs.size() >= c->max ? DWARF_CB_ABORT : DWARF_CB_OK;
}

}  // namespace

void DetachAllTraced() {
  for (int& slot : g_attached) {
    int tid = __atomic_exchange_n(&slot, 0, __ATOMIC_ACQ_REL);
    if (tid > 0) ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
  }
}

ProcessStacks CaptureProcessStacks(pid_t pid, const StackOptions& options) {
  ProcessStacks out;
  out.pid = pid;
  const double t0 = Now();
  const std::string proc = "/proc/" + std::to_string(pid);
  struct stat st;
  if (stat(proc.c_str(), &st) != 0) {
    out.error = "process " + std::to_string(pid) + " is gone";
    return out;
  }
  if (geteuid() != 0 && st.st_uid != geteuid()) {
    out.error = "process " + std::to_string(pid) + " belongs to uid " + std::to_string(st.st_uid) +
                ": run the dump as that user, or as root";
    return out;
  }
  out.state_before = StateOf(proc + "/stat");

  std::vector<int> tids;
  if (DIR* d = opendir((proc + "/task").c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') tids.push_back(atoi(e->d_name));
    }
    closedir(d);
  }
  std::sort(tids.begin(), tids.end());

  std::vector<bool> stopped(tids.size(), false);
  out.threads.resize(tids.size());
  for (size_t i = 0; i < tids.size(); ++i) {
    ThreadStack& t = out.threads[i];
    t.tid = tids[i];
    const std::string task = proc + "/task/" + std::to_string(t.tid);
    t.name = ReadSmall(task + "/comm");
    t.state = StateOf(task + "/stat");
    t.wchan = ReadSmall(task + "/wchan");
    if (t.wchan == "0") t.wchan.clear();
    std::string sc = ReadSmall(task + "/syscall");
    t.syscall = sc.substr(0, sc.find(' '));
    stopped[i] = StopThread(t.tid, options.thread_timeout_ms, &t.error);
  }

  // Unwind the stopped threads with libdwfl, which must not attach itself.
  static char* debuginfo_path = nullptr;
  static const Dwfl_Callbacks callbacks = {dwfl_linux_proc_find_elf, dwfl_standard_find_debuginfo, nullptr,
                                           &debuginfo_path};
  Dwfl* dwfl = dwfl_begin(&callbacks);
  bool dwfl_ok = dwfl && dwfl_linux_proc_report(dwfl, pid) == 0 && dwfl_report_end(dwfl, nullptr, nullptr) == 0 &&
                 dwfl_linux_proc_attach(dwfl, pid, true) == 0;
  std::unordered_map<uint64_t, std::string> names;  // per-PC cache
  for (size_t i = 0; i < tids.size(); ++i) {
    ThreadStack& t = out.threads[i];
    if (stopped[i] && dwfl_ok) {
      FrameCollector c{{}, options.max_frames};
      dwfl_getthread_frames(dwfl, t.tid, OnFrame, &c);
      if (!c.pcs.empty()) {
        t.method = "ptrace";
        for (uint64_t pc : c.pcs) {
          auto [it, fresh] = names.emplace(pc, std::string());
          if (fresh) {
            Dwfl_Module* mod = dwfl_addrmodule(dwfl, pc);
            const char* sym = mod && options.symbols ? dwfl_module_addrname(mod, pc) : nullptr;
            if (sym) {
              std::string name = Demangle(sym);
              it->second = name.substr(0, name.find('@'));  // "clock_nanosleep@GLIBC_2.2.5"
            } else {
              // No symbol: the module and offset, which are the same in
              // every rank (an absolute address is not, with ASLR).
              Dwarf_Addr start = 0;
              const char* file = mod ? dwfl_module_info(mod, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr) : nullptr;
              char text[512];
              if (file) {
                const char* base = strrchr(file, '/');
                snprintf(text, sizeof(text), "%s+0x%llx", base ? base + 1 : file,
                         static_cast<unsigned long long>(pc - start));
              } else {
                snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(pc));
              }
              it->second = text;
            }
          }
          t.frames.push_back(it->second);
        }
      } else {
        t.error = std::string("unwind failed: ") + dwfl_errmsg(-1);
      }
    } else if (stopped[i]) {
      t.error = std::string("cannot read the process's modules: ") + dwfl_errmsg(-1);
    }
    if (t.frames.empty()) {
      // The kernel's view (readable by root): where a D-state thread sleeps.
      std::istringstream ks(ReadSmall(proc + "/task/" + std::to_string(t.tid) + "/stack"));
      for (std::string line; std::getline(ks, line);) {
        size_t p = line.find("] ");
        if (p != std::string::npos) t.frames.push_back("[kernel] " + line.substr(p + 2));
      }
      t.method = t.frames.empty() ? "none" : "proc";
      if (t.frames.empty() && !t.wchan.empty()) t.frames.push_back("[kernel] " + t.wchan);
    }
  }
  if (dwfl) dwfl_end(dwfl);
  for (size_t i = 0; i < tids.size(); ++i) {
    // Detach needs a stopped tracee; one that never stopped is detached by
    // the kernel when this process exits (and is not stopped by us meanwhile:
    // its interrupt takes effect only when it leaves the kernel).
    if (stopped[i] && ptrace(PTRACE_DETACH, tids[i], nullptr, nullptr) == 0) Forget(tids[i]);
  }
  out.state_after = StateOf(proc + "/stat");
  if (out.state_before == 'T' && out.state_after != 'T') {
    kill(pid, SIGSTOP);  // it was stopped before the dump: keep it so
    out.state_after = 'T';
  }
  out.seconds = Now() - t0;
  return out;
}

}  // namespace hangtrace
