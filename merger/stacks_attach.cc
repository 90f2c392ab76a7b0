// The stacks of each rank: those its process captured itself (its watchdog,
// a crash, a dump's request), or a dump's, read from outside; then, once
// every file is read, named (once per distinct frame), mixed with their
// Python frames, and read for the call each rank is blocked in.
#include <algorithm>
#include <unordered_map>

#include "merger/load_stages.h"
#include "merger/stack_calls.h"
#include "merger/symbolize.h"

namespace hangtrace {
namespace load {
namespace {

// A dump's thread as the analysis keeps it (frames interned; Job::frames is
// shared: the caller holds its lock or is alone).
ThreadStack FromNode(Job* job, const NodeThread& th) {
  ThreadStack t;
  t.tid = th.tid;
  t.name = th.name;
  for (const Frame& f : th.frames) t.frames.push_back(job->InternFrame(f));
  t.state = th.state;
  t.syscall = th.syscall;
  t.lock_holder_pid = th.lock_holder_pid;
  t.lock_file = th.lock_file;
  if (std::none_of(th.frames.begin(), th.frames.end(), [](const Frame& f) { return f.IsNativeRead(); })) {
    t.not_read = th.error;
  }
  return t;
}

}  // namespace

void AttachStacks(const TraceSnapshot& s, const NodeProcess* dumped, SharedJob* shared, RankView* v) {
  // A dump's stacks (node.json) are newer, read from outside: they replace
  // what the process captured itself. Unless the dump could not read the
  // Python frames that the process's own capture on the dump's request
  // holds: then that capture, whose native and Python stacks are of one
  // instant, is the better one. A capture the process took before (at its
  // start, for a rank blocked in a rendezvous) shows where it was.
  const bool dump_has_stacks = dumped && std::any_of(dumped->threads.begin(), dumped->threads.end(),
                                                     [](const NodeThread& t) { return !t.frames.empty(); });
  if (dump_has_stacks && (dumped->HasPythonFrames() || s.py_frames.empty() || !dumped->captured_on_request)) {
    std::lock_guard<std::mutex> lock(shared->mu);  // Job::frames is shared
    for (const NodeThread& th : dumped->threads) {
      if (!th.frames.empty()) v->stacks.push_back(FromNode(shared->job, th));
    }
    return;
  }
  if (s.stacks.empty() && s.py_frames.empty()) return;
  // A capture older than the process's newest traced call (the watchdog's
  // of a call that then returned, an idle one before it called again) shows
  // where it was, not where it is: not used.
  uint64_t newest = 0;
  for (const ThreadInfo& t : s.threads) {
    if (t.tracer) continue;
    if (t.in_call) newest = std::max(newest, t.current.ticks);
    if (t.has_last) newest = std::max(newest, t.last.ticks);
  }
  uint64_t captured_at = 0;  // 0: no thread answered (no frames), or an old writer
  for (const StackInfo& st : s.stacks) captured_at = std::max(captured_at, st.ticks);
  if (captured_at && captured_at < newest) return;
  // The process's own capture: program counters named later (after every
  // file is read, once per distinct frame), Python frames mixed in then.
  std::vector<CapturedStack> captured = CapturedStacks(s);
  std::lock_guard<std::mutex> lock(shared->mu);
  for (const CapturedStack& c : captured) {
    ThreadStack t;
    t.tid = c.tid;
    t.name = c.thread_name;
    t.lock_holder_pid = c.lock_holder_pid;
    t.not_read = c.not_read;
    for (const Frame& f : c.native) t.frames.push_back(shared->job->InternFrame(f));
    for (const Frame& f : c.python) {
      t.python.push_back(shared->job->InternFrame(f));
      t.python_entry.push_back(false);
    }
    v->stacks.push_back(std::move(t));
  }
}

// Ranks a dump found without a trace file: from their environment and stacks.
void AddUntracedRanks(const std::vector<std::string>& dump_folders, NodeDumps* dumps, Job* job) {
  const bool dump = !dump_folders.empty();
  for (const std::string& folder : dump_folders) {
    const FolderDump& read = dumps->Of(folder);
    if (!read.read) continue;  // said by NodeDumps
    const NodeDump& node = read.node;
    // A rank's own processes that are no ranks go to their rank, once
    // every rank of the node has its place.
    std::vector<const NodeProcess*> children;
    for (const NodeProcess& np : node.processes) {
      if (np.child_of) {
        children.push_back(&np);
        continue;
      }
      if (!np.trace.empty()) continue;
      const std::string where = folder + "/" + kNodeFile + ": pid " + std::to_string(np.pid);
      if (np.rank < 0) {
        job->warnings.push_back(where + " has no rank in its environment and no trace file; skipped");
        continue;
      }
      if (np.rank >= kMaxRanks || np.world_size > kMaxRanks) {
        job->warnings.push_back(where + ": rank " + std::to_string(np.rank) + " is beyond what hangtrace analyzes; skipped");
        continue;
      }
      const int32_t size = std::max(np.world_size, np.rank + 1);
      if (size > job->world_size) {
        job->ranks.resize(size_t(size));
        for (int32_t r = job->world_size; r < size; ++r) job->ranks[size_t(r)].rank = r;
        job->world_size = size;
      }
      RankView& slot = job->ranks[size_t(np.rank)];
      if (!slot.path.empty()) {
        // A traced process holds the rank: this one (a wrapper shell, a
        // child with the rank's environment) is shown beside it.
        slot.also.push_back("pid " + std::to_string(np.pid) + " on " + node.host + " (untraced, in " + where + ")");
        continue;
      }
      RankView v;
      v.rank = np.rank;
      v.host = node.host;
      v.pid = np.pid;
      v.path = folder + "/" + kNodeFile;
      v.from_stacks = true;
      v.rank_from = np.rank_from;
      v.dump_state = np.state_before;
      v.liveness = np.liveness;
      if (np.state_before == "T" || np.state_before == "t") v.liveness = Liveness::kStopped;
      if (v.liveness == Liveness::kGone || v.liveness == Liveness::kZombie) v.ending = Ending::kKilled;
      v.dead = v.ending == Ending::kKilled;
      for (const NodeThread& th : np.threads) {
        if (!th.frames.empty()) v.stacks.push_back(FromNode(job, th));
      }
      slot = std::move(v);
    }
    for (const NodeProcess* np : children) {
      if (np->child_of_rank < 0 || np->child_of_rank >= job->world_size) continue;
      RankView& parent = job->ranks[size_t(np->child_of_rank)];
      if (parent.pid != np->child_of) continue;  // of a process that is not the rank's (a claimant's)
      ChildProcess c;
      c.pid = np->pid;
      c.cmdline = np->cmdline;
      c.name = c.cmdline.substr(0, c.cmdline.find(' '));
      c.name = c.name.substr(c.name.find_last_of('/') + 1);
      c.state = np->state_before;
      c.error = np->error;
      for (const NodeThread& th : np->threads) {
        if (!th.frames.empty()) c.stacks.push_back(FromNode(job, th));
      }
      parent.children.push_back(std::move(c));
    }
  }
  // A dump holds what its nodes sent: a rank it lacks was on a node that
  // sent nothing (silent, gone, or dumped by no one), or never started. Its
  // absence says nothing of where it is: never a crash, never a culprit.
  if (!dump) return;
  for (RankView& v : job->ranks) {
    if (v.path.empty() && v.blind.empty()) v.blind = "missing from the dump (its node sent none, or held no file of it)";
  }
}

}  // namespace load

void FinishStacks(Job* job) {
  // Native frames known by module and offset only: named once each.
  Symbolizer symbols;
  for (Frame& f : job->frames) {
    if (f.lang == Frame::Lang::kNative && !f.module.empty() && f.func.empty()) symbols.Resolve(&f);
  }
  // Processes of the job by (host, pid): whose lock a waiter waits for
  // (made only when a thread waits for a lock).
  std::unordered_map<std::string, int32_t> rank_of_pid;
  const bool locks = std::any_of(job->ranks.begin(), job->ranks.end(), [](const RankView& v) {
    return std::any_of(v.stacks.begin(), v.stacks.end(), [](const ThreadStack& t) { return t.lock_holder_pid != 0; });
  });
  for (const RankView& v : job->ranks) {
    if (locks && v.pid) rank_of_pid.emplace(v.host + "/" + std::to_string(v.pid), v.rank);
  }
  // Python frames mixed in first: they are frames of the job too.
  for (RankView& v : job->ranks) {
    for (ThreadStack& t : v.stacks) {
      if (t.python.empty()) continue;
      std::vector<Frame> native, python;
      size_t evals = 0;
      for (uint32_t id : t.frames) {
        native.push_back(job->frames[id]);
        evals += IsEvalFrame(native.back());
      }
      for (size_t i = 0; i < t.python.size(); ++i) {
        python.push_back(job->frames[t.python[i]]);
        python.back().entry = t.python_entry[i];
      }
      if (!t.entries_known) GuessEntries(&python, evals, v.python_version);
      t.frames.clear();
      for (const Frame& f : MixPythonFrames(native, python)) t.frames.push_back(job->InternFrame(f));
      t.python.clear();
      t.python_entry.clear();
    }
  }
  // hangtrace's Python hook is not the program's: its frames (the wrapper
  // between the program's line and torch's call) leave every stack, as if
  // the program ran untraced. Its native frames stay: a wrapper is named as
  // the call the program made, and hangtrace's own thread is folded apart.
  // Whose code each distinct frame is, judged once (by path: not per rank).
  std::vector<FrameOwner> owner(job->frames.size());
  std::vector<uint8_t> hook(job->frames.size());
  for (size_t i = 0; i < job->frames.size(); ++i) {
    owner[i] = job->owners.Of(job->frames[i]);
    hook[i] = job->frames[i].lang == Frame::Lang::kPython && owner[i] == FrameOwner::kHangtrace;
  }
  auto unhook = [&](std::vector<ThreadStack>& stacks) {
    for (ThreadStack& t : stacks) {
      t.frames.erase(std::remove_if(t.frames.begin(), t.frames.end(), [&](uint32_t id) { return hook[id]; }),
                     t.frames.end());
    }
  };
  for (RankView& v : job->ranks) {
    unhook(v.stacks);
    for (ChildProcess& c : v.children) unhook(c.stacks);
  }
  const StackCalls calls(*job);  // each distinct frame read once
  for (RankView& v : job->ranks) {
    // The call its stacks show: the main thread's, else the first thread's
    // that is in one. A sleep is not a call (the rank computes, slowly).
    v.stack_call = CallPoint{};
    v.stack_call_tid = 0;
    StackCall best;
    for (const ThreadStack& t : v.stacks) {
      const StackCall c = calls.Find(t);
      if (c.kind == StackCallKind::kNone || c.kind == StackCallKind::kSleep) continue;
      const bool main = t.tid == uint32_t(v.pid);
      if (best.kind == StackCallKind::kNone || (main && v.stack_call_tid != uint32_t(v.pid))) {
        best = c;
        v.stack_call_tid = t.tid;
        v.stack_call = CallPoint{};
        v.stack_call.valid = true;
        v.stack_call.from_stacks = true;
        v.stack_call.name = job->Intern(c.name);
        v.stack_call.op = c.op;
        if (c.kind == StackCallKind::kFileLock && t.lock_holder_pid) {
          auto it = rank_of_pid.find(v.host + "/" + std::to_string(t.lock_holder_pid));
          v.stack_call.lock_holder = it == rank_of_pid.end() || it->second == v.rank ? -1 : it->second;
        }
      }
    }
    // Where the main thread computes or sleeps: its innermost named frame.
    const ThreadStack* main_thread = ThreadOrFirst(v.stacks, v.pid);
    v.idle_frame = -1;
    // Kernel frames (/proc/TID/stack) and Python frames do not say whether
    // it is inside a communication call (mpi4py's Allreduce runs below the
    // Python line that calls it): only native frames read from its stack do.
    v.main_stack_unread = !v.stacks.empty() && (!main_thread || main_thread->tid != uint32_t(v.pid) ||
                                                 std::none_of(main_thread->frames.begin(), main_thread->frames.end(),
                                                              [&](uint32_t id) { return job->frames[id].IsNativeRead(); }));
    for (size_t i = 0; main_thread && !v.main_stack_unread && i < main_thread->frames.size() && v.idle_frame < 0; ++i) {
      if (!job->frames[main_thread->frames[i]].func.empty()) v.idle_frame = main_thread->frames[i];
    }
    // Where in the program the rank waits, read on the thread in its call
    // (traced, else seen on its stacks), else its main thread, else its
    // first thread.
    const uint32_t want = v.call_tid ? v.call_tid : v.stack_call_tid ? v.stack_call_tid : uint32_t(v.pid);
    const ThreadStack* in = ThreadOrFirst(v.stacks, int32_t(want));
    // A library's own frames (h5py's, torch's, the standard library's,
    // libmpi's) say less than the program's line that called into them:
    // the innermost frame of the user's code is taken; in a Python program
    // with none, its innermost Python frame.
    v.user_frame = -1;
    int64_t innermost_python = -1;
    for (size_t i = 0; in && i < in->frames.size() && v.user_frame < 0; ++i) {
      const Frame& f = job->frames[in->frames[i]];
      if (innermost_python < 0 && f.lang == Frame::Lang::kPython) innermost_python = in->frames[i];
      if (owner[in->frames[i]] == FrameOwner::kUser) v.user_frame = in->frames[i];
    }
    if (v.user_frame < 0) v.user_frame = innermost_python;
    // Its own processes: where each one's main thread is.
    for (ChildProcess& c : v.children) {
      const ThreadStack* main_thread = ThreadOrFirst(c.stacks, c.pid);
      if (!main_thread) continue;
      const StackCall call = calls.Find(*main_thread);
      if (call.kind != StackCallKind::kNone) c.call = call.name;
      for (uint32_t id : main_thread->frames) {
        const Frame& f = job->frames[id];
        if (c.idle_frame < 0 && !f.func.empty()) c.idle_frame = id;
        if (c.user_frame < 0 && owner[id] == FrameOwner::kUser) c.user_frame = id;
      }
    }
  }
}

}  // namespace hangtrace
