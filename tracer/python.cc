// Python frames inside the process, captured by CPython's own machinery.
//
// CPython's faulthandler dumps every thread's Python stack from a watchdog
// thread that holds no GIL, with _Py_DumpTracebackThreads(fd, interp,
// current): it reads the interpreter's thread list and frames without locks
// or allocation and writes "Thread 0x... / File "f", line N in func" text
// with write(2). The runtime does the same, at the moment the native stacks
// are taken, while every other thread of the process is held in the stack
// signal's handler (stacks.cc), so no frame changes under the reader and
// the Python frames belong to the same instant as the native ones.
//
// The function's signature, `const char* (int, PyInterpreterState*,
// PyThreadState*)`, was read from the headers of each CPython it is used
// with (3.6 to 3.13; tests/test_python.cc checks it against every version
// installed). CPython 3.9, 3.10 and 3.13 do not export it: then it is taken
// from the symbol table of the library on disk, checked against an exported
// neighbour. Any other version, or a stripped build, says so in the file
// (ProcessInfo::python_status) and nothing else changes.
#include "tracer/python.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tracer/internal.h"
#include "tracer/runtime.h"

namespace hangtrace {
namespace {

using DumpFn = const char* (*)(int fd, void* interp, void* current_tstate);
using IsInitializedFn = int (*)();
using GetVersionFn = const char* (*)();

struct Interpreter {
  bool probed = false;         // the lookup below ran to a conclusion
  uint32_t version = 0;        // PY_VERSION_HEX (major, minor, micro)
  fmt::PythonStatus status = fmt::PythonStatus::kNone;
  IsInitializedFn is_initialized = nullptr;
  DumpFn dump = nullptr;
};
Interpreter g_python;
int g_memfd = -1;

// The oldest and newest CPython whose _Py_DumpTracebackThreads signature
// was read from its headers.
constexpr uint32_t kOldestKnown = 0x03060000;
constexpr uint32_t kNewestKnown = 0x030d00ff;

// "3.11.2 (main, ...)" -> 0x030b0200.
uint32_t ParseVersion(const char* text) {
  unsigned major = 0, minor = 0, micro = 0;
  if (!text || sscanf(text, "%u.%u.%u", &major, &minor, &micro) < 2) return 0;
  return (major << 24) | (minor << 16) | (micro << 8);
}

// The value of `names[i]` in the ELF symbol table (.symtab) of the file at
// `path`, 0 when absent. Reads the section headers and the table with
// pread: no mapping of a file another process may be rewriting.
void ReadSymtab(const char* path, const char* const* names, uint64_t* values, int n) {
  for (int i = 0; i < n; ++i) values[i] = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  Elf64_Ehdr eh;
  std::vector<Elf64_Shdr> sh;
  if (pread(fd, &eh, sizeof(eh), 0) == ssize_t(sizeof(eh)) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shnum > 0 &&
      eh.e_shnum < 4096) {
    sh.resize(eh.e_shnum);
    if (pread(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), off_t(eh.e_shoff)) != ssize_t(sh.size() * sizeof(Elf64_Shdr))) {
      sh.clear();
    }
  }
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_SYMTAB || s.sh_link >= sh.size() || s.sh_entsize != sizeof(Elf64_Sym)) continue;
    const Elf64_Shdr& strs = sh[s.sh_link];
    if (s.sh_size > (256u << 20) || strs.sh_size > (256u << 20)) break;
    std::vector<Elf64_Sym> syms(s.sh_size / sizeof(Elf64_Sym));
    std::vector<char> text(strs.sh_size + 1, '\0');
    if (pread(fd, syms.data(), syms.size() * sizeof(Elf64_Sym), off_t(s.sh_offset)) != ssize_t(syms.size() * sizeof(Elf64_Sym)) ||
        pread(fd, text.data(), strs.sh_size, off_t(strs.sh_offset)) != ssize_t(strs.sh_size)) {
      break;
    }
    for (const Elf64_Sym& sym : syms) {
      if (sym.st_name >= strs.sh_size || ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_value) continue;
      for (int i = 0; i < n; ++i) {
        if (!values[i] && strcmp(&text[sym.st_name], names[i]) == 0) values[i] = sym.st_value;
      }
    }
    break;
  }
  close(fd);
}

// _Py_DumpTracebackThreads from the symbol table of the file that defines
// Py_IsInitialized. The load bias comes from Py_IsInitialized itself (its
// address now minus its value in the file), which also proves that the file
// on disk is the one loaded.
DumpFn DumperFromSymtab(IsInitializedFn is_initialized) {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(is_initialized), &info)) return nullptr;
  std::string path = info.dli_fname ? info.dli_fname : "";
  if (path.empty() || path.find('/') == std::string::npos) {  // the main program
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return nullptr;
    path.assign(exe, size_t(n));
  }
  const char* names[] = {"Py_IsInitialized", "_Py_DumpTracebackThreads"};
  uint64_t values[2];
  ReadSymtab(path.c_str(), names, values, 2);
  if (!values[0] || !values[1]) return nullptr;
  const uintptr_t bias = reinterpret_cast<uintptr_t>(is_initialized) - values[0];
  return reinterpret_cast<DumpFn>(bias + values[1]);
}

// Finds the interpreter, its version and its dumper. Returns whether the
// search concluded (an interpreter was found, or none can be); before
// Python is initialized it concludes nothing and runs again next time.
void Probe() {
  if (g_python.probed) return;
  auto is_initialized = reinterpret_cast<IsInitializedFn>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  auto get_version = reinterpret_cast<GetVersionFn>(dlsym(RTLD_DEFAULT, "Py_GetVersion"));
  if (!is_initialized || !get_version) return;  // no Python (yet)
  g_python.is_initialized = is_initialized;
  if (!is_initialized()) {
    g_python.status = fmt::PythonStatus::kNotRunning;
    return;
  }
  g_python.probed = true;
  g_python.version = ParseVersion(get_version());
  if (g_python.version < kOldestKnown || g_python.version > kNewestKnown) {
    g_python.status = fmt::PythonStatus::kUnsupported;
    return;
  }
  g_python.dump = reinterpret_cast<DumpFn>(dlsym(RTLD_DEFAULT, "_Py_DumpTracebackThreads"));
  if (!g_python.dump) g_python.dump = DumperFromSymtab(is_initialized);
  g_python.status = g_python.dump ? fmt::PythonStatus::kNone : fmt::PythonStatus::kNoDumper;
}

// Copies `text` into a fixed field; when too long keeps its end (the file
// name, not the folders above it).
void CopyTail(char* dst, size_t cap, const char* text, size_t n) {
  if (n >= cap) {
    text += n - (cap - 1);
    n = cap - 1;
  }
  memcpy(dst, text, n);
  dst[n] = '\0';
}

// Allocates the Python frame section (once): a full /dev/shm leaves Python
// frames out instead of raising SIGBUS later.
bool FramesAllocated(TraceFile* f) {
  if (f->pyframes_allocated) return true;
  const fmt::Section& s = f->header->sections[fmt::kSecPyFrames];
  if (s.count == 0 || !f->pyframes) return false;
  int rc = posix_fallocate(f->fd, off_t(s.offset), off_t(uint64_t(s.count) * s.entry_size));
  if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) return false;
  f->pyframes_allocated = true;
  return true;
}

// Parses CPython's dump (the memfd's contents) into the file's PyFrame
// table for `round`. Thread ids are matched to kernel tids through the
// stack slots of the round, where each thread wrote its pthread_self().
bool StoreFrames(TraceFile* f, uint32_t round, const std::string& text) {
  if (!FramesAllocated(f)) return false;
  const uint32_t capacity = f->header->sections[fmt::kSecPyFrames].count;
  const uint32_t nstacks = __atomic_load_n(&f->header->counters.stack_count, __ATOMIC_ACQUIRE);
  uint32_t count = 0;
  uint64_t thread_id = 0;
  uint32_t tid = 0;
  uint16_t depth = 0;
  bool in_thread = false;
  auto add = [&]() -> fmt::PyFrame* {
    if (count >= capacity) return nullptr;
    fmt::PyFrame* p = &f->pyframes[count++];
    memset(p, 0, sizeof(*p));
    p->tid = tid;
    p->thread_id = thread_id;
    p->depth = depth;
    p->round = round;
    p->line = -1;
    return p;
  };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    const char* l = line.c_str();
    const char* hex = nullptr;
    if (strncmp(l, "Thread 0x", 9) == 0) hex = l + 9;
    if (strncmp(l, "Current thread 0x", 17) == 0) hex = l + 17;
    if (hex) {
      thread_id = strtoull(hex, nullptr, 16);
      tid = 0;
      for (uint32_t i = 0; i < nstacks && i < fmt::kMaxStacks; ++i) {
        if (f->stacks[i].round == round && f->stacks[i].pthread_id == thread_id) tid = f->stacks[i].tid;
      }
      depth = 0;
      in_thread = true;
      continue;
    }
    if (!in_thread) continue;
    if (strncmp(l, "  File ", 7) == 0) {
      // '  File "path", line 12 in name': the path may hold anything, so
      // the line is found from the right.
      size_t at = line.rfind(", line ");
      size_t in = at == std::string::npos ? std::string::npos : line.find(" in ", at);
      fmt::PyFrame* p = at == std::string::npos || in == std::string::npos ? nullptr : add();
      if (!p) continue;
      std::string file = line.substr(7, at - 7);
      if (file.size() >= 2 && file.front() == '"' && file.back() == '"') file = file.substr(1, file.size() - 2);
      CopyTail(p->file, sizeof(p->file), file.c_str(), file.size());
      const std::string number = line.substr(at + 7, in - at - 7);
      p->line = number.empty() || number[0] == '?' ? -1 : atoi(number.c_str());
      const std::string name = line.substr(in + 4);
      CopyTail(p->function, sizeof(p->function), name.c_str(), std::min(name.size(), sizeof(p->function) - 1));
      ++depth;
    } else if (strncmp(l, "  ...", 5) == 0) {
      if (count > 0) f->pyframes[count - 1].flags |= fmt::kPyFrameTruncated;
    } else if (strncmp(l, "  <no Python frame>", 19) == 0) {
      if (fmt::PyFrame* p = add()) p->flags |= fmt::kPyFrameNone;
    }
  }
  __atomic_store_n(&f->header->counters.pyframe_count, count, __ATOMIC_RELEASE);
  return true;
}

}  // namespace

void NotePython() {
  if (g_python.probed) return;
  Probe();
  if (g_trace && g_python.version) g_trace->process->python_version = g_python.version;
}

bool PythonCaptureReady() {
  Probe();
  if (g_trace) {
    g_trace->process->python_version = g_python.version;
    if (g_python.status != fmt::PythonStatus::kNone) g_trace->process->python_status = uint32_t(g_python.status);
  }
  if (!g_python.dump) return false;
  if (g_memfd < 0) g_memfd = int(syscall(SYS_memfd_create, "hangtrace-python", MFD_CLOEXEC));
  return g_memfd >= 0;
}

const char* PythonDumpWhileHeld() {
  // Nothing here may allocate or lock: the other threads are held wherever
  // the signal found them, malloc's locks included.
  if (!g_python.dump || g_memfd < 0) return "no dumper";
  if (ftruncate(g_memfd, 0) != 0 || lseek(g_memfd, 0, SEEK_SET) != 0) return "memfd";
  if (!g_python.is_initialized()) return kPythonNotRunning;
  return g_python.dump(g_memfd, nullptr, nullptr);
}

void PythonStoreAfterRelease(const char* dump_error, uint32_t round) {
  TraceFile* f = g_trace;
  if (!f) return;
  fmt::PythonStatus status = fmt::PythonStatus::kFailed;
  if (dump_error == kPythonNotRunning) {
    status = fmt::PythonStatus::kNotRunning;
  } else if (!dump_error) {
    std::string text;
    off_t size = lseek(g_memfd, 0, SEEK_END);
    if (size > 0 && size < (64 << 20)) {
      text.resize(size_t(size));
      if (pread(g_memfd, text.data(), text.size(), 0) != ssize_t(size)) text.clear();
    }
    if (!text.empty() && StoreFrames(f, round, text)) status = fmt::PythonStatus::kCaptured;
  }
  f->process->python_status = uint32_t(status);
}

}  // namespace hangtrace
