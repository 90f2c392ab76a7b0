// A frame of a stack, native or Python, and how a thread's native stack and
// its Python stack become one mixed stack (what `py-spy dump --native`
// prints): each frame of CPython's evaluation loop is replaced by the Python
// frames it was running.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hangtrace {

struct Frame {
  enum class Lang : uint8_t { kNative = 0, kPython = 1, kKernel = 2 };
  Lang lang = Lang::kNative;
  std::string func;     // demangled function; "" when unknown
  std::string file;     // source file (Python: co_filename; native: debug info)
  int32_t line = 0;     // 0 unknown
  std::string module;   // native: the mapped file (full path)
  uint64_t offset = 0;  // native: the pc's offset in that file
  // Python: the first frame an evaluation-loop call ran (the frames above
  // it, up to the next entry, belong to the same native frame). Not part of
  // the frame's identity.
  bool entry = false;

  // How a person reads it in a tree: "train_step (pretrain.py:212)",
  // "MPI_Bcast", "ompi_request_wait (request.c:52)", "libfoo.so+0x1a2b",
  // "[kernel] futex_wait".
  std::string Text() const;
  const char* LangName() const;
  // A frame of the program's own code read from its stack: native and not
  // the placeholder MixPythonFrames puts where native frames were not read.
  bool IsNativeRead() const { return lang == Lang::kNative && func != kNativeNotRead; }
  static constexpr const char* kNativeNotRead = "[native frames not read]";
  bool operator==(const Frame& o) const {
    return lang == o.lang && func == o.func && file == o.file && line == o.line && module == o.module &&
           offset == o.offset;
  }
};

// A frame's text for a line a person reads: a C++ function's parameter list
// elided when the whole would be long ("do_force(...) (sim_util.cpp:1200)"
// for a 600-character signature), as STAT and py-spy show functions. The
// JSON keeps the whole.
std::string Shortened(const std::string& text);

// Whose code a frame is. A person fixes the program's own code; a rank's
// place in the verdict and the classes is the innermost frame of it, not
// the library line below (h5py's flush, torch's all_reduce, libmpi's
// progress loop), and hangtrace's own frames (its Python hook) are not
// shown in the program's stacks at all.
enum class FrameOwner : uint8_t {
  kUser,       // the program: its files and its own native modules
  kLibrary,    // installed code: the interpreter and its standard library,
               // site- and dist-packages, system libraries (libc, the MPI
               // library, CUDA), the kernel
  kHangtrace,  // hangtrace's Python hook and its preloaded library
};
const char* FrameOwnerName(FrameOwner o);

// Tells frames apart by path. The default guess: a Python file is a
// library's under site-packages, dist-packages or lib/pythonX.Y, and a
// native module under the system's folders (/usr/lib, /lib, /usr/bin,
// /usr/local/cuda, /opt/rocm, ...) or named as a known runtime (libmpi*,
// libpython*, libnccl*, ...); everything else is the user's. `user_paths`
// (HANGTRACE_USER_PATHS, `analyze --user-path`) are folders that hold the
// user's code wherever the guess is wrong (a package of the user's
// installed into a virtualenv's site-packages): a frame under one is the
// user's, whatever else it is.
class FrameOwners {
 public:
  explicit FrameOwners(std::vector<std::string> user_paths = {});
  FrameOwner Of(const Frame& f) const;
  const std::vector<std::string>& user_paths() const { return user_paths_; }

 private:
  bool UnderUserPath(const std::string& path) const;
  std::vector<std::string> user_paths_;  // each ends with '/'
};
// HANGTRACE_USER_PATHS split at ':' (empty entries dropped).
std::vector<std::string> SplitUserPaths(const std::string& text);

// Whether a native frame is CPython's evaluation loop (one such frame runs
// one or more Python frames).
bool IsEvalFrame(const Frame& f);
// A frame that starts a thread (clone3, start_thread, _start, ...): the
// outermost frames of a stack read whole.
bool IsThreadStart(const Frame& f);

// The mixed stack of one thread: `native` innermost first, with each
// evaluation-loop frame replaced by its Python frames from `python`
// (innermost first; each run of frames ends at an `entry`). Python frames
// left over (a native stack cut short) go where the last evaluation frame
// was; with no evaluation frame at all they go on top.
std::vector<Frame> MixPythonFrames(const std::vector<Frame>& native, const std::vector<Frame>& python);

// Marks the entries of Python frames that came without them (CPython's
// text dump, in the process): before 3.11 every Python call is a call of
// the evaluation loop, so every frame is an entry; from 3.11 on a Python
// call runs in the same loop, and the runs are not known: each of the outer
// `eval_frames - 1` loops gets one frame and the innermost the rest (right
// whenever only the innermost loop runs several frames, the common case).
void GuessEntries(std::vector<Frame>* python, size_t eval_frames, uint32_t python_version);

}  // namespace hangtrace
