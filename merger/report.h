// The outputs of `hangtrace analyze`: a text report for a person (verdict
// and culprits in the first lines), the JSON contract, the merged stack
// tree (text and DOT), and a Perfetto/Chrome trace of every rank.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "merger/diagnose.h"
#include "merger/model.h"

namespace hangtrace {

// The text report for a terminal: the verdict word in colour (red when
// something was found, green for no hang), culprit lines bold. For stdout
// when it is a terminal and NO_COLOR is unset (https://no-color.org).
std::string Colorize(const std::string& report);
bool ColorWanted(int fd);

// The classes as a person reads them, biggest first: the diagnosis's groups
// of one call on sibling communicators (dp0, dp1, ... at the same sequence
// number, alike in all else) folded into one. The text report's lines, the
// wait-for graph's nodes and the page's classes.
struct ClassLine {
  RankSet ranks, waiting;
  std::vector<size_t> groups;      // the Diagnosis::groups folded here; the first stands for them
  std::set<std::string> comms;     // their communicators
  double in_call_s = 0;            // the longest of theirs
  int64_t user_frame = -1;         // their place in the program, when the same for all
  std::vector<std::string> hosts;  // the first 8
  std::string what;                // "in MPI_Allreduce #3 on 128 dp comms (dp0, ...)"
};
std::vector<ClassLine> ClassLines(const Job& job, const Diagnosis& d);

// "8 of 8 ranks traced; ranks 4-7 from their stacks only (untraced)": what
// the diagnosis stands on, rank by rank.
std::string TracedLine(const Diagnosis& d);

std::string TextReport(const Job& job, const Diagnosis& d);
// JSON as text; strings from trace files that are not UTF-8 (a damaged
// label, a host name) are written with U+FFFD instead of failing.
std::string JsonText(const nlohmann::json& j, int indent = -1);

nlohmann::json JsonReport(const Job& job, const Diagnosis& d);

// STAT-style call-prefix tree of every captured stack, outermost frame at
// the root; each node carries the ranks whose stacks pass through it.
struct StackNode {
  std::string frame;      // Frame::Text()
  uint32_t frame_id = 0;  // a Job::frames entry with that text (not the root)
  RankSet ranks;
  std::vector<StackNode> children;
};
StackNode MergeStacks(const Job& job);
bool HasStacks(const Job& job);
std::string StackTreeText(const StackNode& root, size_t max_lines = 200);

// Threads whose native stack the capture did not read, by reason: the
// merged tree shows them with their Python frames at most, so the report
// says why the rest is missing (never as if the thread were idle there).
struct UnreadStacks {
  std::string why;
  RankSet main_thread;   // ranks whose main thread is one
  RankSet other_ranks;   // ranks with other threads that are
  size_t other_threads = 0;
};
std::vector<UnreadStacks> UnreadNativeStacks(const Job& job);
std::string UnreadStacksText(const std::vector<UnreadStacks>& unread);

// The pictures (wait-for graph, stack tree DOT, Perfetto): merger/pictures.h.

}  // namespace hangtrace
