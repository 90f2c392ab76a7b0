// hangtrace inspect: what one or more trace files hold, for a person.
//
// Per file: the process and its state (running, wedged, exited, crashed),
// each thread's current call and for how long, the communicators, the
// captured stacks and the last events. The cross-rank diagnosis is
// `hangtrace analyze`; this is the view of single processes.
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cmds/commands.h"
#include "merger/node_dump.h"
#include "merger/rank_set.h"
#include "merger/symbolize.h"
#include "merger/trace_reader.h"
#include "tracer/clock.h"
#include "tracer/procfs.h"

namespace hangtrace {
namespace {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string Describe(const TraceSnapshot& s, const fmt::Record& r) {
  std::string out = s.CallName(r.call);
  if (r.seq) out += " #" + std::to_string(r.seq);
  if (r.comm != fmt::kNoComm) out += " on " + s.CommLabel(r.comm);
  const CallDesc* c = s.Call(r.call);
  if (r.peer >= 0) out += (c && (c->flags & fmt::kCallRooted)) ? " root " : " peer ";
  if (r.peer >= 0) out += std::to_string(r.peer);
  if (r.peer == fmt::kAnyPeer) out += " peer ANY";
  if (r.peer == fmt::kNullPeer) out += " peer PROC_NULL";
  if (c && (c->flags & fmt::kCallP2p)) out += r.tag == fmt::kAnyTag ? " tag ANY" : " tag " + std::to_string(r.tag);
  if (c && (c->flags & fmt::kCallNonblocking) && r.handle) {
    char h[32];
    snprintf(h, sizeof(h), " request %llx", static_cast<unsigned long long>(r.handle));
    out += h;
  }
  const bool launch = c && fmt::Op(c->op) == fmt::Op::kKernel;
  if (launch) {
    std::string k = s.KernelName(r);
    out += " kernel " + (k.empty() ? std::string("?") : k) + " blocks " + std::to_string(r.count) + " x " +
           std::to_string(r.tag);
  } else if (r.count) {
    out += " count " + std::to_string(r.count);
  }
  if (r.dtype) out += std::string(" ") + fmt::DtypeName(fmt::Dtype(r.dtype));
  if (r.redop) out += std::string(" ") + fmt::RedopName(fmt::Redop(r.redop));
  if (c && (launch || fmt::Op(c->op) == fmt::Op::kSync || fmt::Api(c->api) == fmt::Api::kNccl) && r.handle) {
    char h[40];
    snprintf(h, sizeof(h), " stream %llx", static_cast<unsigned long long>(r.handle));
    out += h;
  }
  if (r.flags & fmt::kRecPtsz) out += " (per-thread stream)";
  if (r.flags & fmt::kRecInGroup) out += " group " + std::to_string(r.aux);
  return out;
}

// Seconds since the process last refreshed its heartbeat: by the monotonic
// clock when this reader shares it (same boot), else by wall clock.
double HeartbeatAge(const TraceSnapshot& s) {
  uint8_t boot[16];
  ReadBootId(boot);
  if (memcmp(boot, s.process.boot_id, 16) != 0) {
    return double(RealtimeNs() - s.process.heartbeat_real_ns) / 1e9;
  }
  return double(MonotonicNs() - int64_t(s.process.heartbeat_mono_ns)) / 1e9;
}

// Is the process still there, and is its runtime alive?
std::string LivenessText(const TraceSnapshot& s, double heartbeat_age) {
  const Liveness live = ProcessLiveness(s);
  if (s.process.term_signal && (live == Liveness::kGone || live == Liveness::kZombie)) {
    const std::string who = BoundedString(s.process.term_sender, sizeof(s.process.term_sender));
    return " (ended by SIGTERM from " + (who.empty() ? "pid " : who + ", pid ") +
           std::to_string(s.process.term_sender_pid) + ", at " + std::to_string(s.Seconds(s.process.clock.start_ticks, s.process.term_ticks)).substr(0, 8) + " s)";
  }
  switch (live) {
    case Liveness::kStopped: return " (process is STOPPED)";
    case Liveness::kZombie: return " (process is a zombie: exited, not yet reaped)";
    case Liveness::kGone: return " (gone without an exit record: killed?)";
    case Liveness::kRunning:
      return heartbeat_age > kHeartbeatStaleSeconds ? " (process exists but its runtime is silent: wedged?)" : "";
    case Liveness::kUnknown: break;
  }
  return heartbeat_age > kHeartbeatStaleSeconds ? " (stale: stopped, wedged or gone?)" : "";
}

void PrintSnapshot(const TraceSnapshot& s, size_t max_events, bool all_events) {
  const fmt::ProcessInfo& p = s.process;
  printf("== %s\n", s.path.c_str());
  for (const std::string& w : s.warnings) printf("warning  %s\n", w.c_str());
  std::string rank = p.rank >= 0 ? "rank " + std::to_string(p.rank) : "rank unknown";
  if (p.world_size > 0) rank += " of " + std::to_string(p.world_size);
  const std::string run = BoundedString(p.run, sizeof(p.run));
  printf("process  pid %d on %s, %s (%s), job %s%s%s%s%s\n", p.pid, p.host, rank.c_str(),
         fmt::RankSourceName(fmt::RankSource(p.rank_source)), p.job, p.step[0] ? " step " : "", p.step,
         run.empty() ? "" : ", run ", run.c_str());
  if (p.forked) printf("forked   from traced pid %d\n", p.parent_pid);
  printf("command  %s\n", p.cmdline[0] ? p.cmdline : p.exe);

  const fmt::ProcState state = fmt::ProcState(p.state);
  const uint64_t last_ticks = p.end_ticks ? p.end_ticks : 0;
  double ran = last_ticks ? s.Seconds(p.clock.start_ticks, last_ticks) : -1;
  switch (state) {
    case fmt::ProcState::kExited: {
      // The status the shell sees (exit(-61) is status 195), and a thread
      // still inside a call when another ended the process.
      const int status = p.exit_code & 0xff;
      std::string in_call;
      for (const ThreadInfo& t : s.threads) {
        if (!t.tracer && t.in_call) in_call = " while tid " + std::to_string(t.tid) + " was inside " + s.CallName(t.current.call);
      }
      printf("state    exited with status %d%s after %.3f s%s\n", status,
             status == p.exit_code ? "" : (" (exit(" + std::to_string(p.exit_code) + "))").c_str(), ran, in_call.c_str());
      break;
    }
    case fmt::ProcState::kCrashed:
      printf("state    CRASHED: %s (code %d, address 0x%" PRIx64 ") in tid %d after %.3f s\n",
             SignalName(p.signal).c_str(), p.signal_code, p.fault_addr, p.signal_tid, ran);
      break;
    case fmt::ProcState::kExeced:
      printf("state    exec'ed a new program (which has its own trace file)\n");
      break;
    default: {
      // The file says running; /proc (or the heartbeat) may say it ended.
      double age = HeartbeatAge(s);
      const Liveness live = ProcessLiveness(s);
      const bool ended = live == Liveness::kGone || live == Liveness::kZombie;
      printf("state    %s, heartbeat %.1f s ago%s\n", ended ? "ended" : fmt::ProcStateName(state), age,
             LivenessText(s, age).c_str());
    }
  }
  if (p.watchdog_timeout_ms) {
    printf("watchdog timeout %.1f s, %u call(s) flagged\n", p.watchdog_timeout_ms / 1000.0, p.watchdog_fires);
  }
  const bool compact = s.header.features & fmt::kFeatCompact;
  printf("events   %zu readable, %" PRIu64 " %s, %" PRIu64 " rejected (mid-write)\n", s.events.size(), s.events_lost,
         compact ? "older left out (a compact copy: the newest of each thread, and the older ones the analysis needs)"
                 : "overwritten by wrap",
         s.events_rejected);
  // `dropped` counts the refused lanes too (files of older runtimes do not
  // tell them apart): what remains is tables that were full.
  const uint64_t refused = s.header.counters.lanes_refused;
  if (refused) {
    printf("untraced %" PRIu64 " thread(s): no room in the trace folder for their record lanes (a full disk or "
           "/dev/shm)\n", refused);
  }
  if (s.header.counters.dropped > refused) {
    printf("dropped  %" PRIu64 " (tables full: threads or communicators beyond the file's capacity)\n",
           s.header.counters.dropped - refused);
  }

  printf("threads  %zu\n", s.threads.size());
  for (const ThreadInfo& t : s.threads) {
    printf("  tid %u \"%s\"", t.tid, t.name.c_str());
    if (t.tracer) {
      printf(": hangtrace's own thread (%s)\n", t.name == "hangtrace-dev" ? "device completion poller" : "heartbeat, watchdog");
    } else if (t.in_call) {
      printf(": IN %s for %.1f s (since %+.3f s)%s%s\n", Describe(s, t.current).c_str(),
             s.SecondsInCall(t.current.ticks), s.Seconds(p.clock.start_ticks, t.current.ticks),
             t.watchdog_flagged ? "  [watchdog]" : "",
             t.unstable ? "  (slot mid-write)" : "");
    } else if (t.has_last) {
      printf(": not in a traced call; last returned from %s at %+.3f s\n",
             Describe(s, t.last).c_str(), s.Seconds(p.clock.start_ticks, t.last.ticks));
    } else {
      printf(": no traced call yet\n");
    }
  }
  size_t ncomms = 0;
  for (bool v : s.comm_valid) ncomms += v;
  if (ncomms) printf("comms    %zu\n", ncomms);
  for (size_t i = 0; i < s.comms.size(); ++i) {
    if (!s.comm_valid[i]) continue;
    const fmt::CommEntry& c = s.comms[i].entry;
    RankSet members;
    for (int32_t m : s.comms[i].members) members.Add(m);
    printf("  %-12s id %016" PRIx64 " %s size %d my index %d%s%s%s, %" PRIu64 " collectives\n",
           s.CommLabel(uint16_t(i)).c_str(), c.id, fmt::CommKindName(fmt::CommKind(c.kind)), c.size,
           c.my_index, members.Empty() ? "" : " members ", members.ToString().c_str(),
           (c.flags & fmt::kCommFreed) ? " (freed)" : "", c.coll_seq);
  }
  if (!s.stacks.empty()) {
    if (const uint64_t at = s.CaptureTicks()) {
      printf("stacks   %zu thread(s), captured at %+.3f s\n", s.stacks.size(), s.Seconds(p.clock.start_ticks, at));
    } else {
      printf("stacks   %zu thread(s), none answered the capture\n", s.stacks.size());
    }
  }
  Symbolizer symbols;
  const auto named = SnapshotStacks(s, &symbols);
  for (const auto& [tid, frames] : named) {
    const StackInfo* st = nullptr;
    for (const StackInfo& x : s.stacks) {
      if (x.tid == tid) st = &x;
    }
    const char* why = !st                                         ? "Python frames only"
                      : st->reason == fmt::StackReason::kCrash    ? "crash"
                      : st->reason == fmt::StackReason::kWatchdog ? "watchdog"
                      : st->reason == fmt::StackReason::kIdle     ? "idle past the timeout"
                                                                  : "request";
    const std::string lock =
        st && st->lock_holder_pid ? "; waits for a file lock held by pid " + std::to_string(st->lock_holder_pid) : "";
    // How it was taken: read while blocked in a call (which one), or by the
    // signal while it ran; and what did not go as planned.
    std::string how;
    if (st && st->method == fmt::StackMethod::kBlockedRead) {
      how = st->syscall_nr >= 0 ? ", read while blocked in system call " + std::to_string(st->syscall_nr)
                                : ", read while blocked";
      if (st->flags & fmt::kStackFramePointerScan) how += ", its frame pointer found on the stack";
      if (st->flags & fmt::kStackMoved) how += ", which it left meanwhile: the frames may mix two instants";
    }
    if (st && (st->flags & fmt::kStackInterruptedCall)) {
      how += ", signalled as it entered a system call, which returned EINTR";
    }
    const std::string not_read = st ? WhyStackNotRead(*st) : "";
    printf("  tid %u \"%s\" (%s%s)%s%s\n", tid, st ? st->thread_name.c_str() : "", why, how.c_str(),
           not_read.empty() ? "" : (": not read: " + not_read).c_str(), lock.c_str());
    for (size_t i = 0; i < frames.size(); ++i) {
      printf("    #%-2zu %s%s\n", i, frames[i].lang == Frame::Lang::kPython ? "[py] " : "", frames[i].Text().c_str());
    }
  }
  if (p.python_version) {
    printf("python   %u.%u.%u, frames: %s\n", p.python_version >> 24, (p.python_version >> 16) & 0xff,
           (p.python_version >> 8) & 0xff, fmt::PythonStatusName(fmt::PythonStatus(p.python_status)));
  }
  size_t first = all_events || s.events.size() <= max_events ? 0 : s.events.size() - max_events;
  if (!s.events.empty()) {
    printf("events   %s\n", first ? ("last " + std::to_string(max_events) + " (--events N, --all)").c_str() : "all");
  }
  for (size_t i = first; i < s.events.size(); ++i) {
    const fmt::Record& r = s.events[i].rec;
    std::string extra;
    if (r.kind == uint8_t(fmt::EventKind::kEnd) && r.result) extra = " -> " + std::to_string(r.result);
    if (r.kind == uint8_t(fmt::EventKind::kWatchdog)) extra = " (" + std::to_string(r.aux) + " ms in call)";
    if (r.kind == uint8_t(fmt::EventKind::kDevicePending) || r.kind == uint8_t(fmt::EventKind::kComplete)) {
      extra = " [device op " + std::to_string(r.aux) + "]";
    }
    printf("  %+11.6f  tid %-7u %-8s %s%s\n", s.Seconds(p.clock.start_ticks, r.ticks), r.tid,
           fmt::EventKindName(fmt::EventKind(r.kind)), Describe(s, r).c_str(), extra.c_str());
  }
  printf("\n");
}

}  // namespace

int InspectCommand(int argc, char** argv) {
  CLI::App app{
      "Show what trace files hold: the process and its state, each thread's current call, the\n"
      "communicators, captured stacks and the last events. PATH is a trace file or a folder\n"
      "(searched two levels deep for *.htrace).\n\n"
      "example:\n"
      "  hangtrace inspect /dev/shm/hangtrace-$USER/12345/ --events 50\n",
      "hangtrace inspect"};
  std::vector<std::string> paths;
  size_t max_events = 20;
  bool all = false;
  app.add_option("path", paths, "trace files or folders")->required()->expected(-1);
  app.add_option("--events", max_events, "how many of the last events to list per file (default 20)");
  app.add_flag("--all", all, "list every readable event");
  HT_PARSE(app, argc, argv);

  int read_ok = 0, failed = 0;
  for (std::string path : paths) {
    // A dump of two looks: its newer one (both would show each process twice).
    const Looks looks = LooksIn(path);
    if (looks == Looks::kTwo) {
      fprintf(stderr, "hangtrace inspect: %s holds two looks at the job: the second, %s/second (%s/first: the earlier)\n",
              path.c_str(), path.c_str(), path.c_str());
      path += "/second";
    } else if (looks == Looks::kFirstOnly) {
      fprintf(stderr, "hangtrace inspect: %s holds one look, %s/first: its second never came\n", path.c_str(),
              path.c_str());
      path += "/first";
    }
    std::string error;
    std::vector<std::string> files = FindTraceFiles(path, &error);
    if (!error.empty()) {
      fprintf(stderr, "hangtrace inspect: %s\n", error.c_str());
      ++failed;
      continue;
    }
    // A dump's processes without a trace file (untraced ranks, processes
    // named by pid): their stacks, as the dump read them.
    int untraced = 0;
    for (const std::string& folder : FindNodeDumps(path)) {
      NodeDump node;
      std::string dump_error;
      if (!ReadNodeDump(folder, &node, &dump_error)) continue;
      for (const NodeProcess& np : node.processes) {
        if (!np.trace.empty()) continue;
        printf("== %s/%s: pid %d%s (untraced)\n", folder.c_str(), kNodeFile, np.pid,
               np.rank >= 0 ? (", rank " + std::to_string(np.rank)).c_str() : "");
        fputs(ProcessStacksText(np).c_str(), stdout);
        ++untraced;
      }
    }
    read_ok += untraced;
    if (files.empty() && untraced == 0) {
      fprintf(stderr, "hangtrace inspect: no trace files (*.htrace) under %s\n", path.c_str());
      ++failed;
      continue;
    }
    for (const std::string& file : files) {
      std::string err;
      auto snap = ReadTraceFile(file, &err);
      if (!snap) {
        fprintf(stderr, "hangtrace inspect: %s\n", err.c_str());
        ++failed;
        continue;
      }
      PrintSnapshot(*snap, max_events, all);
      ++read_ok;
    }
  }
  return read_ok == 0 ? 1 : (failed ? 3 : 0);
}

}  // namespace hangtrace
