// ReadFacts: what a snapshot says of its process, before any record is
// read: who it is, how (and whether) it ended, and whether it is alive.
// Nothing here decides the rank's state: DecideRankStates does, once every
// file is read (rank_state.cc).
#include "merger/load_stages.h"

namespace hangtrace::load {

bool IsRankFile(const TraceSnapshot& s, const std::string& path, std::vector<std::string>* warnings) {
  const fmt::ProcessInfo& p = s.process;
  if (p.forked || fmt::ProcState(p.state) == fmt::ProcState::kExeced) return false;  // not a rank
  if (p.rank >= kMaxRanks || p.world_size > kMaxRanks) {
    warnings->push_back(path + ": rank " + std::to_string(p.rank) + " of " + std::to_string(p.world_size) +
                        " is beyond the " + std::to_string(kMaxRanks) +
                        " ranks hangtrace analyzes (a damaged file?); skipped");
    return false;
  }
  if (p.rank < 0) {
    warnings->push_back(path + ": no rank known (pid " + std::to_string(p.pid) + " on " + p.host +
                        " was not started by an MPI launcher); skipped");
    return false;
  }
  return true;
}

RankView ReadFacts(const TraceSnapshot& s, const std::string& path, const NodeProcess* dumped) {
  const fmt::ProcessInfo& p = s.process;
  RankView v;
  v.rank = p.rank;
  v.host = p.host;
  v.pid = p.pid;
  v.ppid = p.ppid;
  v.path = path;
  v.rank_source = p.rank_source;
  v.start_time = p.proc_start_time;
  v.exit_code = p.exit_code;
  v.signal = p.signal;
  v.signal_tid = uint32_t(p.signal_tid);
  v.heartbeat_real_ns = p.heartbeat_real_ns;
  v.watchdog_timeout_s = p.watchdog_timeout_ms / 1000.0;
  v.python_version = p.python_version;
  v.term_signal = p.term_signal;
  if (p.term_signal) {
    const std::string who = BoundedString(p.term_sender, sizeof(p.term_sender));
    v.term_sender = (who.empty() ? "pid " + std::to_string(p.term_sender_pid)
                                 : who + " (pid " + std::to_string(p.term_sender_pid) + ")");
    if (p.term_sender_pid <= 0) v.term_sender = "the kernel or an unknown sender";
  }
  // A snapshot in a dump folder is a photograph: the process as the dump
  // found it, never what /proc says of its pid today.
  v.liveness = dumped ? dumped->liveness : ProcessLiveness(s);
  if (dumped) {
    v.dump_state = dumped->state_before;
    v.dump_heartbeat_age_s = dumped->heartbeat_age_s;
  }
  const bool vanished = v.liveness == Liveness::kGone || v.liveness == Liveness::kZombie;
  switch (fmt::ProcState(p.state)) {
    case fmt::ProcState::kExited: v.ending = Ending::kExited; break;
    case fmt::ProcState::kCrashed: v.ending = Ending::kCrashed; break;
    default:
      if (vanished) v.ending = p.term_signal ? Ending::kTerminated : Ending::kKilled;
  }
  v.dead = v.ending == Ending::kTerminated || v.ending == Ending::kKilled;
  // It initialized a communication library: a communicator is registered
  // (MPI_COMM_WORLD at MPI_Init, an NCCL communicator), or its rank came
  // from one. The process that did is the rank; a child that inherited its
  // environment is not.
  v.initialized = p.rank_source == uint8_t(fmt::RankSource::kMpi) ||
                  p.rank_source == uint8_t(fmt::RankSource::kNccl) ||
                  p.rank_source == uint8_t(fmt::RankSource::kTorch);
  for (size_t i = 0; i < s.comms.size() && !v.initialized; ++i) v.initialized = s.comm_valid[i];
  if (const uint32_t n = s.header.counters.lanes_refused) {
    v.blind = "not traced (no room in the trace folder for the record lanes of " + std::to_string(n) + " thread" +
              (n == 1 ? ")" : "s)");
  }
  return v;
}

}  // namespace hangtrace::load
