// LoadJob: every trace file of a job, in parallel, through the loader's
// stages (load_stages.h) into one Job; then one process per rank, chosen by
// evidence, and each rank's state decided once.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "merger/load_stages.h"

namespace hangtrace {
namespace {

using load::NodeDumps;
using load::Partial;
using load::SharedJob;

// One file's snapshot through the per-file stages.
void LoadSnapshot(const std::string& path, const TraceSnapshot& s, const LoadOptions& options, SharedJob* shared,
                  NodeDumps* dumps, Partial* out) {
  for (const std::string& w : s.warnings) out->warnings.push_back(path + ": " + w);
  JobFiles& of_job = out->jobs[BoundedString(s.process.job, sizeof(s.process.job))];
  if (of_job.files++ == 0) of_job.example = path;
  // Runs are told apart by the launch, not by the job id they share.
  const std::string run = BoundedString(s.process.run, sizeof(s.process.run));
  RunFiles& of_run = out->runs[run];
  if (of_run.files++ == 0 || path < of_run.example) of_run.example = path;
  if (!s.process.forked) of_run.start_real_ns = std::max(of_run.start_real_ns, s.process.clock.ref_real_ns);
  if (options.run && run != *options.run) return;
  if (!load::IsRankFile(s, path, &out->warnings)) return;
  ++out->files;
  out->records += s.EventCount();
  const NodeProcess* dumped = dumps->Find(path, s.process.pid, out);
  const load::FileMaps maps = load::MapFile(s, path, s.process.rank, shared, &out->warnings);
  RankView v = load::ReadFacts(s, path, dumped);
  load::ScanRecords(s, maps, shared, &v, out);
  load::AttachStacks(s, dumped, shared, &v);
  out->ranks.push_back(std::move(v));
}

// One file: read, then its snapshot's stages.
void LoadFile(const std::string& path, const LoadOptions& options, SharedJob* shared, NodeDumps* dumps,
              Partial* out) {
  std::string err;
  ReadOptions opts;
  opts.sort_events = false;
  opts.events_in_place = true;  // read before this thread reads another file
  auto snap = ReadTraceFile(path, &err, opts);
  if (!snap) {
    out->warnings.push_back(err + "; skipped");
    return;
  }
  LoadSnapshot(path, *snap, options, shared, dumps, out);
}

// Of two processes that claim one rank, whether `a` is the rank rather than
// `b`: the one that initialized a communication library (a child that
// inherited the rank's environment, a wrapper shell that does not exec, a
// data-loader worker did not); then the one that recorded calls; then the
// other's parent; then the one started first; then the path. Whatever
// order the files are read in, by however many threads, the same one wins.
bool IsTheRank(const RankView& a, const RankView& b) {
  if (a.initialized != b.initialized) return a.initialized;
  if ((a.records > 0) != (b.records > 0)) return a.records > 0;
  if (b.ppid == a.pid && a.ppid != b.pid) return true;
  if (a.ppid == b.pid && b.ppid != a.pid) return false;
  if (a.start_time != b.start_time && a.host == b.host) return a.start_time < b.start_time;
  return a.path < b.path;
}

// "pid 4242 on node3 (python3 worker, .../node3.4242.htrace)" for `also`.
std::string ClaimText(const RankView& v) {
  return "pid " + std::to_string(v.pid) + " on " + v.host + " (" + v.path + ")";
}

// A communicator nobody named is called by what it is: "comm 0a77 of 3:
// 0,2,4" (the id's last four hex digits, its size, its members as world
// ranks when known) instead of sixteen hex digits. A window or file by its
// communicator and its place among those made there: "window 2 of world",
// "file 1 of comm 0a77 of 3: 0,2,4".
void NameWindowsAndFiles(Job* job);
bool IsWindowOrFile(const GlobalComm& c) {
  return c.kind == fmt::CommKind::kMpiWindow || c.kind == fmt::CommKind::kMpiFile;
}
void NameUnlabeledComms(Job* job) {
  for (GlobalComm& c : job->comms) {
    if (c.world || c.label != HexId(c.id)) continue;
    if (IsWindowOrFile(c)) continue;
    std::string text = "comm " + c.label.substr(c.label.size() - 4) + " of " + std::to_string(c.size);
    RankSet members;
    bool all = !c.members.empty();
    for (int32_t m : c.members) {
      if (m < 0) all = false;
      else members.Add(m);
    }
    if (all) text += ": " + members.Brief(24);
    c.label = text;
    c.family = text;
  }
  // Unnamed siblings (made by one call of one parent: the halves of a
  // split) are one family, as named ones "pp0", "pp1" are by their names.
  std::map<std::tuple<uint64_t, uint32_t, uint16_t>, std::string> first_label;
  for (GlobalComm& c : job->comms) {
    if (c.world || !c.parent_id || c.label.rfind("comm ", 0) != 0) continue;
    auto [it, inserted] = first_label.emplace(std::make_tuple(c.parent_id, c.parent_counter, c.creator_call), c.label);
    c.family = "made with " + it->second;
  }
  NameWindowsAndFiles(job);
}

void NameWindowsAndFiles(Job* job) {
  // Per communicator and kind, in the order they were made there.
  std::map<std::pair<uint64_t, fmt::CommKind>, std::vector<GlobalComm*>> made;
  for (GlobalComm& c : job->comms) {
    if (IsWindowOrFile(c) && c.label == HexId(c.id)) {
      made[{c.parent_id, c.kind}].push_back(&c);
    }
  }
  for (auto& [where, list] : made) {
    std::sort(list.begin(), list.end(), [](const GlobalComm* a, const GlobalComm* b) {
      return a->parent_counter < b->parent_counter;
    });
    auto parent = job->comm_index.find(where.first);
    const std::string of = parent != job->comm_index.end() ? job->comms[size_t(parent->second)].label
                                                            : "a communicator the trace does not show";
    const std::string what = where.second == fmt::CommKind::kMpiWindow ? "window" : "file";
    for (size_t i = 0; i < list.size(); ++i) {
      list[i]->label = what + " " + std::to_string(i + 1) + " of " + of;
      list[i]->family = what + "s of " + of;
    }
  }
}

}  // namespace

namespace load {

const NodeProcess* NodeDumps::Find(const std::string& trace_path, int32_t pid, Partial* out) {
  std::string folder = trace_path.substr(0, trace_path.find_last_of('/'));
  if (!out->dump || folder != out->dump_folder) {
    out->dump = &Of(folder);
    out->dump_folder = std::move(folder);
  }
  auto found = out->dump->by_pid.find(pid);
  return found == out->dump->by_pid.end() ? nullptr : &out->dump->node.processes[found->second];
}

const FolderDump& NodeDumps::Of(const std::string& folder) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = dumps_.emplace(folder, FolderDump());
  if (fresh) {
    FolderDump& d = it->second;
    std::string error;
    if (ReadNodeDump(folder, &d.node, &error)) {
      d.read = true;
      for (size_t i = 0; i < d.node.processes.size(); ++i) d.by_pid[d.node.processes[i].pid] = i;
    } else if (!error.empty()) {
      warnings.push_back(folder + "/" + kNodeFile + ": " + error + "; its stacks are ignored");
    }
  }
  return it->second;
}

}  // namespace load

Job LoadJob(const std::vector<std::string>& paths, const LoadOptions& options) {
  Job job;
  job.owners = FrameOwners(options.user_paths);
  std::vector<std::string> files, dump_folders;
  std::vector<NoRoomMarker> no_room;
  // One listing of each path: trace files, no-room markers, dump folders.
  for (const std::string& p : paths) {
    std::string err;
    const size_t markers = no_room.size(), dumps_before = dump_folders.size();
    std::vector<std::string> found = FindTraceFiles(p, &err, &job.warnings, &no_room, &dump_folders);
    if (!err.empty()) job.warnings.push_back(err);
    else if (found.empty() && no_room.size() == markers && dump_folders.size() == dumps_before) {
      job.warnings.push_back(p + ": no trace files (*.htrace)");
    }
    files.insert(files.end(), found.begin(), found.end());
  }
  int nthreads = options.threads > 0 ? options.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  nthreads = std::min<int>(nthreads, int(std::max<size_t>(files.size(), 1)));
  std::vector<Partial> parts(static_cast<size_t>(nthreads));
  // Each worker's ranks, with room for its share: a RankView is a kilobyte,
  // and a growing vector moved 131,072 of them around.
  for (Partial& part : parts) part.ranks.reserve(files.size() / size_t(nthreads) + files.size() / 16 + 16);
  SharedJob shared{&job, {}};
  NodeDumps dumps;
  std::atomic<size_t> next{0};
  auto work = [&](Partial* part) {
    const bool reports = part == &parts[0] && options.progress;
    auto last = std::chrono::steady_clock::now();
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      LoadFile(files[i], options, &shared, &dumps, part);
      if (reports && std::chrono::steady_clock::now() - last > std::chrono::milliseconds(500)) {
        last = std::chrono::steady_clock::now();
        options.progress(std::min(next.load(), files.size()), files.size());
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < nthreads; ++t) pool.emplace_back(work, &parts[size_t(t)]);
  work(&parts[0]);
  for (auto& t : pool) t.join();
  job.warnings.insert(job.warnings.end(), dumps.warnings.begin(), dumps.warnings.end());
  const size_t dump_warnings_said = dumps.warnings.size();

  // Merge the workers' findings.
  for (const NoRoomMarker& m : no_room) {
    job.world_size = std::max({job.world_size, m.world_size, m.rank + 1});
  }
  job.ranks.resize(size_t(job.world_size));
  for (int32_t r = 0; r < job.world_size; ++r) job.ranks[size_t(r)].rank = r;
  std::set<std::pair<int32_t, uint64_t>> flagged;
  // The files' warnings in the files' order (each names its file first),
  // whichever worker read which: two reads of the same files say the same.
  std::vector<std::string> file_warnings;
  for (Partial& part : parts) file_warnings.insert(file_warnings.end(), part.warnings.begin(), part.warnings.end());
  std::stable_sort(file_warnings.begin(), file_warnings.end());
  job.warnings.insert(job.warnings.end(), file_warnings.begin(), file_warnings.end());
  for (size_t w = 0; w < parts.size(); ++w) {
    Partial& part = parts[w];
    job.files += part.files;
    job.records += part.records;
    for (auto& [id, f] : part.jobs) {
      JobFiles& all = job.jobs[id];
      if (all.example.empty() || f.example < all.example) all.example = f.example;
      all.files += f.files;
    }
    for (auto& [id, f] : part.runs) {
      RunFiles& all = job.runs[id];
      if (all.example.empty() || f.example < all.example) all.example = f.example;
      all.files += f.files;
      all.start_real_ns = std::max(all.start_real_ns, f.start_real_ns);
    }
    for (RankView& v : part.ranks) {
      v.worker = uint32_t(w);
      RankView& slot = job.ranks[size_t(v.rank)];
      if (slot.path.empty()) {
        slot = std::move(v);
        continue;
      }
      RankView& kept = IsTheRank(v, slot) ? v : slot;
      RankView& other = &kept == &v ? slot : v;
      if (kept.initialized && other.initialized) {
        // Two processes that both initialized the library as this rank: a
        // rerun in the same folder, a copied file. Said with the verdict.
        job.duplicates.push_back("rank " + std::to_string(v.rank) + " has two trace files (" + kept.path + ", " +
                                 other.path + "); using the first (" +
                                 (kept.records > 0 && other.records == 0 ? "the other recorded no call"
                                                                         : "started first") + ")");
      }
      kept.also.push_back(ClaimText(other));
      for (std::string& a : other.also) kept.also.push_back(std::move(a));
      if (&kept == &v) slot = std::move(v);
    }
    for (const Job::Odd& o : part.odd) flagged.insert({o.comm, o.seq});
    job.odd.insert(job.odd.end(), part.odd.begin(), part.odd.end());
    part.first_sig.resize(job.comms.size());
    job.sig_tables.push_back(std::move(part.first_sig));
  }

  // Workers that saw different first signatures at the same (comm, seq).
  for (size_t w = 1; w < job.sig_tables.size(); ++w) {
    for (size_t c = 0; c < job.comms.size(); ++c) {
      const SigWindow& a = job.sig_tables[0][c];
      job.sig_tables[w][c].ForEach([&](uint64_t seq, const SigWindow::Entry& e) {
        const SigWindow::Entry* other = a.Find(seq);
        if (other && !(other->second == e.second)) flagged.insert({int32_t(c), seq});
      });
    }
  }
  for (const Job::Odd& o : job.odd) job.odd_index[Job::OddKey(o.comm, o.seq, o.rank)] = o.sig;
  job.flagged.assign(flagged.begin(), flagged.end());
  // Ranks the storage had no room for: started, untraced, and said so.
  if (!no_room.empty()) {
    job.warnings.push_back(std::to_string(no_room.size()) + " rank(s) found no room for a trace file (" +
                           no_room.front().path + (no_room.size() > 1 ? ", ..." : "") +
                           "): free room in the trace folder (HANGTRACE_DIR) before the next run");
  }
  for (const NoRoomMarker& m : no_room) {
    RankView& slot = job.ranks[size_t(m.rank)];
    if (!slot.path.empty()) continue;  // a file of the rank after all (a rerun)
    if (!slot.blind.empty()) {
      slot.also.push_back("pid " + std::to_string(m.pid) + " on " + m.host + " (" + m.path + ")");
      continue;
    }
    slot.host = m.host;
    slot.pid = m.pid;
    slot.blind = "not traced (no room in the trace folder for a trace file)";
  }
  load::AddUntracedRanks(dump_folders, &dumps, &job);
  job.warnings.insert(job.warnings.end(), dumps.warnings.begin() + long(dump_warnings_said), dumps.warnings.end());
  NameUnlabeledComms(&job);
  FinishStacks(&job);
  load::DecideRankStates(&job);
  return job;
}

}  // namespace hangtrace
