#include "dump/native_stacks.h"
#include "tracer/file_locks.h"
#include "tracer/procfs.h"

#include <dirent.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/uio.h>
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
#include "tracer/frame_scan.h"
#include "tracer/glibc_threads.h"

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

// How each thread is read (docs/DUMP.md, "How stacks are captured"),
// decided from one look at /proc/PID/task/TID/syscall, which the kernel
// answers without stopping the thread: blocked in a system call, it is read
// where it is, from the stack pointer and pc that file gives and the
// process's memory (process_vm_readv), and the file is read again after
// (the same line: it stayed in the call); running, or with --stop-all, it
// is stopped (PTRACE_SEIZE + PTRACE_INTERRUPT) and unwound from all its
// registers. A ptrace stop is not invisible to a blocked thread: epoll_wait,
// sigtimedwait, semop and socket reads with a timeout return EINTR at once
// when interrupted, so a blocked thread is never stopped by default.
struct ThreadRegs {
  int tid = 0;
  bool stopped = false;      // ptrace-stopped: `regs` are all its registers
  bool blocked = false;      // read while blocked: sp and pc only
  Dwarf_Word regs[17] = {};  // DWARF order: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip
  Dwarf_Word fp = 0;         // blocked: a frame pointer a scan found (0: none)
  std::string syscall;       // the syscall file's line, as first read
  // Stopped: its stack from just below sp, copied while it was stopped
  // (the unwind reads it after the thread goes on).
  uint64_t copy_base = 0;
  std::vector<uint8_t> copy;
};

struct AttachedProcess {
  pid_t pid = 0;
  std::vector<ThreadRegs>* threads = nullptr;
  const ThreadRegs* current = nullptr;  // the thread being unwound
};

bool ReadRemoteWord(pid_t pid, uint64_t addr, uint64_t* word) {
  struct iovec local = {word, sizeof(*word)};
  struct iovec remote = {reinterpret_cast<void*>(addr), sizeof(*word)};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == ssize_t(sizeof(*word));
}

bool GetThread(Dwfl*, pid_t tid, void* dwfl_arg, void** thread_argp) {
  auto* a = static_cast<AttachedProcess*>(dwfl_arg);
  for (ThreadRegs& t : *a->threads) {
    if (t.tid == tid && (t.stopped || t.blocked)) {
      *thread_argp = &t;
      return true;
    }
  }
  return false;
}

pid_t NextThread(Dwfl*, void*, void**) { return 0; }  // every unwind names its thread

bool MemoryRead(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* dwfl_arg) {
  const auto* a = static_cast<AttachedProcess*>(dwfl_arg);
  const ThreadRegs* t = a->current;
  if (t && addr >= t->copy_base && addr - t->copy_base + sizeof(*result) <= t->copy.size()) {
    memcpy(result, t->copy.data() + (addr - t->copy_base), sizeof(*result));
    return true;
  }
  return ReadRemoteWord(a->pid, addr, result);
}

// A stopped thread's stack, from the red zone below its sp up to
// kStackCopyBytes or the end of its mapping, in one process_vm_readv of
// page-sized pieces (a transfer stops at the first piece it cannot read).
// Frames deeper than that are read live, where they have not changed
// unless the thread returned past them meanwhile.
constexpr uint64_t kStackCopyBytes = 512 * 1024;
void CopyStack(pid_t pid, ThreadRegs* t) {
  constexpr uint64_t kPage = 4096, kRedZone = 128;
  const uint64_t from = (t->regs[7] - kRedZone) & ~uint64_t(7);
  std::vector<struct iovec> remote;
  for (uint64_t at = from; at < from + kStackCopyBytes;) {
    const uint64_t next = std::min((at / kPage + 1) * kPage, from + kStackCopyBytes);
    remote.push_back({reinterpret_cast<void*>(at), size_t(next - at)});
    at = next;
  }
  t->copy.resize(kStackCopyBytes);
  struct iovec local = {t->copy.data(), t->copy.size()};
  const ssize_t n = process_vm_readv(pid, &local, 1, remote.data(), remote.size(), 0);
  t->copy.resize(n > 0 ? size_t(n) : 0);
  t->copy_base = from;
}

bool SetInitialRegisters(Dwfl_Thread* thread, void* thread_arg) {
  const auto* t = static_cast<const ThreadRegs*>(thread_arg);
  if (t->stopped) {
    if (!dwfl_thread_state_registers(thread, 0, 17, t->regs)) return false;
  } else {
    if (!dwfl_thread_state_registers(thread, 7, 1, &t->regs[7])) return false;  // rsp
    if (t->fp && !dwfl_thread_state_registers(thread, 6, 1, &t->fp)) return false;
  }
  dwfl_thread_state_register_pc(thread, t->regs[16]);
  return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {NextThread, GetThread, MemoryRead, SetInitialRegisters, nullptr,
                                                nullptr};

// Whether an unwind table covers `pc` (the module's .eh_frame or
// .debug_frame), where its function starts (0: unknown), and whether it is a thread's
// outermost frame (its return address undefined there: _start, clone3).
bool InTables(Dwfl* dwfl, Dwarf_Addr pc, Dwarf_Addr* start, Dwarf_Addr* end, bool* outermost) {
  *outermost = false;
  Dwfl_Module* mod = dwfl_addrmodule(dwfl, pc);
  if (!mod) return false;
  for (int kind = 0; kind < 2; ++kind) {
    Dwarf_Addr bias = 0;
    Dwarf_CFI* cfi = kind == 0 ? dwfl_module_eh_cfi(mod, &bias) : dwfl_module_dwarf_cfi(mod, &bias);
    Dwarf_Frame* frame = nullptr;
    if (!cfi || dwarf_cfi_addrframe(cfi, pc - bias, &frame) != 0) continue;
    Dwarf_Addr s = 0, e = 0;  // the CFI row's range
    bool signal = false;
    const int ra = dwarf_frame_info(frame, &s, &e, &signal);
    Dwarf_Op ops_mem[3];
    Dwarf_Op* ops = nullptr;
    size_t nops = 0;
    // "undefined" is no operations at ops_mem ("same value" is none at null).
    *outermost = ra >= 0 && dwarf_frame_register(frame, ra, ops_mem, &ops, &nops) == 0 && ops == ops_mem && nops == 0;
    free(frame);
    // The function's start: the symbol that covers the pc (the CFI row's
    // range is not the function's); 0 when no sized symbol does.
    GElf_Off off = 0;
    GElf_Sym sym;
    if (dwfl_module_addrinfo(mod, pc, &off, &sym, nullptr, nullptr, nullptr) && sym.st_size > 0 && off < sym.st_size) {
      *start = pc - off;
      *end = *start + sym.st_size;
    }
    return true;
  }
  return false;
}

// One unwind of a thread: its pcs (a caller's minus one: the call), whether
// it reached the outermost frame, how many frames no table covers, and the
// last frame's stack pointer and function.
struct Unwound {
  std::vector<uint64_t> pcs;
  bool whole = false;      // it reached the thread's outermost frame
  bool outermost = false;  // the last frame is one (libdwfl ends a failed unwind quietly too)
  size_t without_tables = 0;
  Dwarf_Word last_sp = 0;
  Dwarf_Addr last_start = 0, last_end = 0;
  std::string error;
};

struct UnwindState {
  Dwfl* dwfl;
  Unwound* out;
  size_t max;
};

int OnFrame(Dwfl_Frame* frame, void* arg) {
  auto* c = static_cast<UnwindState*>(arg);
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
  const Dwarf_Addr at = activation ? pc : pc - 1;
  c->out->pcs.push_back(at);
  c->out->last_start = c->out->last_end = 0;
  if (!InTables(c->dwfl, at, &c->out->last_start, &c->out->last_end, &c->out->outermost)) ++c->out->without_tables;
  if (dwfl_frame_reg(frame, 7, &c->out->last_sp) != 0) c->out->last_sp = 0;
  return c->out->pcs.size() >= c->max ? DWARF_CB_ABORT : DWARF_CB_OK;
}

Unwound UnwindThread(Dwfl* dwfl, int tid, size_t max) {
  Unwound u;
  UnwindState state{dwfl, &u, max};
  const int rc = dwfl_getthread_frames(dwfl, tid, OnFrame, &state);
  u.whole = rc == 0 && u.outermost;
  if (rc < 0) u.error = dwfl_errmsg(-1);
  return u;
}

// A blocked thread's unwind, continued past a frame that needs the frame
// pointer from one found on its stack (tracer/frame_scan.h), kept only when
// it reaches the outermost frame with every frame in a table.
Unwound UnwindBlocked(Dwfl* dwfl, pid_t pid, ThreadRegs* t, size_t max, bool* scanned) {
  *scanned = false;
  Unwound u = UnwindThread(dwfl, t->tid, max);
  if (u.whole || u.pcs.empty() || u.pcs.size() >= max || !u.last_sp) return u;
  const Unwound cut = u;
  auto read = [&](uint64_t addr, uint64_t* word) { return ReadRemoteWord(pid, addr, word); };
  *scanned = frame_scan::ForEachCandidate(read, cut.last_sp, cut.last_start, cut.last_end, [&](uint64_t fp) {
    t->fp = fp;
    Unwound tried = UnwindThread(dwfl, t->tid, max);
    if (tried.whole && tried.pcs.size() > cut.pcs.size() && tried.without_tables == cut.without_tables &&
        std::equal(cut.pcs.begin(), cut.pcs.end(), tried.pcs.begin())) {
      u = std::move(tried);
      return true;
    }
    return false;
  });
  if (!*scanned) t->fp = 0;
  return u;
}

// Where the symbols glibc's thread list is found by are in the process
// (glibc_threads.h), from the symbol tables of its C library and ld.so.
std::unordered_map<std::string, uint64_t> ThreadListSymbols(Dwfl* dwfl) {
  std::unordered_map<std::string, uint64_t> out;
  auto look = [](Dwfl_Module* mod, void**, const char* name, Dwarf_Addr, void* arg) -> int {
    const std::string file = name ? name : "";
    if (file.find("libc.so") == std::string::npos && file.find("ld-linux") == std::string::npos) return DWARF_CB_OK;
    auto* found = static_cast<std::unordered_map<std::string, uint64_t>*>(arg);
    const int n = dwfl_module_getsymtab(mod);
    for (int i = 0; i < n; ++i) {
      GElf_Sym sym;
      GElf_Addr addr = 0;
      const char* sym_name = dwfl_module_getsym_info(mod, i, &sym, &addr, nullptr, nullptr, nullptr);
      if (sym_name && (strncmp(sym_name, "_thread_db_", 11) == 0 || strcmp(sym_name, "_rtld_global") == 0)) {
        (*found)[sym_name] = addr;
      }
    }
    return DWARF_CB_OK;
  };
  dwfl_getmodules(dwfl, look, &out, 0);
  return out;
}

// /proc/PID/task/TID/syscall: blocked (with its sp and pc), running, or
// unreadable.
struct SyscallLook {
  bool read = false, running = false;
  uint64_t sp = 0, pc = 0;
  std::string line;
};

SyscallLook LookAt(const std::string& task) {
  SyscallLook l;
  l.line = ReadSmall(task + "/syscall");
  if (l.line.empty()) return l;
  if (l.line.rfind("running", 0) == 0) return l.read = l.running = true, l;
  std::istringstream in(l.line);
  std::vector<std::string> fields;
  for (std::string f; in >> f;) fields.push_back(f);
  if (fields.size() < 3) return l;
  l.sp = strtoull(fields[fields.size() - 2].c_str(), nullptr, 16);
  l.pc = strtoull(fields[fields.size() - 1].c_str(), nullptr, 16);
  l.read = l.sp && l.pc;
  return l;
}

// A thread the look saw blocked: read where it waits, from the look's two
// registers.
void ReadWhereBlocked(const SyscallLook& look, ThreadRegs* r) {
  r->blocked = true;
  r->regs[7] = look.sp;
  r->regs[16] = look.pc;
  r->syscall = look.line;
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
  std::vector<ThreadRegs> regs(tids.size());
  std::vector<int> to_stop;
  std::vector<size_t> to_stop_index;
  for (size_t i = 0; i < tids.size(); ++i) {
    DumpedThread& t = out.threads[i];
    t.tid = tids[i];
    regs[i].tid = tids[i];
    const std::string task = proc + "/task/" + std::to_string(t.tid);
    t.name = ReadSmall(task + "/comm");
    t.state = StateOf(task + "/stat");
    t.wchan = ReadSmall(task + "/wchan");
    if (t.wchan == "0") t.wchan.clear();
    const SyscallLook look = LookAt(task);
    t.syscall = look.line.substr(0, look.line.find(' '));
    if (t.state == 'S' || t.state == 'D') {
      const LockWait lock = FindLockWait(pid, look.line);
      t.lock_holder_pid = lock.holder_pid;
      t.lock_file = lock.file;
    }
    if (t.state == 'Z' || t.state == 'X') {
      t.error = "exited (its thread is a zombie): no stack to read";  // a main thread that called pthread_exit
      continue;
    }
    if (look.read && !look.running && !options.stop_all) {
      ReadWhereBlocked(look, &regs[i]);
    } else {
      to_stop.push_back(tids[i]);
      to_stop_index.push_back(i);
    }
  }
  // A thread running at the first look is looked at again, a few ms apart:
  // seen blocked, it is read where it waits; running at every look, it is
  // stopped only when it ran in user mode meanwhile (SafeToInterrupt): a
  // stop in the kernel cuts a long read short, or makes a call on its way
  // to sleep return EINTR.
  if (!options.stop_all && !to_stop.empty()) {
    std::vector<ThreadCpu> first_cpu(to_stop.size());
    std::vector<bool> have_cpu(to_stop.size()), running(to_stop.size(), true), stop(to_stop.size(), false);
    for (size_t k = 0; k < to_stop.size(); ++k) have_cpu[k] = ReadThreadCpu(pid, to_stop[k], &first_cpu[k]);
    for (int look_no = 1; look_no < kMaxRunningLooks; ++look_no) {
      usleep(kRunningLookGapUs);
      const bool last = look_no + 1 == kMaxRunningLooks;
      bool any = false;
      for (size_t k = 0; k < to_stop.size(); ++k) {
        if (!running[k]) continue;
        const SyscallLook look = LookAt(proc + "/task/" + std::to_string(to_stop[k]));
        if (look.read && !look.running) {
          ReadWhereBlocked(look, &regs[to_stop_index[k]]);
          running[k] = false;
          continue;
        }
        // Running: decided once it has run enough to tell where.
        ThreadCpu now;
        const bool known = have_cpu[k] && ReadThreadCpu(pid, to_stop[k], &now);
        const RunningVerdict verdict = JudgeRunning(known, last, first_cpu[k], now);
        if (verdict == RunningVerdict::kLookAgain) {
          any = true;
          continue;
        }
        running[k] = false;
        stop[k] = verdict == RunningVerdict::kInterrupt;
        if (!stop[k]) {
          out.threads[to_stop_index[k]].error =
              "running in the kernel (or starved) while looked at: not stopped, since a stop could cut its system call short "
              "(--stop-all reads it anyway)";
        }
      }
      if (!any) break;
    }
    std::vector<int> keep;
    std::vector<size_t> keep_index;
    for (size_t k = 0; k < to_stop.size(); ++k) {
      if (!stop[k]) continue;
      keep.push_back(to_stop[k]);
      keep_index.push_back(to_stop_index[k]);
    }
    to_stop.swap(keep);
    to_stop_index.swap(keep_index);
  }
  // The process's modules, before any thread is stopped (reading them
  // takes milliseconds, and says whether it runs CPython).
  static char* debuginfo_path = nullptr;
  static const Dwfl_Callbacks callbacks = {dwfl_linux_proc_find_elf, dwfl_standard_find_debuginfo, nullptr,
                                           &debuginfo_path};
  Dwfl* dwfl = dwfl_begin(&callbacks);
  AttachedProcess attached{pid, &regs};
  const bool dwfl_ok = dwfl && dwfl_linux_proc_report(dwfl, pid) == 0 &&
                       dwfl_report_end(dwfl, nullptr, nullptr) == 0 &&
                       dwfl_attach_state(dwfl, nullptr, pid, &kThreadCallbacks, &attached);
  const bool python = dwfl_ok && options.python && RunsPython(dwfl);

  // Threads to stop are stopped for as long as it takes to copy their
  // registers and stack, then let go: unwinding, naming and the rest work
  // on the copies. In a CPython process they stay stopped until its Python
  // frames, which live on the heap, are read.
  std::vector<bool> stopped;
  bool detached = false;
  auto detach_all = [&] {
    if (detached) return;
    for (size_t k = 0; k < to_stop.size(); ++k) {
      // Detach needs a stopped tracee; one that never stopped is detached
      // by the kernel when this process exits (and is not stopped by us
      // meanwhile: its interrupt takes effect only when it leaves the kernel).
      if (stopped[k] && ptrace(PTRACE_DETACH, to_stop[k], nullptr, nullptr) == 0) Forget(to_stop[k]);
    }
    detached = true;
  };
  {
    std::vector<DumpedThread> stop_results(to_stop.size());
    StopThreads(to_stop, options.thread_timeout_ms, &stopped, &stop_results);
    for (size_t k = 0; k < to_stop.size(); ++k) {
      const size_t i = to_stop_index[k];
      out.threads[i].error = stop_results[k].error;
      if (!stopped[k]) continue;
      ThreadRegs& r = regs[i];
#if defined(__x86_64__)
      user_regs_struct u;
      if (ptrace(PTRACE_GETREGS, r.tid, nullptr, &u) == 0) {
        const Dwarf_Word dwarf[17] = {u.rax, u.rdx, u.rcx, u.rbx, u.rsi, u.rdi, u.rbp, u.rsp, u.r8,
                                      u.r9,  u.r10, u.r11, u.r12, u.r13, u.r14, u.r15, u.rip};
        memcpy(r.regs, dwarf, sizeof(dwarf));
        r.stopped = true;
        out.threads[i].thread_pointer = u.fs_base;
        CopyStack(pid, &r);
      }
#endif
      if (!r.stopped) out.threads[i].error = "stopped, but its registers could not be read";
    }
  }
  if (!python) detach_all();

  // Unwind with libdwfl over our own thread callbacks: stopped threads from
  // all their registers and their stack's copy, blocked ones from two
  // registers and the live stack they wait on.
  std::vector<Unwound> unwound(tids.size());
  for (size_t i = 0; i < tids.size(); ++i) {
    DumpedThread& t = out.threads[i];
    ThreadRegs& r = regs[i];
    if ((r.stopped || r.blocked) && dwfl_ok) {
      Unwound& u = unwound[i];
      attached.current = &r;
      if (r.blocked) {
        for (int attempt = 0; attempt < 3; ++attempt) {
          bool scanned = false;
          u = UnwindBlocked(dwfl, pid, &r, options.max_frames, &scanned);
          t.frame_pointer_scan = scanned;
          const SyscallLook after = LookAt(proc + "/task/" + std::to_string(t.tid));
          t.moved = after.line != r.syscall;
          if (!t.moved || !after.read || after.running) break;
          ReadWhereBlocked(after, &r);  // blocked in another call now: read it there
          r.fp = 0;
        }
      } else {
        u = UnwindThread(dwfl, r.tid, options.max_frames);
      }
      attached.current = nullptr;
      if (u.pcs.empty()) t.error = "unwind failed: " + u.error;
    } else if ((r.stopped || r.blocked) && !dwfl_ok) {
      t.error = std::string("cannot read the process's modules: ") + dwfl_errmsg(-1);
    }
  }
  // A CPython process: every thread's Python frames, read while its threads
  // are still stopped or blocked, mixed into their native stacks below.
  // CPython before 3.11 names its threads by pthread_t only: a thread read
  // while blocked has its own from glibc's thread list.
  PythonFrames py;
  if (python) {
    const auto symbols = ThreadListSymbols(dwfl);
    glibc_threads::Walk(
        [&](const char* name) {
          auto it = symbols.find(name);
          return it == symbols.end() ? uint64_t(0) : it->second;
        },
        [&](uint64_t addr, uint64_t* word) { return ReadRemoteWord(pid, addr, word); },
        [&](int tid, uint64_t thread) {
          for (DumpedThread& t : out.threads) {
            if (t.tid == tid && !t.thread_pointer) t.thread_pointer = thread;
          }
          return true;
        });
    py = ReadPythonFrames(pid, dwfl);
    out.python_version = py.version;
    out.python_error = py.error;
  }
  detach_all();

  // Naming, with every thread let go.
  std::unordered_map<uint64_t, Frame> named;  // per-pc cache
  for (size_t i = 0; i < tids.size(); ++i) {
    DumpedThread& t = out.threads[i];
    if (!unwound[i].pcs.empty()) {
      t.method = regs[i].blocked ? "blocked" : "ptrace";
      for (uint64_t pc : unwound[i].pcs) {
        auto [it, fresh] = named.emplace(pc, Frame());
        if (fresh) it->second = NameFrame(dwfl, pc, options.symbols);
        t.frames.push_back(it->second);
      }
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
  for (PyThreadFrames& pt : py.threads) {
    DumpedThread* t = nullptr;
    for (DumpedThread& x : out.threads) {
      if ((pt.tid && uint32_t(x.tid) == pt.tid) || (!pt.tid && x.thread_pointer && x.thread_pointer == pt.thread_id)) t = &x;
    }
    if (!t) continue;  // a thread state without a thread (being created or torn down)
    t->frames = MixPythonFrames(t->frames, pt.frames);
  }
  if (dwfl) dwfl_end(dwfl);
  out.state_after = StateOf(proc + "/stat");
  if (out.state_before == 'T' && out.state_after != 'T') {
    kill(pid, SIGSTOP);  // it was stopped before the dump: keep it so
    out.state_after = 'T';
  }
  out.seconds = Now() - t0;
  return out;
}

}  // namespace hangtrace
