// Writing a complete trace file in the real format from a description:
// `hangtrace simulate` uses it for synthetic jobs of any size. Files are
// compact (sections packed, sized to their contents), which the format
// allows: readers follow the section table.
#pragma once

#include <string>
#include <vector>

#include "tracer/format.h"

namespace hangtrace {

struct FileSpec {
  fmt::ProcessInfo process{};            // strings, rank, state, clock...
  std::vector<fmt::CallInfo> calls;
  struct Comm {
    fmt::CommEntry entry{};              // version is set by the writer
    std::vector<int32_t> members;        // world ranks (empty: unknown/world)
  };
  std::vector<Comm> comms;
  struct Thread {
    uint32_t tid = 0;
    bool in_call = false;
    fmt::Record current{};
    bool has_last = false;
    fmt::Record last{};
    bool watchdog = false;
    std::vector<fmt::Record> records;    // oldest first; the lane keeps the newest
    std::vector<std::string> stack;      // innermost frame first; empty: none
  };
  std::vector<Thread> threads;
  uint32_t lane_slots = 0;               // 0: the smallest power of two >= records
};

// Writes `spec` to `path` (0600). False with `error` on failure.
bool WriteTraceFile(const std::string& path, const FileSpec& spec, std::string* error);

}  // namespace hangtrace
