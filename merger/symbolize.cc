#include "merger/symbolize.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace hangtrace {

Frame FrameAt(uint64_t pc, const std::vector<ModuleInfo>& modules) {
  Frame f;
  f.offset = pc;
  for (const ModuleInfo& m : modules) {
    if (pc >= m.start && pc < m.end) {
      f.module = m.path;
      f.offset = pc - m.start + m.file_offset;
      break;
    }
  }
  return f;
}

std::string Demangle(const std::string& symbol) {
  if (symbol.size() < 2 || symbol[0] != '_' || symbol[1] != 'Z') return symbol;
  int status = 0;
  char* out = abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status);
  std::string result = status == 0 && out ? out : symbol;
  free(out);
  // Drop anonymous-namespace noise; keep it readable in a tree.
  for (size_t p; (p = result.find("(anonymous namespace)::")) != std::string::npos;) result.erase(p, 23);
  return result;
}

// One ELF file reported to libdw at its link-time addresses.
struct Symbolizer::Module {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  struct Load {
    uint64_t offset, filesz, vaddr;
  };
  std::vector<Load> loads;  // PT_LOAD segments: file offset -> address
  ~Module() {
    if (dwfl) dwfl_end(dwfl);
  }
};

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

Symbolizer::Module* Symbolizer::Open(const std::string& path) {
  auto [it, fresh] = modules_.emplace(path, nullptr);
  if (!fresh) return it->second.get();
  static char* debuginfo_path = nullptr;
  static const Dwfl_Callbacks callbacks = {dwfl_build_id_find_elf, dwfl_standard_find_debuginfo,
                                           dwfl_offline_section_address, &debuginfo_path};
  auto m = std::make_unique<Module>();
  m->dwfl = dwfl_begin(&callbacks);
  if (!m->dwfl) return nullptr;
  // The path comes from a trace file, which anyone could have written: open
  // it without blocking (a FIFO would wait for a writer forever) and read it
  // only if it is a regular file (not a device, a socket, or a FIFO).
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  struct stat st;
  if (fd < 0) return nullptr;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return nullptr;
  }
  // ET_DYN at base 0 with p_vaddr added: addresses are the file's own. The
  // module owns fd once reported; a failed report leaves it to us.
  m->mod = dwfl_report_elf(m->dwfl, path.c_str(), path.c_str(), fd, 0, true);
  dwfl_report_end(m->dwfl, nullptr, nullptr);
  if (!m->mod) {
    close(fd);
    return nullptr;
  }
  GElf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(m->mod, &bias);
  size_t nphdr = 0;
  if (!elf || elf_getphdrnum(elf, &nphdr) != 0) return nullptr;
  for (size_t i = 0; i < nphdr; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, int(i), &ph) && ph.p_type == PT_LOAD) {
      m->loads.push_back({ph.p_offset, ph.p_filesz, ph.p_vaddr + bias});
    }
  }
  it->second = std::move(m);
  return it->second.get();
}

void Symbolizer::Resolve(Frame* f) {
  if (f->lang != Frame::Lang::kNative || f->module.empty()) return;
  std::string key = f->module;
  key.push_back('\0');
  key += std::to_string(f->offset);
  auto [it, fresh] = answers_.emplace(key, Answer{});
  if (fresh) {
    Answer& a = it->second;
    if (Module* m = Open(f->module)) {
      for (const Module::Load& l : m->loads) {
        if (f->offset < l.offset || f->offset >= l.offset + l.filesz) continue;
        const GElf_Addr addr = f->offset - l.offset + l.vaddr;
        GElf_Off off = 0;
        GElf_Sym sym;
        const char* name = dwfl_module_addrinfo(m->mod, addr, &off, &sym, nullptr, nullptr, nullptr);
        if (name) {
          a.func = Demangle(name);
          a.func = a.func.substr(0, a.func.find('@'));  // "clock_nanosleep@GLIBC_2.2.5"
        }
        if (Dwfl_Line* line = dwfl_module_getsrc(m->mod, addr)) {
          int lineno = 0;
          const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
          if (file && lineno > 0) {
            a.file = file;
            a.line = lineno;
          }
        }
        break;
      }
    }
  }
  f->func = it->second.func;
  f->file = it->second.file;
  f->line = it->second.line;
}

std::vector<CapturedStack> CapturedStacks(const TraceSnapshot& s) {
  std::vector<CapturedStack> out;
  for (const StackInfo& st : s.stacks) {
    CapturedStack t;
    t.tid = st.tid;
    t.thread_name = st.thread_name;
    t.lock_holder_pid = st.lock_holder_pid;
    t.not_read = WhyStackNotRead(st);
    for (const fmt::StackFrame& f : st.frames) {
      Frame frame;
      if (f.symbol[0]) {  // named by an older runtime, or simulated
        frame.func = Demangle(f.symbol);
      } else {
        frame = FrameAt(f.pc, s.modules);
      }
      t.native.push_back(std::move(frame));
    }
    out.push_back(std::move(t));
  }
  // Python frames: consecutive per thread, depth 0 first.
  size_t current = SIZE_MAX;
  for (const PyFrameInfo& pf : s.py_frames) {
    if (pf.depth == 0 || current == SIZE_MAX) {
      current = SIZE_MAX;
      for (size_t i = 0; i < out.size() && pf.tid; ++i) {
        if (out[i].tid == pf.tid) current = i;
      }
      if (current == SIZE_MAX) {
        current = out.size();
        CapturedStack python_only;
        python_only.tid = pf.tid;
        python_only.not_read = "the capture round took no native stack of it";
        out.push_back(std::move(python_only));
      }
    }
    if (pf.flags & fmt::kPyFrameNone) continue;
    Frame f;
    f.lang = Frame::Lang::kPython;
    f.func = pf.function;
    f.file = pf.file;
    f.line = pf.line > 0 ? pf.line : 0;
    out[current].python.push_back(std::move(f));
  }
  return out;
}

std::vector<std::pair<uint32_t, std::vector<Frame>>> SnapshotStacks(const TraceSnapshot& s, Symbolizer* symbols) {
  std::vector<std::pair<uint32_t, std::vector<Frame>>> out;
  for (CapturedStack& t : CapturedStacks(s)) {
    for (Frame& f : t.native) {
      if (f.func.empty()) symbols->Resolve(&f);
    }
    if (!t.python.empty()) {
      const size_t evals = size_t(std::count_if(t.native.begin(), t.native.end(), IsEvalFrame));
      GuessEntries(&t.python, evals, s.process.python_version);
    }
    out.push_back({t.tid, MixPythonFrames(t.native, t.python)});
  }
  return out;
}

}  // namespace hangtrace
