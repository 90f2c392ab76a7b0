// Python frames captured inside the process (python.cc), used by the stack
// capture round (stacks.cc) in three steps:
//
//   PythonCaptureReady()       before the round: is there an interpreter
//                              whose dumper is known? (may allocate)
//   PythonDumpWhileHeld()      while every other thread is held in the stack
//                              signal's handler: CPython writes its threads'
//                              frames to a memfd (no allocation, no lock)
//   PythonStoreAfterRelease()  after the threads run again: the text becomes
//                              the file's PyFrame entries of the round
#pragma once

#include <cstdint>

namespace hangtrace {

inline constexpr const char* kPythonNotRunning = "interpreter not running";

bool PythonCaptureReady();
// Cheap check, from the background thread now and then: notes in the file
// that the process runs CPython (ProcessInfo::python_version) as soon as
// the interpreter is initialized, so a dump knows to ask for its frames.
void NotePython();
// CPython's error text, or null on success.
const char* PythonDumpWhileHeld();
void PythonStoreAfterRelease(const char* dump_error, uint32_t round);

}  // namespace hangtrace
