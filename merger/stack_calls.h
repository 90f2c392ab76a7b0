// What a stack says a thread is doing, when its trace is silent or there is
// no trace: the innermost frame of a communication or synchronization call
// it is blocked in (traced by hangtrace or not), or the plain wait it sits
// in. One table (stack_calls.cc, kStackCalls) says which frames count.
#pragma once

#include <string>
#include <vector>

#include "merger/model.h"

namespace hangtrace {

enum class StackCallKind : uint8_t {
  kNone,
  kCommunication,  // MPI (C or Fortran), NCCL/RCCL, torch.distributed, c10d, gloo
  kDeviceSync,     // cudaStreamSynchronize and friends: waits for its device
  kFileLock,       // fcntl(F_SETLKW), flock, lockf: waits for the lock's holder
  kSleep,          // nanosleep, sleep: not waiting for anyone (computing, slowly)
};

struct StackCall {
  StackCallKind kind = StackCallKind::kNone;
  std::string name;   // as users know it: "MPI_Allreduce", "torch.distributed.all_reduce"
  fmt::Op op = fmt::Op::kNone;
  size_t frame = 0;   // index of the frame it was found at (innermost 0)
};

// What each distinct frame of a job says (Job::frames), read once per
// frame, not once per rank: a job of 16,384 ranks has a few hundred.
class StackCalls {
 public:
  explicit StackCalls(const Job& job);
  // The call `t` is blocked in, best evidence first: a torch.distributed
  // Python frame (the call the program made), else the innermost native
  // communication frame (PMPI_ and pnccl names as the API users call), else
  // a file lock or a sleep. kind kNone when the stack shows none of these.
  StackCall Find(const ThreadStack& t) const;

 private:
  struct Said {
    StackCallKind kind = StackCallKind::kNone;
    bool torch = false;  // a frame of torch.distributed's Python code
    fmt::Op op = fmt::Op::kNone;
    std::string name;
  };
  std::vector<Said> frames_;  // by Job::frames id
};

// The API-neutral op of a call's name, traced or seen on a stack:
// "MPI_Iallreduce", "ncclAllReduce", "all_reduce", "mpi_allreduce_" ->
// kAllreduce; kNone when the name is not a known communication call.
fmt::Op OpOfCallName(const std::string& name);

// The collective ops (all-reduce ... scan), as opposed to point-to-point,
// waits, syncs and the rest.
inline bool IsCollectiveOp(fmt::Op op) { return op >= fmt::Op::kAllreduce && op <= fmt::Op::kScan; }

// Whether a communication call seen on a stack is collective: a collective
// op ("MPI_Allreduce", "c10d::Reducer::..." as kAllreduce), or one of MPI's
// collective calls hangtrace does not trace yet by its C name (window
// creation and fences, opening, closing and the collective reads and
// writes of MPI-IO).
bool IsCollectiveCall(fmt::Op op, const std::string& name);

// A system call's name from its number on this machine's architecture
// ("72" -> "fcntl" on x86-64); the number itself when not in the table.
std::string SyscallName(const std::string& number);

}  // namespace hangtrace
