#include "dump/native_stacks.h"
#include "tracer/file_locks.h"

#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "dump/python_frames.h"
#include "merger/symbolize.h"

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

// Seizes and interrupts every thread, then waits for all of them with one
// deadline (a process with many threads in D state costs one timeout, not
// one per thread). stopped[i] says which did stop.
void StopThreads(const std::vector<int>& tids, int timeout_ms, std::vector<bool>* stopped,
                 std::vector<DumpedThread>* threads) {
  stopped->assign(tids.size(), false);
  std::vector<bool> waiting(tids.size(), false);
  for (size_t i = 0; i < tids.size(); ++i) {
    std::string& error = (*threads)[i].error;
    if (ptrace(PTRACE_SEIZE, tids[i], nullptr, nullptr) != 0) {
      error = std::string("ptrace(SEIZE): ") + strerror(errno) +
              (errno == EPERM ? " (another tracer, or ptrace restricted: see docs/TROUBLESHOOTING.md)" : "");
      continue;
    }
    Remember(tids[i]);
    if (ptrace(PTRACE_INTERRUPT, tids[i], nullptr, nullptr) != 0) {
      error = std::string("ptrace(INTERRUPT): ") + strerror(errno);
      continue;
    }
    waiting[i] = true;
  }
  const double deadline = Now() + timeout_ms / 1000.0;
  for (size_t left = std::count(waiting.begin(), waiting.end(), true); left > 0;) {
    for (size_t i = 0; i < tids.size(); ++i) {
      if (!waiting[i]) continue;
      int status = 0;
      pid_t r = waitpid(tids[i], &status, __WALL | WNOHANG);
      if (r == 0) continue;
      waiting[i] = false;
      --left;
      if (r == tids[i] && WIFSTOPPED(status)) {
        (*stopped)[i] = true;
      } else if (r == tids[i]) {
        (*threads)[i].error = "exited while being attached";
        Forget(tids[i]);
      } else {
        (*threads)[i].error = std::string("waitpid: ") + strerror(errno);
      }
    }
    if (left == 0) break;
    if (Now() > deadline) {
      for (size_t i = 0; i < tids.size(); ++i) {
        if (waiting[i]) {
          (*threads)[i].error = "did not stop within " + std::to_string(timeout_ms) + " ms (uninterruptible sleep?)";
        }
      }
      break;
    }
    usleep(200);
  }
}

// A native frame of the live process: its module and the pc's offset in
// that file (what the analyzer keys frames by), named by libdwfl.
Frame NameFrame(Dwfl* dwfl, uint64_t pc, bool symbols) {
  Frame f;
  f.offset = pc;
  Dwfl_Module* mod = dwfl_addrmodule(dwfl, pc);
  if (!mod) return f;
  const char* file = dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  GElf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(mod, &bias);
  size_t nphdr = 0;
  if (file && elf && elf_getphdrnum(elf, &nphdr) == 0) {
    for (size_t i = 0; i < nphdr; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, int(i), &ph) && ph.p_type == PT_LOAD && pc - bias >= ph.p_vaddr &&
          pc - bias < ph.p_vaddr + ph.p_memsz) {
        f.module = file;
        f.offset = pc - bias - ph.p_vaddr + ph.p_offset;
        break;
      }
    }
  }
  if (!symbols) return f;
  // The processes of a job run the same files: a name found in one is the
  // name in all. Naming reads the debug information, which Debian's -dbg
  // packages compress (zlib): without this, each process of a node
  // inflated libc's again (60% of a dump's time for 8 ranks).
  static std::mutex names_mu;
  static std::unordered_map<std::string, Frame> names;  // by build id (or file) and offset
  std::string key;
  if (!f.module.empty()) {
    const unsigned char* id = nullptr;
    GElf_Addr id_at = 0;
    const int n = dwfl_module_build_id(mod, &id, &id_at);
    key = n > 0 ? std::string(reinterpret_cast<const char*>(id), size_t(n)) : f.module;
    key.append(reinterpret_cast<const char*>(&f.offset), sizeof(f.offset));
    std::lock_guard<std::mutex> lock(names_mu);
    if (auto it = names.find(key); it != names.end()) {
      f.func = it->second.func, f.file = it->second.file, f.line = it->second.line;
      return f;
    }
  }
  GElf_Off off = 0;
  GElf_Sym sym;
  if (const char* name = dwfl_module_addrinfo(mod, pc, &off, &sym, nullptr, nullptr, nullptr)) {
    f.func = Demangle(name);
    f.func = f.func.substr(0, f.func.find('@'));  // "clock_nanosleep@GLIBC_2.2.5"
  }
  if (Dwfl_Line* line = dwfl_module_getsrc(mod, pc)) {
    int lineno = 0;
    const char* src = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
    if (src && lineno > 0) {
      f.file = src;
      f.line = lineno;
    }
  }
  if (!key.empty()) {
    std::lock_guard<std::mutex> lock(names_mu);
    names.emplace(key, f);
  }
  return f;
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

  out.threads.resize(tids.size());
  for (size_t i = 0; i < tids.size(); ++i) {
    DumpedThread& t = out.threads[i];
    t.tid = tids[i];
    const std::string task = proc + "/task/" + std::to_string(t.tid);
    t.name = ReadSmall(task + "/comm");
    t.state = StateOf(task + "/stat");
    t.wchan = ReadSmall(task + "/wchan");
    if (t.wchan == "0") t.wchan.clear();
    std::string sc = ReadSmall(task + "/syscall");
    t.syscall = sc.substr(0, sc.find(' '));
    if (t.state == 'S' || t.state == 'D') {
      const LockWait lock = FindLockWait(pid, sc);
      t.lock_holder_pid = lock.holder_pid;
      t.lock_file = lock.file;
    }
  }
  std::vector<bool> stopped;
  StopThreads(tids, options.thread_timeout_ms, &stopped, &out.threads);

  // Unwind the stopped threads with libdwfl, which must not attach itself.
  static char* debuginfo_path = nullptr;
  static const Dwfl_Callbacks callbacks = {dwfl_linux_proc_find_elf, dwfl_standard_find_debuginfo, nullptr,
                                           &debuginfo_path};
  Dwfl* dwfl = dwfl_begin(&callbacks);
  bool dwfl_ok = dwfl && dwfl_linux_proc_report(dwfl, pid) == 0 && dwfl_report_end(dwfl, nullptr, nullptr) == 0 &&
                 dwfl_linux_proc_attach(dwfl, pid, true) == 0;
  std::unordered_map<uint64_t, Frame> named;  // per-pc cache
  for (size_t i = 0; i < tids.size(); ++i) {
    DumpedThread& t = out.threads[i];
#if defined(__x86_64__)
    user_regs_struct regs;
    if (stopped[i] && ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs) == 0) t.thread_pointer = regs.fs_base;
#endif
    if (stopped[i] && dwfl_ok) {
      FrameCollector c{{}, options.max_frames};
      dwfl_getthread_frames(dwfl, t.tid, OnFrame, &c);
      if (!c.pcs.empty()) {
        t.method = "ptrace";
        for (uint64_t pc : c.pcs) {
          auto [it, fresh] = named.emplace(pc, Frame());
          if (fresh) it->second = NameFrame(dwfl, pc, options.symbols);
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
        if (p == std::string::npos) continue;
        Frame k;
        k.lang = Frame::Lang::kKernel;
        k.func = line.substr(p + 2);
        t.frames.push_back(k);
      }
      t.method = t.frames.empty() ? "none" : "proc";
      if (t.frames.empty() && !t.wchan.empty()) {
        Frame k;
        k.lang = Frame::Lang::kKernel;
        k.func = t.wchan;
        t.frames.push_back(k);
      }
    }
  }
  // A CPython process: every thread's Python frames, read while its threads
  // are still stopped, mixed into their native stacks.
  if (dwfl_ok && options.python) {
    PythonFrames py = ReadPythonFrames(pid, dwfl);
    out.python_version = py.version;
    out.python_error = py.error;
    for (PyThreadFrames& pt : py.threads) {
      DumpedThread* t = nullptr;
      for (DumpedThread& x : out.threads) {
        if ((pt.tid && uint32_t(x.tid) == pt.tid) || (!pt.tid && x.thread_pointer && x.thread_pointer == pt.thread_id)) t = &x;
      }
      if (!t) continue;  // a thread state without a thread (being created or torn down)
      t->frames = MixPythonFrames(t->frames, pt.frames);
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
