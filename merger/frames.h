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
