// DecideRankStates: the one place a rank's state is decided, from the facts
// the loader's stages gathered, once every file of the job is read. The
// evidence is ranked: the rank's trace (the call a thread is in), else its
// stacks (the communication or waiting call they show, for calls hangtrace
// does not wrap), else its liveness. The rules read the result; none of
// them changes it.
#include <algorithm>

#include "merger/load_stages.h"

namespace hangtrace {

const char* RankStateName(RankState s) {
  switch (s) {
    case RankState::kInCall: return "in_call";
    case RankState::kCompute: return "compute";
    case RankState::kExited: return "exited";
    case RankState::kCrashed: return "crashed";
    case RankState::kGone: return "gone";
    case RankState::kStopped: return "stopped";
    case RankState::kMissing: return "missing";
  }
  return "unknown";
}

const char* EndingName(Ending e) {
  switch (e) {
    case Ending::kRunning: return "running";
    case Ending::kExited: return "exited";
    case Ending::kCrashed: return "crashed";
    case Ending::kTerminated: return "terminated";
    case Ending::kKilled: return "killed";
  }
  return "running";
}

const char* BasisName(Basis b) {
  switch (b) {
    case Basis::kTrace: return "trace";
    case Basis::kStacks: return "stacks";
    case Basis::kLiveness: return "liveness";
  }
  return "liveness";
}

namespace load {
namespace {

// A process that exited while a thread of it was inside a traced call did
// not leave that call: another thread ended the process (an MPI library
// that lost its launcher exits from its progress thread; a signal handler
// that calls exit). It is where it was: a hung job, torn down. Unless it
// looks like a clean end that merely left a helper thread behind: exit
// code 0, from a thread other than the one in the call, which the watchdog
// never flagged (or the call is MPI_Finalize itself).
bool EndedInCall(const RankView& v) {
  if (!v.traced_call || v.ending == Ending::kRunning || v.ending == Ending::kCrashed) return false;
  if (v.ending != Ending::kExited) return true;  // killed or terminated inside it
  if (v.exit_code != 0 || v.watchdog) return true;
  if (v.current.call_flags & fmt::kCallFinalize) return false;
  return v.call_tid == uint32_t(v.pid);
}

RankState Decide(RankView& v, bool stale) {
  if (v.ending == Ending::kCrashed) return RankState::kCrashed;
  if (v.liveness == Liveness::kStopped) return RankState::kStopped;
  // 1. Its trace: a thread is in a call.
  if (v.traced_call && (v.ending == Ending::kRunning || v.ended_in_call)) {
    v.basis = Basis::kTrace;
    return stale ? RankState::kStopped : RankState::kInCall;
  }
  // 2. Its stacks: a call hangtrace does not wrap (or a rank nobody traced).
  if (v.stack_call.valid && v.ending == Ending::kRunning) {
    v.basis = Basis::kStacks;
    v.current = v.stack_call;
    v.call_tid = v.stack_call_tid;
    for (const ThreadStack& t : v.stacks) {
      if (t.tid == v.call_tid && t.tid != uint32_t(v.pid)) v.call_thread = t.name.empty() ? "tid " + std::to_string(t.tid) : t.name;
    }
    return stale ? RankState::kStopped : RankState::kInCall;
  }
  // 3. Its liveness.
  // Stacks stand for where it is only when its main thread's was read.
  v.basis = v.stacks.empty() || v.main_stack_unread || v.ending != Ending::kRunning ? Basis::kLiveness : Basis::kStacks;
  if (v.ending == Ending::kExited) return RankState::kExited;
  if (v.dead) {
    // Gone, but it beat until the others' last beat: torn down with the
    // job (by the launcher, a timeout), not dead first. It was computing.
    return v.heartbeat_real_ns && v.silent_s <= kHeartbeatStaleSeconds ? RankState::kCompute : RankState::kGone;
  }
  return stale ? RankState::kStopped : RankState::kCompute;
}

}  // namespace

void DecideRankStates(Job* job) {
  // Heartbeats: a process whose runtime went silent while the others' kept
  // beating is stopped (SIGSTOP) or wedged below the tracer. Compared with
  // the job's newest heartbeat, not this machine's clock, so it also holds
  // for files copied from other nodes, and after the job was killed.
  int64_t newest = 0;
  for (const RankView& v : job->ranks) newest = std::max(newest, v.heartbeat_real_ns);
  for (RankView& v : job->ranks) {
    if (v.path.empty()) {
      v.state = RankState::kMissing;
      continue;
    }
    v.silent_s = v.heartbeat_real_ns ? double(newest - v.heartbeat_real_ns) / 1e9 : 0;
    if (v.dump_heartbeat_age_s >= 0 && v.liveness == Liveness::kRunning) v.silent_s = v.dump_heartbeat_age_s;
    v.ended_in_call = EndedInCall(v);
    const bool stale = v.heartbeat_real_ns && v.silent_s > kHeartbeatStaleSeconds && !v.from_stacks;
    v.state = Decide(v, stale);
  }
}

}  // namespace load
}  // namespace hangtrace
