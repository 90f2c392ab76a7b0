#include "merger/pictures.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "merger/trace_reader.h"

namespace hangtrace {
namespace {

// A string as a DOT quoted string's contents.
std::string Esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

std::string Seconds(double s) {
  char b[32];
  snprintf(b, sizeof(b), "%.1f s", s);
  return b;
}

}  // namespace

std::string ClassText(const Job& job, const Diagnosis& d, const ClassLine& l) {
  const Group& g = d.groups[l.groups.front()];
  std::string out = l.ranks.Named(24) + " (" + std::to_string(l.ranks.Count()) + ")\n";
  switch (g.state) {
    case RankState::kInCall:
      if (l.comms.size() > 1) out += l.what.substr(l.what.rfind("in ", 0) == 0 ? 3 : 0);
      else out += (g.call.from_stacks ? job.names[g.call.name] + " (stacks)" : DescribeCall(job, g.call));
      if (l.in_call_s > 0) out += "\nfor " + Seconds(l.in_call_s);
      break;
    case RankState::kCompute:
      out += "in no traced call";
      if (g.outside_s > 0) out += " for " + Seconds(g.outside_s);
      if (g.idle_frame >= 0) out += "\nin " + Shortened(job.frames[size_t(g.idle_frame)].Text());
      break;
    default: out += RankStateName(g.state); break;
  }
  if (l.user_frame >= 0) out += "\nat " + Shortened(job.frames[size_t(l.user_frame)].Text());
  return out;
}

ClassWaits WaitsBetweenClasses(const Job& job, const Diagnosis& d) {
  constexpr size_t kMostClasses = 200;
  ClassWaits w;
  w.culprits = CulpritRanks(d);
  w.classes = ClassLines(job, d);
  std::vector<int> class_of(size_t(std::max(job.world_size, 0)), -1);
  w.shown = std::min(w.classes.size(), kMostClasses);
  for (size_t i = 0; i < w.shown; ++i) {
    for (int32_t r : w.classes[i].ranks.Ranks()) {
      if (r >= 0 && size_t(r) < class_of.size()) class_of[size_t(r)] = int(i);
    }
  }
  // The edges of each cycle, as (from class, to class).
  std::set<std::pair<int, int>> cyclic;
  for (const auto& cycle : d.cycle_ranks) {
    for (size_t i = 0; i < cycle.size() && cycle.size() > 1; ++i) {
      const int32_t a = cycle[i], b = cycle[(i + 1) % cycle.size()];
      if (a >= 0 && b >= 0 && size_t(a) < class_of.size() && size_t(b) < class_of.size()) {
        cyclic.insert({class_of[size_t(a)], class_of[size_t(b)]});
      }
    }
  }
  // A class waits for the classes that hold the ranks it waits for.
  for (size_t i = 0; i < w.shown; ++i) {
    const ClassLine& l = w.classes[i];
    if (l.waiting.Empty()) continue;
    std::map<int, RankSet> targets;  // class -> the ranks of it waited for
    for (int32_t r : l.waiting.Ranks()) {
      targets[r >= 0 && size_t(r) < class_of.size() ? class_of[size_t(r)] : -1].Add(r);
    }
    for (auto& [to, ranks] : targets) {
      ClassWaits::Edge e;
      e.from = int(i), e.to = to;
      e.cycle = cyclic.count({int(i), to}) > 0;
      e.into_culprit = ranks.Intersects(w.culprits);
      e.ranks = std::move(ranks);
      w.edges.push_back(std::move(e));
    }
  }
  return w;
}

std::string WaitGraphDot(const Job& job, const Diagnosis& d) {
  const ClassWaits w = WaitsBetweenClasses(job, d);
  const RankSet& culprits = w.culprits;
  std::string out =
      "digraph waits {\n"
      "  rankdir=LR;\n"
      "  labelloc=t;\n"
      "  label=\"" + Esc(std::string(VerdictName(d.verdict)) + ": " + d.summary) + "\";\n"
      "  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\", fontsize=11];\n"
      "  edge [fontname=\"Helvetica\", fontsize=10, color=gray40];\n";
  for (size_t i = 0; i < w.shown; ++i) {
    const ClassLine& l = w.classes[i];
    const Group& g = d.groups[l.groups.front()];
    std::string attrs;
    if (l.ranks.Intersects(culprits)) attrs = ", color=red, penwidth=2.5, fillcolor=\"#ffe4e1\"";
    else if (g.state == RankState::kMissing) attrs = ", style=\"rounded,dashed\"";
    else if (g.state == RankState::kInCall && g.basis == Basis::kStacks) attrs = ", fillcolor=\"#f2f2f2\"";
    std::string text = ClassText(job, d, l);
    const RankSet mine = w.CulpritsOf(i);
    if (!mine.Empty()) text += "\nculprit: " + mine.Named(24);
    out += "  c" + std::to_string(i) + " [label=\"" + Esc(text) + "\"" + attrs + "];\n";
  }
  if (w.classes.size() > w.shown) {
    out += "  more [label=\"" + std::to_string(w.classes.size() - w.shown) + " more classes\", style=dashed];\n";
  }
  bool unseen = false;
  for (const ClassWaits::Edge& e : w.edges) {
    if (e.to < 0) {
      unseen = true;
      out += "  c" + std::to_string(e.from) + " -> unseen [label=\"" + Esc("waits for " + e.ranks.Brief(16)) +
             "\", style=dashed];\n";
      continue;
    }
    // Red: an edge of a cycle, or into a culprit.
    out += "  c" + std::to_string(e.from) + " -> c" + std::to_string(e.to) + " [label=\"" +
           Esc("waits for " + e.ranks.Brief(16)) + "\"" + (e.cycle || e.into_culprit ? ", color=red, penwidth=2" : "") +
           "];\n";
  }
  if (unseen) out += "  unseen [label=\"not shown, or no trace file\", style=\"rounded,dashed\"];\n";
  return out + "}\n";
}

namespace {

// Threads every rank has that say nothing of the hang: hangtrace's own,
// MPI's and PMIx's progress threads (libevent's loop), gloo's transport
// loop, an idle c10d worker. Their subtrees are folded into one node.
bool IsServiceFrame(const Frame& f, const StackNode& n) {
  const std::string name = f.func.substr(0, f.func.find('('));
  // hangtrace's own thread (its wrappers, MPI_* in libhangtrace.so, are
  // the program's calls and stay).
  if (name.rfind("hangtrace::", 0) == 0) return true;
  if (name == "event_base_loop" || name == "gloo::transport::tcp::Loop::run") return true;
  // A c10d worker waiting for work (its only child a condition wait).
  if (name == "c10d::ProcessGroupGloo::runLoop" && n.children.size() == 1 &&
      n.children[0].frame.rfind("pthread_cond_wait", 0) == 0) {
    return true;
  }
  return false;
}

// Whether `n`, or the chain of single children below it (a frame or two
// of a library without symbols first), leads into a service loop: the
// subtree is folded at `n`.
bool LeadsToService(const Job& job, const StackNode& n, int depth) {
  if (n.frame_id >= job.frames.size()) return false;
  if (IsServiceFrame(job.frames[n.frame_id], n)) return true;
  return depth > 0 && n.children.size() == 1 && LeadsToService(job, n.children[0], depth - 1);
}

}  // namespace

bool IsServiceSubtree(const Job& job, const StackNode& n) { return LeadsToService(job, n, 2); }

RankSet ClassWaits::CulpritsOf(size_t i) const {
  RankSet mine;
  for (int32_t r : culprits.Ranks()) {
    if (classes[i].ranks.Contains(r)) mine.Add(r);
  }
  return mine;
}

std::string StackTreeDot(const Job& job, const Diagnosis& d, const StackNode& root) {
  const RankSet culprits = CulpritRanks(d);
  std::string out =
      "digraph stacks {\n"
      "  node [shape=box, style=filled, fillcolor=white, fontname=monospace, fontsize=10];\n"
      "  edge [color=gray50];\n"
      "  legend [shape=note, fillcolor=\"#fffbe6\", label=\"native frame: white; Python frame: blue\\n"
      "red: holds a culprit; bold: ranks part ways here\\ngray: service threads, folded\"];\n";
  int next = 0;
  std::function<int(const StackNode&)> walk = [&](const StackNode& n) {
    const int id = next++;
    const Frame* f = &n != &root && n.frame_id < job.frames.size() ? &job.frames[n.frame_id] : nullptr;
    std::string label = Shortened(n.frame) + "\n[" + n.ranks.Brief(40) + "] (" + std::to_string(n.ranks.Count()) + ")";
    std::string attrs;
    if (f && f->lang == Frame::Lang::kPython) attrs += ", fillcolor=\"#dde8ff\"";
    // A branch some ranks took and not all: red when it holds a culprit.
    if (&n != &root && n.ranks.Intersects(culprits) && n.ranks.Count() < root.ranks.Count()) {
      attrs += ", color=red, fontcolor=red3";
    }
    if (n.children.size() > 1) attrs += ", penwidth=2.5";
    const bool fold = f && IsServiceSubtree(job, n);
    if (fold) {
      size_t below = 0;
      std::function<void(const StackNode&)> count = [&](const StackNode& c) {
        below += c.children.size();
        for (const StackNode& k : c.children) count(k);
      };
      count(n);
      label += "\n(service thread: " + std::to_string(below) + " frames folded)";
      attrs += ", fillcolor=gray90, fontcolor=gray30";
    }
    out += "  n" + std::to_string(id) + " [label=\"" + Esc(label) + "\"" + attrs + "];\n";
    if (fold) return id;
    for (const StackNode& c : n.children) {
      const int cid = walk(c);
      out += "  n" + std::to_string(id) + " -> n" + std::to_string(cid) + " [label=\"" +
             std::to_string(c.ranks.Count()) + "\"];\n";
    }
    return id;
  };
  walk(root);
  return out + "}\n";
}

bool WritePerfetto(const Job& job, const Diagnosis& d, const std::string& out_path, std::string* error) {
  std::ofstream out(out_path);
  if (!out) {
    *error = "cannot write " + out_path;
    return false;
  }
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const nlohmann::json& e) {
    out << (first ? "" : ",\n") << JsonText(e);
    first = false;
  };
  // Where each rank's open call sits on its timeline: the flows' ends.
  struct Open {
    int64_t pid = -1;
    uint32_t tid = 0;
    double ts = 0;
  };
  std::vector<Open> open(size_t(std::max(job.world_size, 0)));
  for (const RankView& v : job.ranks) {
    if (v.path.empty() || v.from_stacks) continue;
    std::string err;
    auto s = ReadTraceFile(v.path, &err);
    if (!s) continue;
    const int64_t pid = s->process.rank >= 0 ? s->process.rank : 100000 + s->process.pid;
    emit({{"ph", "M"}, {"name", "process_name"}, {"pid", pid},
          {"args", {{"name", "rank " + std::to_string(s->process.rank) + " (" + s->process.host + ", pid " +
                                 std::to_string(s->process.pid) + ")"}}}});
    emit({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
    for (const ThreadInfo& t : s->threads) {
      emit({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", t.tid},
            {"args", {{"name", t.name.empty() ? "thread " + std::to_string(t.tid) : t.name}}}});
    }
    emit({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "nonblocking requests"}}}});
    const double end_us = double(s->LastKnownMonoNs() - s->process.clock.ref_mono_ns + s->process.clock.ref_real_ns) / 1e3;
    auto us = [&](uint64_t ticks) { return double(s->TicksToRealNs(ticks)) / 1e3; };
    auto name_of = [&](const fmt::Record& r) {
      std::string n = s->CallName(r.call);
      if (r.seq) n += " #" + std::to_string(r.seq);
      if (r.comm != fmt::kNoComm) n += " " + s->CommLabel(r.comm);
      return n;
    };
    std::map<uint64_t, fmt::Record> begins;  // by tid for blocking calls; by handle for nonblocking
    for (const Event& e : s->events) {
      const fmt::Record& r = e.rec;
      const CallDesc* c = s->Call(r.call);
      bool nonblocking = c && (c->flags & fmt::kCallNonblocking);
      uint64_t key = nonblocking ? (r.handle | (1ull << 63)) : r.tid;
      if (r.kind == uint8_t(fmt::EventKind::kBegin)) {
        begins[key] = r;
      } else if (r.kind == uint8_t(fmt::EventKind::kEnd)) {
        auto it = begins.find(key);
        if (it == begins.end()) continue;
        double ts = us(it->second.ticks);
        emit({{"ph", "X"}, {"pid", pid}, {"tid", nonblocking ? 0 : r.tid}, {"ts", ts}, {"dur", std::max(0.0, us(r.ticks) - ts)},
              {"name", name_of(r)}, {"cat", c ? fmt::OpName(c->op) : "call"},
              {"args", {{"count", r.count}, {"peer", r.peer}, {"result", r.result}}}});
        begins.erase(it);
      } else if (r.kind == uint8_t(fmt::EventKind::kWatchdog)) {
        emit({{"ph", "i"}, {"pid", pid}, {"tid", r.tid}, {"ts", us(r.ticks)}, {"s", "t"}, {"name", "watchdog: " + name_of(r)}});
      }
    }
    // In flight at the end: a slice open to the last moment the file knows.
    for (const auto& [key, r] : begins) {
      double ts = us(r.ticks);
      const CallDesc* c = s->Call(r.call);
      bool nonblocking = c && (c->flags & fmt::kCallNonblocking);
      emit({{"ph", "X"}, {"pid", pid}, {"tid", nonblocking ? 0 : r.tid}, {"ts", ts}, {"dur", std::max(0.0, end_us - ts)},
            {"name", name_of(r) + " (in flight)"}, {"cat", "in_flight"}});
      if (!nonblocking && v.rank >= 0 && size_t(v.rank) < open.size() && r.tid == v.call_tid &&
          r.ticks == v.current.ticks) {
        open[size_t(v.rank)] = {pid, r.tid, ts};
      }
    }
  }
  // Who waits for whom: a flow from each waiting call to the call (or the
  // timeline) of a rank it waits for. A class waiting for many ranks draws
  // its first few; the report lists them all.
  constexpr size_t kFlowsPerClass = 8;
  uint64_t flow = 1;
  for (const Group& g : d.groups) {
    if (g.state != RankState::kInCall || g.waiting_for.Empty()) continue;
    size_t drawn = 0;
    for (int32_t from : g.ranks.Ranks()) {
      if (size_t(from) >= open.size() || open[size_t(from)].pid < 0) continue;
      for (int32_t to : g.waiting_for.Ranks()) {
        if (size_t(to) >= open.size() || drawn >= kFlowsPerClass) break;
        const Open& a = open[size_t(from)];
        const Open& b = open[size_t(to)];
        if (b.pid < 0) continue;  // not in a call: nothing to point at
        emit({{"ph", "s"}, {"id", flow}, {"pid", a.pid}, {"tid", a.tid}, {"ts", a.ts}, {"name", "waits for"},
              {"cat", "wait"}});
        // The arrow never runs back in time: it ends inside the target's
        // open slice, no earlier than it starts.
        emit({{"ph", "f"}, {"bp", "e"}, {"id", flow}, {"pid", b.pid}, {"tid", b.tid}, {"ts", std::max(a.ts, b.ts)},
              {"name", "waits for"}, {"cat", "wait"}});
        ++flow;
        ++drawn;
      }
      if (drawn >= kFlowsPerClass) break;
    }
  }
  out << "\n]}\n";
  if (!out) {
    *error = "error writing " + out_path;
    return false;
  }
  return true;
}

bool RenderSvg(const std::string& dot_text, int svg_fd, std::string* error) {
  if (system("command -v dot > /dev/null 2>&1") != 0) {
    *error = "Graphviz is not installed (apt-get install graphviz)";
    return false;
  }
  // The DOT text from memory (no file to name, so none to be planted).
  int in = memfd_create("hangtrace-dot", MFD_CLOEXEC);
  if (in < 0 || write(in, dot_text.data(), dot_text.size()) != ssize_t(dot_text.size()) || lseek(in, 0, SEEK_SET) != 0) {
    *error = std::string("cannot hand the graph to dot: ") + strerror(errno);
    if (in >= 0) close(in);
    return false;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in, STDIN_FILENO);
    dup2(svg_fd, STDOUT_FILENO);
    execlp("dot", "dot", "-Tsvg", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in);
  int status = 0;
  const bool ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok) *error = "dot could not render the graph";
  return ok;
}

}  // namespace hangtrace
