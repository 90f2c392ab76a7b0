#include "dump/python_frames.h"

#include <elfutils/libdwfl.h>
#include <sys/uio.h>

#include <cstring>
#include <regex>
#include <unordered_map>

#include "dump/python_layout.h"

namespace hangtrace {
namespace {

using python::kLayouts;
using python::kNone;
using python::kNumLayouts;
using python::PyLayout;

constexpr int kMaxInterpreters = 64;
constexpr int kMaxThreads = 4096;
constexpr int kMaxFrames = 256;
constexpr size_t kMaxString = 1024;
constexpr size_t kMaxLineTable = 1 << 20;

// Reads the target's memory (process_vm_readv; the threads are stopped).
class Memory {
 public:
  explicit Memory(pid_t pid) : pid_(pid) {}
  bool Read(uint64_t addr, void* out, size_t n) const {
    if (!addr) return false;
    iovec local{out, n}, remote{reinterpret_cast<void*>(addr), n};
    return process_vm_readv(pid_, &local, 1, &remote, 1, 0) == ssize_t(n);
  }
  template <typename T>
  bool Get(uint64_t addr, T* out) const {
    return Read(addr, out, sizeof(T));
  }
  uint64_t Ptr(uint64_t addr) const {
    uint64_t p = 0;
    return Get(addr, &p) ? p : 0;
  }

 private:
  pid_t pid_;
};

// The objects of one interpreter, checked by type before use.
class Objects {
 public:
  Objects(const Memory& m, const PyLayout& l) : m_(m), l_(l) {}

  // The name of an object's type ("str", "code", ...), "" when unreadable.
  const std::string& TypeName(uint64_t obj) {
    static const std::string none;
    uint64_t type = m_.Ptr(obj + l_.ob_type);
    if (!type) return none;
    auto [it, fresh] = types_.emplace(type, std::string());
    if (fresh) {
      char name[32] = {};
      uint64_t text = m_.Ptr(type + l_.tp_name);
      if (text && m_.Read(text, name, sizeof(name) - 1)) it->second = name;
    }
    return it->second;
  }

  // A str object's text (non-ASCII characters as \uXXXX), or false.
  bool Str(uint64_t obj, std::string* out) {
    if (!obj || TypeName(obj) != "str") return false;
    int64_t length = 0;
    uint32_t state = 0;
    if (!m_.Get(obj + l_.str_length, &length) || !m_.Get(obj + l_.str_state, &state)) return false;
    if (length < 0 || size_t(length) > kMaxString) length = kMaxString;
    const unsigned kind = (state >> l_.state_kind_shift) & 7;
    const bool compact = (state >> l_.state_compact_bit) & 1;
    const bool ascii = (state >> l_.state_ascii_bit) & 1;
    if (!compact || (kind != 1 && kind != 2 && kind != 4)) return false;  // legacy strings: not in code objects
    uint64_t data = obj + (ascii ? l_.ascii_size : l_.compact_size);
    std::vector<uint8_t> raw(size_t(length) * kind);
    if (!raw.empty() && !m_.Read(data, raw.data(), raw.size())) return false;
    out->clear();
    for (int64_t i = 0; i < length; ++i) {
      uint32_t ch = kind == 1 ? raw[size_t(i)] : kind == 2 ? uint32_t(raw[size_t(i) * 2] | raw[size_t(i) * 2 + 1] << 8)
                                                            : uint32_t(raw[size_t(i) * 4]) | uint32_t(raw[size_t(i) * 4 + 1]) << 8 |
                                                                  uint32_t(raw[size_t(i) * 4 + 2]) << 16 |
                                                                  uint32_t(raw[size_t(i) * 4 + 3]) << 24;
      if (ch >= 0x20 && ch < 0x7f) {
        out->push_back(char(ch));
      } else {
        char esc[16];
        snprintf(esc, sizeof(esc), ch <= 0xff ? "\\x%02x" : ch <= 0xffff ? "\\u%04x" : "\\U%08x", ch);
        *out += esc;
      }
    }
    return true;
  }

  // A bytes object's contents, or false.
  bool Bytes(uint64_t obj, std::vector<uint8_t>* out) {
    if (!obj || TypeName(obj) != "bytes") return false;
    int64_t size = 0;
    if (!m_.Get(obj + l_.bytes_size, &size) || size < 0 || size_t(size) > kMaxLineTable) return false;
    out->resize(size_t(size));
    return size == 0 || m_.Read(obj + l_.bytes_sval, out->data(), out->size());
  }

 private:
  const Memory& m_;
  const PyLayout& l_;
  std::unordered_map<uint64_t, std::string> types_;
};

// The line of byte offset `addr` in a 3.10 line table (PEP 626: pairs of an
// unsigned byte-offset delta and a signed line delta, -128 for none),
// computed as PyCode_Addr2Line does.
int Line310(const std::vector<uint8_t>& table, int first_line, int addr) {
  if (addr < 0) return first_line;
  int start = -1, end = 0, line = first_line, computed = first_line;
  size_t i = 0;
  auto advance = [&] {
    start = end;
    end += table[i];
    int delta = int8_t(table[i + 1]);
    i += 2;
    if (delta == -128) {
      line = -1;
    } else {
      computed += delta;
      line = computed;
    }
  };
  while (end <= addr) {
    if (i + 1 >= table.size()) return -1;
    advance();
    while (start == end && i + 1 < table.size()) advance();
  }
  return line;
}

// The line of instruction `index` (code units) in a 3.11+ location table
// (Objects/locations.md): entries of a header byte (1, code:4, length-1:3)
// and varint data; codes 0-9 and 10-12 are short forms, 13 has no column,
// 14 is the long form, 15 has no location.
int Line311(const std::vector<uint8_t>& table, int first_line, int index) {
  if (index < 0) return first_line;
  size_t i = 0;
  auto varint = [&]() -> uint32_t {
    uint32_t v = 0;
    int shift = 0;
    while (i < table.size()) {
      uint8_t b = table[i++];
      v |= uint32_t(b & 63) << shift;
      shift += 6;
      if (!(b & 64) || shift > 28) break;
    }
    return v;
  };
  auto svarint = [&]() -> int {
    uint32_t v = varint();
    return (v & 1) ? -int(v >> 1) : int(v >> 1);
  };
  int line = first_line, at = 0;
  while (i < table.size()) {
    const uint8_t head = table[i++];
    if (!(head & 0x80)) return -1;  // not an entry start: a table we do not understand
    const int code = (head >> 3) & 15, length = (head & 7) + 1;
    int delta = 0;
    bool none = false;
    if (code == 15) {
      none = true;
    } else if (code == 14) {
      delta = svarint();
      varint();  // end line delta
      varint();  // column + 1
      varint();  // end column + 1
    } else if (code == 13) {
      delta = svarint();
    } else if (code >= 10) {
      delta = code - 10;
      i += 2;  // column, end column
    } else {
      i += 1;  // column data
    }
    line += delta;
    if (index >= at && index < at + length) return none ? -1 : line;
    at += length;
  }
  return -1;
}

// A module's symbol's address, or 0.
uint64_t SymbolAddress(Dwfl_Module* mod, const char* name) {
  int n = dwfl_module_getsymtab(mod);
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr = 0;
    const char* s = dwfl_module_getsym_info(mod, i, &sym, &addr, nullptr, nullptr, nullptr);
    if (s && strcmp(s, name) == 0 && sym.st_shndx != SHN_UNDEF) return addr;
  }
  return 0;
}

struct Found {
  bool present = false;
  uint64_t runtime = 0, py_version = 0;
  std::string module;
};

int FindRuntime(Dwfl_Module* mod, void**, const char* name, Dwarf_Addr, void* arg) {
  auto* found = static_cast<Found*>(arg);
  const std::string path = name ? name : "";
  const std::string base = path.substr(path.find_last_of('/') + 1);
  // The interpreter lives in libpython or in the program itself (a
  // static python, or a program that embeds it): other libraries are
  // never searched (their symbol tables can be huge).
  if (base.find(".so") != std::string::npos && base.rfind("libpython3", 0) != 0) return DWARF_CB_OK;
  uint64_t runtime = SymbolAddress(mod, "_PyRuntime");
  // Before 3.7 there is no _PyRuntime: still CPython, not covered.
  if (!runtime && !SymbolAddress(mod, "Py_IsInitialized")) return DWARF_CB_OK;
  found->present = true;
  found->runtime = runtime;
  found->py_version = SymbolAddress(mod, "Py_Version");
  found->module = path;
  return DWARF_CB_ABORT;
}

// CPython 3.13 publishes where its structures lie (_Py_DebugOffsets, first
// in _PyRuntime). Its fields replace the table's, which must agree on what
// it does not say.
bool FromDebugOffsets(const Memory& m, uint64_t runtime, uint32_t version, PyLayout* l, std::string* error) {
  struct DebugOffsets313 {  // Include/internal/pycore_runtime.h of 3.13
    char cookie[8];
    uint64_t version, free_threaded;
    uint64_t runtime_size, runtime_finalizing, runtime_interpreters_head;
    uint64_t interp[13];  // size, id, next, threads_head, ...
    uint64_t tstate[9];   // size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack, status
    uint64_t frame[6];    // size, previous, executable, instr_ptr, localsplus, owner
    uint64_t code[10];    // size, filename, name, qualname, linetable, firstlineno, argcount, names, kinds, adaptive
    uint64_t pyobject[2];  // size, ob_type
    uint64_t type[4];      // size, tp_name, tp_repr, tp_flags
    uint64_t tuple[3], list[3], dict[3], float_[2], long_[3];
    uint64_t bytes[3];     // size, ob_size, ob_sval
    uint64_t unicode[4];   // size, state, length, asciiobject_size
  } d;
  if (!m.Get(runtime, &d) || memcmp(d.cookie, "xdebugpy", 8) != 0) {
    *error = "CPython 3.13 without the _Py_DebugOffsets cookie in _PyRuntime";
    return false;
  }
  if ((d.version >> 16) != (version >> 16)) {
    *error = "_Py_DebugOffsets says version " + std::to_string(d.version >> 24) + "." +
             std::to_string((d.version >> 16) & 0xff) + ", not the library's";
    return false;
  }
  if (d.free_threaded) {
    *error = "free-threaded CPython builds are not covered";
    return false;
  }
  l->runtime_interpreters_head = uint32_t(d.runtime_interpreters_head);
  l->interp_next = uint32_t(d.interp[2]);
  l->interp_threads_head = uint32_t(d.interp[3]);
  l->tstate_next = uint32_t(d.tstate[2]);
  l->tstate_frame = uint32_t(d.tstate[4]);
  l->cframe_current_frame = kNone;
  l->tstate_thread_id = uint32_t(d.tstate[5]);
  l->tstate_native_thread_id = uint32_t(d.tstate[6]);
  l->frame_previous = uint32_t(d.frame[1]);
  l->frame_code = uint32_t(d.frame[2]);
  l->frame_instr = uint32_t(d.frame[3]);
  l->frame_owner = uint32_t(d.frame[5]);
  l->code_filename = uint32_t(d.code[1]);
  l->code_name = uint32_t(d.code[2]);
  l->code_linetable = uint32_t(d.code[4]);
  l->code_firstlineno = uint32_t(d.code[5]);
  l->code_adaptive = uint32_t(d.code[9]);
  l->ob_type = uint32_t(d.pyobject[1]);
  l->tp_name = uint32_t(d.type[1]);
  l->bytes_size = uint32_t(d.bytes[1]);
  l->bytes_sval = uint32_t(d.bytes[2]);
  l->str_state = uint32_t(d.unicode[1]);
  l->str_length = uint32_t(d.unicode[2]);
  l->ascii_size = uint32_t(d.unicode[3]);
  return true;
}

}  // namespace

const char* PythonVersionsCovered() { return "3.10-3.13"; }

bool RunsPython(Dwfl* dwfl) {
  Found found;
  dwfl_getmodules(dwfl, FindRuntime, &found, 0);
  return found.present;
}

PythonFrames ReadPythonFrames(pid_t pid, Dwfl* dwfl) {
  PythonFrames out;
  Found found;
  dwfl_getmodules(dwfl, FindRuntime, &found, 0);
  if (!found.present) return out;  // not a Python process
  out.present = true;
  Memory m(pid);
  // The version: Py_Version (3.11+), else the library's or program's name.
  uint32_t version = 0;
  if (found.py_version) m.Get(found.py_version, &version);
  if (!version) {
    std::smatch match;
    static const std::regex name("python(3)\\.([0-9]+)");
    if (std::regex_search(found.module, match, name)) {
      version = (3u << 24) | (uint32_t(std::stoi(match[2])) << 16);
    }
  }
  out.version = version;
  const uint32_t minor = version >> 16;
  const PyLayout* table = nullptr;
  for (int i = 0; i < kNumLayouts; ++i) {
    if (kLayouts[i].version == minor) table = &kLayouts[i];
  }
  if (!table || !found.runtime) {
    out.error = version ? "Python " + std::to_string(version >> 24) + "." + std::to_string((version >> 16) & 0xff) +
                              " is not covered (frames from outside: " + PythonVersionsCovered() + ")"
                        : "cannot tell the Python version of " + found.module;
    return out;
  }
  PyLayout l = *table;
  if (minor >= 0x030d && !FromDebugOffsets(m, found.runtime, version, &l, &out.error)) return out;
  Objects objects(m, l);

  uint64_t interp = m.Ptr(found.runtime + l.runtime_interpreters_head);
  for (int ni = 0; interp && ni < kMaxInterpreters; ++ni, interp = m.Ptr(interp + l.interp_next)) {
    uint64_t ts = m.Ptr(interp + l.interp_threads_head);
    for (int nt = 0; ts && nt < kMaxThreads; ++nt, ts = m.Ptr(ts + l.tstate_next)) {
      PyThreadFrames t;
      m.Get(ts + l.tstate_thread_id, &t.thread_id);
      if (l.tstate_native_thread_id != kNone) {
        uint64_t native = 0;
        if (m.Get(ts + l.tstate_native_thread_id, &native)) t.tid = uint32_t(native);
      }
      uint64_t frame = m.Ptr(ts + l.tstate_frame);
      if (l.cframe_current_frame != kNone) frame = frame ? m.Ptr(frame + l.cframe_current_frame) : 0;
      for (int nf = 0; frame; ++nf, frame = m.Ptr(frame + l.frame_previous)) {
        if (nf == kMaxFrames) {
          t.truncated = true;
          break;
        }
        if (l.frame_owner != kNone) {
          uint8_t owner = 0;
          m.Get(frame + l.frame_owner, &owner);
          if (owner == 3) {  // FRAME_OWNED_BY_CSTACK (3.12+): where an evaluation loop was entered
            if (!t.frames.empty()) t.frames.back().entry = true;
            continue;
          }
        }
        const uint64_t code = m.Ptr(frame + l.frame_code);
        if (!code || objects.TypeName(code) != "code") {
          out.error = "a frame of thread " + std::to_string(t.tid) + " has no code object: the process's memory does "
                      "not match CPython " + std::to_string(version >> 24) + "." + std::to_string((version >> 16) & 0xff);
          out.threads.clear();
          return out;
        }
        Frame f;
        f.lang = Frame::Lang::kPython;
        objects.Str(m.Ptr(code + l.code_name), &f.func);
        objects.Str(m.Ptr(code + l.code_filename), &f.file);
        int32_t first = 0;
        m.Get(code + l.code_firstlineno, &first);
        std::vector<uint8_t> table_bytes;
        int line = -1;
        if (objects.Bytes(m.Ptr(code + l.code_linetable), &table_bytes)) {
          if (l.frame_lasti != kNone) {  // 3.10: f_lasti counts code units
            int32_t lasti = -1;
            m.Get(frame + l.frame_lasti, &lasti);
            line = Line310(table_bytes, first, lasti < 0 ? -1 : lasti * 2);
          } else {
            const uint64_t instr = m.Ptr(frame + l.frame_instr);
            const int64_t index = instr ? (int64_t(instr) - int64_t(code + l.code_adaptive)) / 2 : -1;
            line = index > (1 << 24) ? -1 : Line311(table_bytes, first, int(index));
          }
        }
        f.line = line > 0 ? line : 0;
        if (l.frame_is_entry != kNone) {  // 3.11
          uint8_t entry = 0;
          m.Get(frame + l.frame_is_entry, &entry);
          f.entry = entry != 0;
        }
        if (l.frame_lasti != kNone) f.entry = true;  // 3.10: one evaluation loop per frame
        t.frames.push_back(std::move(f));
      }
      if (!t.frames.empty()) t.frames.back().entry = true;  // the outermost frame began a loop
      out.threads.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace hangtrace
