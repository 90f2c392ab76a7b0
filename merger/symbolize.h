// Naming native frames after the fact, from the files on disk: the runtime
// and the dump keep program counters and the module map, and the analyzer
// asks elfutils' libdw for the function (the ELF symbol that contains the
// address, static ones included, where the symbol table has them) and,
// where debug information is installed, the source file and line.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "merger/frames.h"
#include "merger/trace_reader.h"

namespace hangtrace {

// The native frame at `pc` of a process whose executable mappings were
// `modules`: its module and the pc's offset in that file (the same in every
// rank, whatever the address-space layout), unnamed yet.
Frame FrameAt(uint64_t pc, const std::vector<ModuleInfo>& modules);

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Fills func, file and line of a native frame from f->module and
  // f->offset; leaves them empty when the file is gone or has no symbol
  // there. Each (module, offset) is looked up once.
  void Resolve(Frame* f);

 private:
  struct Module;
  Module* Open(const std::string& path);
  std::unordered_map<std::string, std::unique_ptr<Module>> modules_;
  struct Answer {
    std::string func, file;
    int32_t line = 0;
  };
  std::unordered_map<std::string, Answer> answers_;  // "path\0offset"
};

// The stacks a process captured itself (a snapshot of its file), per
// thread, not yet named: native frames as FrameAt gives them (or named, by
// an older runtime or the simulator), and the thread's Python frames,
// innermost first. A thread whose Python frames matched no native stack
// (it never answered the stack signal) stands alone.
struct CapturedStack {
  uint32_t tid = 0;
  std::string thread_name;
  int32_t lock_holder_pid = 0;
  std::string not_read;  // why its native stack was not read (WhyStackNotRead); "" read
  std::vector<Frame> native, python;
};
std::vector<CapturedStack> CapturedStacks(const TraceSnapshot& s);

// The same, named and with the Python frames mixed in (tid, innermost first).
std::vector<std::pair<uint32_t, std::vector<Frame>>> SnapshotStacks(const TraceSnapshot& s, Symbolizer* symbols);

// Itanium C++ names made readable ("_ZN3foo3barEv" -> "foo::bar()").
std::string Demangle(const std::string& symbol);

}  // namespace hangtrace
