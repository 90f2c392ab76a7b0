// A compact copy of a trace file: what the diagnosis needs, in tens of
// kilobytes instead of a ring of megabytes. `hangtrace dump` ships these by
// default (docs/DUMP.md, "Compact dumps").
//
// The copy is a trace file in the same format (tracer/format.h), readable by
// every reader: the tables as far as they are used (facts, calls,
// communicators with their exact collective counts, members, threads with
// their current and last calls, the stacks of the capture round, names,
// modules, Python frames), and of each lane its newest records, at the same
// lane indexes, in a smaller ring (lane_slots K). The records before the
// tails that the record scan still depends on (load::RecordsScanNeedsBefore:
// the newest send and receive per peer and tag, requests never completed,
// device work never finished) go to one more lane, `archive`, owned by no
// thread. The header carries fmt::kFeatCompact.
#pragma once

#include <cstdint>
#include <string>

namespace hangtrace {

struct CompactCopyStats {
  uint64_t bytes = 0;          // the copy's allocated bytes
  uint64_t source_bytes = 0;   // the original's allocated bytes
  uint32_t lane_slots = 0;     // K: records per lane in the copy
  uint64_t records = 0;        // records copied, archive included
  uint64_t archived = 0;       // of them, records from before the tails
  bool over_budget = false;    // the needed records did not fit the budget
};

// The default budget per file: what a rank ships.
inline constexpr uint64_t kCompactBudgetBytes = 64 * 1024;

// Writes the compact copy of the trace file open as `in` (`from` names it
// in messages) into `out`, an empty file. K is the largest power of two, at
// least 64 and at most the original's, whose copy fits `budget` bytes; when
// even K = 64 does not (very many threads, or many open requests), the copy
// holds what is needed anyway and `over_budget` says so. False with
// `error` when the file cannot be read as a trace file.
bool WriteCompactCopy(int in, const std::string& from, int out, uint64_t budget, CompactCopyStats* stats,
                      std::string* error);

}  // namespace hangtrace
