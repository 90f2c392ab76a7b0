// node.json: what `hangtrace dump` found on one node, as written by the dump
// (cmds/dump.cc) and read by the analysis (merger/load.cc). This file is the
// one place its keys are spelled. Schema "hangtrace.node/2" (/1 is read too).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "merger/frames.h"
#include "merger/trace_reader.h"

namespace hangtrace {

inline constexpr const char* kNodeSchema = "hangtrace.node/2";
// Version 1 held every thread's frames inline; 2 holds each distinct stack
// once (`stacks`), threads and stack groups naming theirs by index.
inline constexpr const char* kNodeSchemaV1 = "hangtrace.node/1";
inline constexpr const char* kNodeFile = "node.json";

struct NodeThread {
  uint32_t tid = 0;
  std::string name;
  std::string state = "?";  // /proc state letter
  std::string wchan, syscall;
  // Blocked in fcntl/flock on a file whose lock another process holds
  // (/proc/locks): that process and the file.
  int32_t lock_holder_pid = 0;
  std::string lock_file;
  // "blocked" (read where it waits in a system call, not stopped), "ptrace"
  // (stopped briefly, unwound from all registers), "proc" (kernel stack
  // only), "none" (docs/DUMP.md, "How stacks are captured")
  std::string method;
  bool frame_pointer_scan = false;  // blocked: continued from a frame pointer found on its stack
  bool moved = false;               // blocked: it left its call while being read
  std::string error;
  std::vector<Frame> frames;  // innermost first, named, Python frames mixed in
};

struct NodeProcess {
  int32_t pid = 0;
  int32_t rank = -1;
  int32_t world_size = -1;
  std::string rank_from;    // where the rank came from: "trace", or the environment variable
  std::string trace;        // its trace snapshot's file name in the folder, "" untraced
  Liveness liveness = Liveness::kUnknown;  // at dump time
  double heartbeat_age_s = -1;
  std::string state_before = "?", state_after = "?";
  std::string error;
  double seconds = 0;
  std::string python_version, python_error;
  std::string cmdline;      // its command line, as /proc showed it
  // A rank's own process that is no rank (a DataLoader's worker, a
  // subprocess): the pid of the rank process it descends from, and that
  // rank (0 and -1: none).
  int32_t child_of = 0;
  int32_t child_of_rank = -1;
  // It took a capture round of its own on this dump's request (a Python
  // process): the capture in its trace snapshot is of this dump's instant.
  // Otherwise that capture, if any, is older (the watchdog's, an idle one).
  bool captured_on_request = false;
  std::vector<NodeThread> threads;
  bool HasPythonFrames() const;
};

struct NodeDump {
  std::string host, job;
  std::vector<std::string> warnings;
  std::vector<NodeProcess> processes;
  double seconds = 0;
  // The node's pre-merge: its distinct stacks, each with its ranks.
  struct StackGroup {
    std::vector<Frame> frames;
    std::string ranks;
    size_t count = 0;
  };
  std::vector<StackGroup> stack_groups;
};

nlohmann::json FrameToJson(const Frame& f);
Frame FrameFromJson(const nlohmann::json& j);

nlohmann::json NodeToJson(const NodeDump& node);
// False with a sentence in `error` when `j` is not a node dump.
bool NodeFromJson(const nlohmann::json& j, NodeDump* node, std::string* error);
// A process's threads as py-spy prints them (`py-spy dump --native`): each
// thread with its state and system call, its stack innermost first, Python
// frames mixed in. What `hangtrace dump -p PID` prints for a process that is
// no rank, and `analyze` for such a dump.
std::string ProcessStacksText(const NodeProcess& p);

// The folders under `path` that hold a dump's node.json: the path itself
// and its subfolders one level down (OUT/<host>/). Links are not followed.
std::vector<std::string> FindNodeDumps(const std::string& path);

// How a folder holds looks at one job (`hangtrace dump`'s OUT, srun-dump's,
// an automatic report's round): kTwo when its first/ and second/ both hold
// dumps (read whole, it would hold each rank twice; its newer look is
// PATH/second); kFirstOnly when the second never came (the dump was
// stopped between them); kNone otherwise.
enum class Looks { kNone, kTwo, kFirstOnly };
Looks LooksIn(const std::string& path);

// Reads FOLDER/node.json; false (error "" when there is none).
bool ReadNodeDump(const std::string& folder, NodeDump* node, std::string* error);

const char* LivenessName(Liveness l);     // "alive", "stopped", "zombie", "gone", "unknown"
Liveness LivenessFromName(const std::string& name);

}  // namespace hangtrace
