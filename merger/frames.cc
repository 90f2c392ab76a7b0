#include "merger/frames.h"

#include <cstdio>
#include <cstring>

namespace hangtrace {
namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A Python file as people tell it apart: a library's from its package
// ("torch/autograd/__init__.py", "threading.py" of the standard library),
// the program's own by its name.
std::string PythonPath(const std::string& path) {
  for (const char* root : {"/site-packages/", "/dist-packages/"}) {
    const size_t at = path.rfind(root);
    if (at != std::string::npos) return path.substr(at + strlen(root));
  }
  const size_t lib = path.rfind("/lib/python");
  if (lib != std::string::npos) {
    const size_t slash = path.find('/', lib + 11);
    if (slash != std::string::npos) return path.substr(slash + 1);
  }
  return Basename(path);
}
}  // namespace

std::string Frame::Text() const {
  if (lang == Lang::kKernel) return "[kernel] " + func;
  std::string where;
  if (!file.empty()) {
    where = " (" + (lang == Lang::kPython ? PythonPath(file) : Basename(file)) +
            (line > 0 ? ":" + std::to_string(line) : "") + ")";
  }
  if (!func.empty()) return func + where;
  if (lang == Lang::kPython) return "???" + where;
  if (module.empty()) {
    char pc[32];
    snprintf(pc, sizeof(pc), "0x%llx", static_cast<unsigned long long>(offset));
    return pc;
  }
  char off[32];
  snprintf(off, sizeof(off), "+0x%llx", static_cast<unsigned long long>(offset));
  return Basename(module) + off;
}

std::string Shortened(const std::string& text) {
  constexpr size_t kLong = 100;
  if (text.size() <= kLong) return text;
  // The location, " (file.cc:12)", holds no parenthesis of its own.
  std::string func = text, where;
  const size_t open = text.rfind(" (");
  if (text.back() == ')' && open != std::string::npos && text.find_first_of("()", open + 2) == text.size() - 1) {
    func = text.substr(0, open);
    where = text.substr(open);
  }
  for (const char* q : {" const", " volatile", " &&", " &", " noexcept"}) {
    const size_t n = strlen(q);
    if (func.size() > n && func.compare(func.size() - n, n, q) == 0) func.resize(func.size() - n);
  }
  if (func.empty() || func.back() != ')') return text;
  // The parameter list: the group the last ')' closes.
  int depth = 0;
  for (size_t i = func.size(); i-- > 0;) {
    if (func[i] == ')') ++depth;
    if (func[i] == '(' && --depth == 0) {
      return i > 0 && i + 2 < func.size() ? func.substr(0, i) + "(...)" + where : text;
    }
  }
  return text;
}

const char* Frame::LangName() const {
  switch (lang) {
    case Lang::kNative: return "native";
    case Lang::kPython: return "python";
    case Lang::kKernel: return "kernel";
  }
  return "native";
}

const char* FrameOwnerName(FrameOwner o) {
  switch (o) {
    case FrameOwner::kUser: return "user";
    case FrameOwner::kLibrary: return "library";
    case FrameOwner::kHangtrace: return "hangtrace";
  }
  return "library";
}

std::vector<std::string> SplitUserPaths(const std::string& text) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= text.size()) {
    size_t colon = text.find(':', from);
    if (colon == std::string::npos) colon = text.size();
    if (colon > from) out.push_back(text.substr(from, colon - from));
    from = colon + 1;
  }
  return out;
}

FrameOwners::FrameOwners(std::vector<std::string> user_paths) {
  for (std::string& p : user_paths) {
    if (p.empty()) continue;
    if (p.back() != '/') p += '/';
    user_paths_.push_back(std::move(p));
  }
}

bool FrameOwners::UnderUserPath(const std::string& path) const {
  for (const std::string& p : user_paths_) {
    if (path.compare(0, p.size(), p) == 0) return true;
  }
  return false;
}

namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.compare(0, strlen(prefix), prefix) == 0; }

// hangtrace's Python hook: installed as LIBDIR/hangtrace/python/*.py (the
// source tree's python/ in a build).
bool IsHangtracePython(const std::string& file) {
  const std::string base = Basename(file);
  return file.find("/hangtrace/python/") != std::string::npos || base == "hangtrace_torch.py" ||
         (base == "sitecustomize.py" && file.find("hangtrace") != std::string::npos);
}

FrameOwner PythonOwner(const std::string& file) {
  if (IsHangtracePython(file)) return FrameOwner::kHangtrace;
  // "<frozen importlib._bootstrap>" is the interpreter's; "<string>" and
  // "<stdin>" are code the user handed it.
  if (StartsWith(file, "<frozen")) return FrameOwner::kLibrary;
  if (file.find("/site-packages/") != std::string::npos || file.find("/dist-packages/") != std::string::npos) {
    return FrameOwner::kLibrary;
  }
  const size_t lib = file.find("/lib/python");  // the standard library: lib/python3.11/, lib/python3/
  return lib != std::string::npos ? FrameOwner::kLibrary : FrameOwner::kUser;
}

// hangtrace's own native code: the library, and the Python hook's record
// path (LIBDIR/hangtrace/python/_hangtrace_torch*.so), wherever they lie.
bool IsHangtraceNative(const std::string& module) {
  const std::string base = Basename(module);
  return StartsWith(base, "libhangtrace") || StartsWith(base, "_hangtrace_torch");
}

FrameOwner NativeOwner(const Frame& f) {
  if (f.module.empty() || f.module[0] == '[') return FrameOwner::kLibrary;  // "[vdso]", or not read
  const std::string base = Basename(f.module);
  if (IsHangtraceNative(f.module)) return FrameOwner::kHangtrace;
  static const char* const kSystemFolders[] = {"/lib/",      "/lib32/",   "/lib64/",          "/usr/lib/",
                                               "/usr/lib32/", "/usr/lib64/", "/usr/libexec/",   "/usr/bin/",
                                               "/usr/sbin/", "/bin/",     "/sbin/",           "/usr/local/cuda",
                                               "/opt/rocm",  "/opt/nvidia/", "/usr/local/lib/python"};
  for (const char* folder : kSystemFolders) {
    if (StartsWith(f.module, folder)) return FrameOwner::kLibrary;
  }
  if (f.module.find("/site-packages/") != std::string::npos || f.module.find("/dist-packages/") != std::string::npos) {
    return FrameOwner::kLibrary;  // an extension module of an installed package
  }
  // Runtimes installed anywhere (an MPI in /opt, a pyenv's Python, a
  // conda environment): known by name.
  static const char* const kRuntimes[] = {"libmpi",  "libpmpi", "libopen-", "libpmix", "libucp",   "libucs",
                                          "libuct",  "libfabric", "libpsm", "libnccl", "librccl",  "libcuda",
                                          "libcudart", "libamdhip", "libgloo", "libtorch", "libc10", "libpython",
                                          "python",  "libc.so", "libc-",   "ld-linux", "libpthread", "libstdc++",
                                          "libgcc",  "libgfortran", "libmpich", "libfmpich", "libhdf5", "libomp",
                                          "libgomp", "libdw",   "libunwind"};
  for (const char* name : kRuntimes) {
    if (StartsWith(base, name)) return FrameOwner::kLibrary;
  }
  return FrameOwner::kUser;
}

}  // namespace

FrameOwner FrameOwners::Of(const Frame& f) const {
  if (f.lang == Frame::Lang::kKernel) return FrameOwner::kLibrary;
  if (f.lang == Frame::Lang::kPython) {
    // hangtrace's hook is hangtrace's wherever it lies.
    if (IsHangtracePython(f.file)) return FrameOwner::kHangtrace;
    return UnderUserPath(f.file) ? FrameOwner::kUser : PythonOwner(f.file);
  }
  // A thread's start (_start, start_thread, clone3) is the C library's,
  // even where it is linked into the program.
  if (!f.IsNativeRead() || IsThreadStart(f)) return FrameOwner::kLibrary;
  if (IsHangtraceNative(f.module)) return FrameOwner::kHangtrace;
  return UnderUserPath(f.module) || (!f.file.empty() && UnderUserPath(f.file)) ? FrameOwner::kUser : NativeOwner(f);
}

bool IsThreadStart(const Frame& f) {
  static const char* const kStarts[] = {"__clone3", "clone3", "__clone", "clone", "start_thread", "_start",
                                        "__libc_start_main", "__libc_start_call_main"};
  if (f.lang != Frame::Lang::kNative) return false;
  for (const char* name : kStarts) {
    if (f.func == name) return true;
  }
  return false;
}

bool IsEvalFrame(const Frame& f) {
  return f.lang == Frame::Lang::kNative && f.func == "_PyEval_EvalFrameDefault";
}

std::vector<Frame> MixPythonFrames(const std::vector<Frame>& native, const std::vector<Frame>& python) {
  if (python.empty()) return native;
  std::vector<Frame> out;
  size_t next = 0;  // the next Python frame to place
  size_t last_eval = SIZE_MAX;
  for (const Frame& f : native) {
    if (!IsEvalFrame(f) || next >= python.size()) {
      out.push_back(f);
      continue;
    }
    // This loop runs Python frames up to and including the next entry.
    while (next < python.size()) {
      out.push_back(python[next]);
      if (python[next++].entry) break;
    }
    last_eval = out.size();
  }
  if (next < python.size()) {
    // Left over: after the last evaluation frame's run. With no evaluation
    // frame among the native ones (the native stack was cut short below
    // the interpreter: a call through libffi, read from two registers),
    // the Python frames are outer to every native frame read: placed
    // before the thread's start frames when those were read, else after
    // the native frames (none, when its native stack was not read), with a
    // frame saying what is missing between.
    std::vector<Frame> rest(python.begin() + long(next), python.end());
    size_t at = last_eval;
    if (at == SIZE_MAX) {
      at = out.size();
      while (at > 0 && IsThreadStart(out[at - 1])) --at;
      if (at == out.size()) {  // none read at all: the same gap, innermost
        Frame gap;
        gap.func = Frame::kNativeNotRead;
        rest.insert(rest.begin(), gap);
      }
    }
    out.insert(out.begin() + long(at), rest.begin(), rest.end());
  }
  return out;
}

void GuessEntries(std::vector<Frame>* python, size_t eval_frames, uint32_t python_version) {
  std::vector<Frame>& p = *python;
  if (p.empty()) return;
  if (python_version < 0x030b0000) {
    for (Frame& f : p) f.entry = true;
    return;
  }
  // Innermost first: the innermost loop runs p[0..k], each outer loop one.
  const size_t outer = eval_frames > 0 ? std::min(eval_frames - 1, p.size() - 1) : 0;
  for (Frame& f : p) f.entry = false;
  const size_t innermost_run = p.size() - outer;
  p[innermost_run - 1].entry = true;
  for (size_t i = innermost_run; i < p.size(); ++i) p[i].entry = true;
}

}  // namespace hangtrace
