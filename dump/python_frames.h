// Python frames of another process, read from its memory while its threads
// are stopped (the node side of `hangtrace dump`), the way py-spy does:
// _PyRuntime -> interpreters -> thread states -> frames -> code objects.
//
// Where those structures lie comes from the process itself for CPython 3.13
// (_Py_DebugOffsets, at the start of _PyRuntime for exactly this), and for
// 3.10 to 3.12 from each version's own headers (python_layout.h). Every
// object is checked to be of the type it should be (its type's name: code,
// str, bytes) before it is used, so a version or build that does not match
// gives an error, never invented frames. Other versions say they are not
// covered.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "merger/frames.h"

struct Dwfl;

namespace hangtrace {

struct PyThreadFrames {
  uint32_t tid = 0;         // the thread's kernel tid (3.11+: from its state)
  uint64_t thread_id = 0;   // CPython's thread id: the thread's pthread_t
  std::vector<Frame> frames;  // innermost first, entries marked
  bool truncated = false;     // more frames than were read
};

struct PythonFrames {
  bool present = false;     // the process runs CPython
  uint32_t version = 0;     // PY_VERSION_HEX (major, minor, micro)
  std::string error;        // why no frames were read ("" when they were)
  std::vector<PyThreadFrames> threads;
};

// `dwfl` has the process's modules reported (dwfl_linux_proc_report); its
// threads are stopped. Finds _PyRuntime in the main program or libpython.
PythonFrames ReadPythonFrames(pid_t pid, Dwfl* dwfl);

// Whether the process runs CPython (what ReadPythonFrames looks for first),
// from its reported modules: no thread need be stopped.
bool RunsPython(Dwfl* dwfl);

// The covered versions, for messages and docs: "3.10-3.13".
const char* PythonVersionsCovered();

}  // namespace hangtrace
