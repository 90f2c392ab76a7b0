#include "merger/report.h"

#include <unistd.h>

#include <cstdlib>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "merger/node_dump.h"
#include "merger/trace_reader.h"

namespace hangtrace {
namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = char(toupper(c));
  return s;
}

std::string Seconds(double s) {
  char b[32];
  snprintf(b, sizeof(b), "%.1f s", s);
  return b;
}

std::string GroupWhat(const Job& job, const Group& g) {
  switch (g.state) {
    case RankState::kInCall:
      return "in " + DescribeCall(job, g.call) + (g.thread.empty() ? "" : " in thread \"" + g.thread + "\"") +
             (g.call.from_stacks ? " (seen on stacks; not traced)" : "");
    case RankState::kCompute: {
      std::string out = "not in a traced call";
      if (g.outside_s > 0) out += " for " + Seconds(g.outside_s);
      if (g.call.valid) out += " (last: " + DescribeCall(job, g.call) + ")";
      if (g.idle_frame >= 0) out += ", in " + Shortened(job.frames[size_t(g.idle_frame)].Text());
      return out;
    }
    case RankState::kExited: return "exited";
    case RankState::kCrashed: return "crashed";
    case RankState::kGone: return "gone (no exit record)";
    case RankState::kStopped: return "stopped";
    case RankState::kMissing: return "no trace file";
  }
  return "";
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

std::string JsonText(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool ColorWanted(int fd) {
  const char* no_color = getenv("NO_COLOR");
  return isatty(fd) && !(no_color && *no_color);
}

std::string Colorize(const std::string& report) {
  constexpr const char* kRed = "\033[1;31m";
  constexpr const char* kGreen = "\033[1;32m";
  constexpr const char* kYellow = "\033[1;33m";
  constexpr const char* kBold = "\033[1m";
  constexpr const char* kReset = "\033[0m";
  std::string out;
  size_t start = 0;
  bool first = true;
  while (start < report.size()) {
    size_t end = report.find('\n', start);
    if (end == std::string::npos) end = report.size();
    std::string line = report.substr(start, end - start);
    const std::string head = "hangtrace: ";
    if (first && line.rfind(head, 0) == 0) {
      const size_t colon = line.find(':', head.size());
      if (colon != std::string::npos) {
        const std::string word = line.substr(head.size(), colon - head.size());
        line = head + (word == "NO-HANG" ? kGreen : word == "UNKNOWN" ? kYellow : kRed) + word + kReset + line.substr(colon);
      }
    } else if (line.rfind("  culprit rank ", 0) == 0) {
      line = std::string("  ") + kBold + line.substr(2) + kReset;
    }
    first = false;
    out += line;
    if (end < report.size()) out += '\n';
    start = end + 1;
  }
  return out;
}

namespace {
// The verdict's line stays short: what does not fit goes on the next. It is
// cut between clauses, never inside one ("from rank" / "0 tag 1"): at the
// last "; ", else after the last ": ", else before a clause's first word;
// a sentence with none of them stays whole.
std::pair<std::string, std::string> SplitVerdict(const std::string& summary) {
  constexpr size_t kVerdictWidth = 150;
  if (summary.size() <= kVerdictWidth) return {summary, ""};
  struct Cut {
    const char* at;
    size_t kept;     // of `at`, the characters that end line 1
    size_t dropped;  // of `at`, the characters neither line shows
  };
  // A sentence's end first ("... at main (torch_hang.py:61). One look at a
  // running job: ..." breaks there, not inside the second sentence).
  static const Cut kCuts[] = {{". ", 1, 2}, {"; ", 0, 2}, {": ", 1, 2}, {" where ", 0, 1}, {" while ", 0, 1}, {" inside ", 0, 1}};
  for (const Cut& c : kCuts) {
    const size_t at = summary.rfind(c.at, kVerdictWidth);
    if (at != std::string::npos && at >= 40) return {summary.substr(0, at + c.kept), summary.substr(at + c.dropped)};
  }
  return {summary, ""};
}
}  // namespace

namespace {

// The ranks' own processes that are no ranks, alike ones on one line, and
// the main-thread stacks of those of the ranks a person looks at first (a
// culprit, or a rank outside any call: it may wait for them).
std::string ChildrenText(const Job& job, const Diagnosis& d) {
  std::map<std::string, std::pair<RankSet, std::vector<int32_t>>> alike;  // where -> (ranks, pids)
  std::vector<std::string> order;
  const RankSet culprits = CulpritRanks(d);
  std::string stacks;
  size_t shown = 0;
  for (const RankView& v : job.ranks) {
    for (const ChildProcess& c : v.children) {
      const std::string text = DescribeChild(job, c);
      const std::string where = text.substr(text.find(" (") + 1);  // "(python3): at ...", without its pid
      auto [it, added] = alike.try_emplace(where);
      if (added) order.push_back(where);
      it->second.first.Add(v.rank);
      it->second.second.push_back(c.pid);
      if (!ChildrenMayHoldIt(v, culprits) || c.stacks.empty() || shown >= 2) continue;
      ++shown;
      const ThreadStack* main_thread = ThreadOrFirst(c.stacks, c.pid);
      stacks += "  pid " + std::to_string(c.pid) + " of rank " + std::to_string(v.rank) + ", its main thread:\n";
      for (size_t i = 0; i < main_thread->frames.size() && i < 16; ++i) {
        stacks += "    " + Shortened(job.frames[main_thread->frames[i]].Text()) + "\n";
      }
      if (main_thread->frames.size() > 16) stacks += "    ... " + std::to_string(main_thread->frames.size() - 16) + " more\n";
    }
  }
  if (order.empty()) return "";
  std::string out = "\nprocesses of the ranks' own that are no ranks (workers, pools, subprocesses):\n";
  for (size_t i = 0; i < order.size() && i < 20; ++i) {
    const auto& [ranks, pids] = alike[order[i]];
    out += "  " + ranks.Named(24) + ": " +
           (pids.size() == 1 ? "pid " + std::to_string(pids[0]) : std::to_string(pids.size()) + " processes") + " " +
           order[i] + "\n";
  }
  if (order.size() > 20) out += "  ... " + std::to_string(order.size() - 20) + " more (--format json lists all)\n";
  return out + stacks;
}

}  // namespace

std::string TracedLine(const Diagnosis& d) {
  return std::to_string(d.with_trace.Count()) + " of " + std::to_string(d.world_size) + " ranks traced" +
         (d.from_stacks.Empty() ? ""
                                 : (d.from_stacks.Count() == 1 ? "; rank " : "; ranks ") + d.from_stacks.Brief() +
                                       " from " + (d.from_stacks.Count() == 1 ? "its stacks" : "their stacks") +
                                       " only (untraced)") +
         (d.missing.Empty() ? "" : "; no trace file for ranks " + d.missing.ToString());
}

std::vector<ClassLine> ClassLines(const Job& job, const Diagnosis& d) {
  std::vector<ClassLine> lines;
  std::map<std::tuple<int, uint16_t, std::string, uint64_t, int64_t, int>, size_t> line_of;
  for (size_t gi = 0; gi < d.groups.size(); ++gi) {
    const Group& g = d.groups[gi];
    std::string family = g.call.comm >= 0 ? job.comms[size_t(g.call.comm)].family : "";
    bool p2p = g.call.call_flags & fmt::kCallP2p;
    auto key = std::make_tuple(int(g.state), g.state == RankState::kInCall ? g.call.name : uint16_t(0),
                               g.state == RankState::kInCall && !p2p ? family : std::to_string(lines.size()),
                               g.state == RankState::kInCall ? g.call.seq : 0, PlaceKey(job, g.user_frame), int(g.basis));
    auto [it, inserted] = line_of.emplace(key, lines.size());
    if (inserted) lines.emplace_back();
    ClassLine& l = lines[it->second];
    l.user_frame = l.groups.empty() || l.user_frame == g.user_frame ? g.user_frame : -1;  // the same for all, or none
    l.groups.push_back(gi);
    l.ranks.Merge(g.ranks);
    l.waiting.Merge(g.waiting_for);
    if (g.call.comm >= 0) l.comms.insert(job.comms[size_t(g.call.comm)].label);
    l.in_call_s = std::max(l.in_call_s, g.in_call_s);
    for (const std::string& h : g.hosts) {
      if (l.hosts.size() < 8 && std::find(l.hosts.begin(), l.hosts.end(), h) == l.hosts.end()) l.hosts.push_back(h);
    }
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const ClassLine& a, const ClassLine& b) { return a.ranks.Count() > b.ranks.Count(); });
  for (ClassLine& l : lines) {
    const Group& g = d.groups[l.groups.front()];
    l.what = GroupWhat(job, g);
    if (d.basis == "stacks" && g.state == RankState::kCompute) {
      l.what = g.basis == Basis::kStacks ? "in no communication call"
               : g.main_stack_unread     ? "not in a traced call; its main thread's stack not read"
                                         : "not in a traced call; no stacks";
      if (g.idle_frame >= 0 && g.basis == Basis::kStacks) l.what += ", in " + Shortened(job.frames[size_t(g.idle_frame)].Text());
    } else if (d.basis == "stacks" && g.state == RankState::kInCall) {
      l.what = "in " + job.names[g.call.name];
    }
    if (l.comms.size() > 1) {
      const std::string& fam = job.comms[size_t(g.call.comm)].family;
      // An unnamed family (siblings of one split) has no name to show.
      const std::string kind = fam.rfind("made with ", 0) == 0 ? "sibling" : fam;
      l.what = "in " + job.names[g.call.name] + " #" + std::to_string(g.call.seq) + " on " +
               std::to_string(l.comms.size()) + " " + kind + " comms (" + *l.comms.begin() + ", ...)";
    }
  }
  return lines;
}

std::string TextReport(const Job& job, const Diagnosis& d) {
  std::string out;
  // The first lines: verdict, culprits, coverage.
  const auto [verdict, rest] = SplitVerdict(d.summary);
  out += "hangtrace: " + Upper(VerdictName(d.verdict)) + ": " + verdict + "\n";
  if (!rest.empty()) out += "  " + rest + "\n";
  for (size_t i = 0; i < d.culprits.size() && i < 3; ++i) {
    const Culprit& c = d.culprits[i];
    out += "  culprit rank " + std::to_string(c.rank) + (c.host.empty() ? "" : " (" + c.host + ", pid " + std::to_string(c.pid) + ")") +
           ": " + c.why + "\n";
  }
  if (d.culprits.size() > 3) out += "  ... and " + std::to_string(d.culprits.size() - 3) + " more culprits (below)\n";
  for (const std::string& n : d.notes) out += "  " + n + "\n";
  out += "  " + TracedLine(d) + "\n";

  const std::vector<ClassLine> lines = ClassLines(job, d);
  out += "\nclasses (biggest first):\n";
  for (size_t i = 0; i < lines.size() && i < 40; ++i) {
    const ClassLine& l = lines[i];
    const Group& g = d.groups[l.groups.front()];
    char head[96];
    snprintf(head, sizeof(head), "  %-24s %6zu  ", l.ranks.Named(18).c_str(), l.ranks.Count());
    out += head + l.what;
    if (l.user_frame >= 0) out += " at " + job.frames[size_t(l.user_frame)].Text();
    if (g.state == RankState::kInCall && g.basis == Basis::kTrace) out += ", for " + Seconds(l.in_call_s);
    if (!l.waiting.Empty()) out += ", waiting for " + l.waiting.Brief(24);
    if (!l.hosts.empty()) out += "  [" + Join(l.hosts, ",") + (l.hosts.size() >= 8 ? ",..." : "") + "]";
    out += "\n";
  }
  if (lines.size() > 40) out += "  ... " + std::to_string(lines.size() - 40) + " more classes (--format json lists all)\n";
  if (d.culprits.size() > 3) {
    out += "\nculprits:\n";
    for (const Culprit& c : d.culprits) out += "  rank " + std::to_string(c.rank) + ": " + c.why + "\n";
  }
  if (!d.mismatches.empty()) {
    out += "\nmismatches (same communicator and sequence number, different arguments):\n";
    for (const Mismatch& m : d.mismatches) {
      out += "  #" + std::to_string(m.seq) + " on " + job.comms[size_t(m.comm)].label + ", " + m.field + ":";
      for (const auto& [value, ranks] : m.values) out += " " + value + " by " + ranks.ToString() + ";";
      out += (m.tie ? " a tie, each side named: " : " odd: ") + m.odd.ToString() + "\n";
    }
  }
  if (!d.cycles.empty()) {
    out += "\ncycles of waits:\n";
    for (const auto& c : d.cycles) out += "  " + Join(c, " -> ") + "\n";
  }
  if (d.compared) {
    out += "\nprogress since the earlier snapshot: " +
           (d.progressing.Empty() ? std::string("no rank moved") : d.progressing.Named() + " moved") + "\n";
  }
  std::vector<std::string> pending;
  for (const RankView& v : job.ranks) {
    for (const CallPoint& p : v.pending) {
      if (pending.size() < 10) pending.push_back("rank " + std::to_string(v.rank) + ": " + DescribeCall(job, p));
    }
  }
  if (!pending.empty()) {
    // Of a job still running, only "not yet": posted and not waited on when read.
    out += std::string(d.ended ? "\nnonblocking calls never completed:\n  " : "\nnonblocking calls not completed when read:\n  ") +
           Join(pending, "\n  ") + "\n";
  }
  out += ChildrenText(job, d);
  if (HasStacks(job)) {
    out += "\nstacks, merged (ranks per frame):\n" + StackTreeText(MergeStacks(job));
    out += UnreadStacksText(UnreadNativeStacks(job));
  }
  out += "\nread " + std::to_string(job.files) + " trace files, " + std::to_string(job.records) + " records\n";
  if (!job.warnings.empty()) {
    out += "\nwarnings:\n";
    for (size_t i = 0; i < job.warnings.size() && i < 20; ++i) out += "  " + job.warnings[i] + "\n";
    if (job.warnings.size() > 20) out += "  ... " + std::to_string(job.warnings.size() - 20) + " more\n";
  }
  return out;
}

nlohmann::json JsonReport(const Job& job, const Diagnosis& d) {
  using nlohmann::json;
  json j;
  j["schema"] = "hangtrace.analysis/1";
  j["world_size"] = d.world_size;
  j["ranks_with_trace"] = d.with_trace.ToString();
  j["ranks_with_trace_list"] = d.with_trace.Ranks();
  j["ranks_missing"] = d.missing.ToString();
  j["ranks_missing_list"] = d.missing.Ranks();
  j["verdict"] = VerdictName(d.verdict);
  j["basis"] = d.basis;
  j["ranks_from_stacks"] = d.from_stacks.ToString();
  j["ranks_from_stacks_list"] = d.from_stacks.Ranks();
  j["summary"] = d.summary;
  j["culprits"] = json::array();
  for (const Culprit& c : d.culprits) j["culprits"].push_back({{"rank", c.rank}, {"host", c.host}, {"pid", c.pid}, {"why", c.why}});
  j["groups"] = json::array();
  for (const Group& g : d.groups) {
    json o = {{"ranks", g.ranks.ToString()}, {"rank_list", g.ranks.Ranks()}, {"count", g.ranks.Count()},
              {"state", RankStateName(g.state)}, {"basis", BasisName(g.basis)}};
    const CallPoint& c = g.call;
    if (c.valid) {
      o["api"] = job.names[c.name];
      o["op"] = g.state == RankState::kInCall ? fmt::OpName(c.op) : "compute";
      o["comm"] = c.comm >= 0 ? job.comms[size_t(c.comm)].label : "";
      o["seq"] = c.seq;
    } else {
      o["api"] = "";
      o["op"] = g.state == RankState::kInCall ? "none" : "compute";
      o["comm"] = "";
      o["seq"] = 0;
    }
    o["in_call_s"] = g.state == RankState::kInCall ? g.in_call_s : 0.0;
    if (!g.thread.empty()) o["thread"] = g.thread;
    if (g.state == RankState::kCompute && g.outside_s > 0) o["outside_s"] = g.outside_s;
    if (g.idle_frame >= 0) o["idle_frame"] = FrameToJson(job.frames[size_t(g.idle_frame)]);
    if (g.state == RankState::kInCall && g.call.on_device) o["on_device"] = true;
    if (g.call.kernel >= 0) o["kernel"] = job.names[size_t(g.call.kernel)];
    o["waiting_for"] = g.waiting_for.ToString();
    o["waiting_for_list"] = g.waiting_for.Ranks();
    o["hosts"] = g.hosts;
    if (g.user_frame >= 0) {
      const Frame& f = job.frames[size_t(g.user_frame)];
      o["user_frame"] = FrameToJson(f);
      if (f.lang == Frame::Lang::kPython) o["python"] = FrameToJson(f);
    }
    j["groups"].push_back(o);
  }
  j["mismatches"] = json::array();
  for (const Mismatch& m : d.mismatches) {
    json values = json::object();
    for (const auto& [value, ranks] : m.values) values[value] = ranks.ToString();
    j["mismatches"].push_back({{"comm", job.comms[size_t(m.comm)].label}, {"seq", m.seq}, {"field", m.field},
                               {"values", values}, {"odd", m.odd.ToString()}, {"odd_list", m.odd.Ranks()},
                               {"tie", m.tie}, {"untraced", m.untraced.ToString()}});
  }
  j["cycles"] = d.cycles;
  j["cycle_ranks"] = d.cycle_ranks;
  j["progressing"] = d.progressing.ToString();
  j["progressing_list"] = d.progressing.Ranks();
  j["notes"] = d.notes;
  j["warnings"] = job.warnings;
  // Distinct stacks (innermost frame first), each with the ranks that have
  // it: the merged view without the tree.
  std::map<std::vector<uint32_t>, RankSet> distinct;
  for (const RankView& v : job.ranks) {
    for (const ThreadStack& t : v.stacks) {
      if (!t.frames.empty()) distinct[t.frames].Add(v.rank);
    }
  }
  // In the order of their lowest rank: frame ids follow the order the
  // reader threads met them in, which differs from run to run.
  struct Distinct {
    int32_t lowest;
    size_t count;
    std::string text;  // the frames as read: ties of one rank's threads
    const std::pair<const std::vector<uint32_t>, RankSet>* entry;
  };
  std::vector<Distinct> order;
  for (const auto& entry : distinct) {
    std::string text;
    for (uint32_t id : entry.first) text += job.frames[id].Text() + "\n";
    order.push_back({entry.second.Ranks().front(), entry.second.Count(), text, &entry});
  }
  std::sort(order.begin(), order.end(), [](const Distinct& a, const Distinct& b) {
    return std::tie(a.lowest, b.count, a.text) < std::tie(b.lowest, a.count, b.text);
  });
  j["children"] = json::array();
  const RankSet culprits = CulpritRanks(d);
  for (const RankView& v : job.ranks) {
    // Stacks for the children of the ranks that may wait for them; where
    // the others are, in a line each (a job of thousands of ranks has
    // thousands of DataLoader workers).
    const bool look = ChildrenMayHoldIt(v, culprits);
    for (const ChildProcess& c : v.children) {
      json o = {{"rank", v.rank}, {"pid", c.pid}, {"name", c.name}, {"cmdline", c.cmdline}, {"state", c.state},
                {"where", DescribeChild(job, c)}, {"call", c.call}};
      if (c.user_frame >= 0) o["user_frame"] = FrameToJson(job.frames[size_t(c.user_frame)]);
      o["threads"] = json::array();
      for (const ThreadStack& t : c.stacks) {
        if (!look) break;
        json fs = json::array();
        for (uint32_t id : t.frames) fs.push_back(FrameToJson(job.frames[id]));
        o["threads"].push_back({{"tid", t.tid}, {"name", t.name}, {"frames", fs}});
      }
      j["children"].push_back(std::move(o));
    }
  }
  j["stacks"] = json::array();
  for (const Distinct& d : order) {
    const auto& [frames, ranks] = *d.entry;
    json fs = json::array();
    for (uint32_t id : frames) fs.push_back(FrameToJson(job.frames[id]));
    j["stacks"].push_back({{"ranks", ranks.ToString()}, {"rank_list", ranks.Ranks()}, {"count", ranks.Count()}, {"frames", fs}});
  }
  return j;
}

bool HasStacks(const Job& job) {
  for (const RankView& v : job.ranks) {
    if (!v.stacks.empty()) return true;
  }
  return false;
}

StackNode MergeStacks(const Job& job) {
  StackNode root;
  root.frame = "all";
  // Frames merge by what a person reads (function, file and line), not by
  // address: the same line in two builds is one node.
  std::vector<std::string> text(job.frames.size());
  for (size_t i = 0; i < job.frames.size(); ++i) text[i] = job.frames[i].Text();
  for (const RankView& v : job.ranks) {
    for (const ThreadStack& t : v.stacks) {
      const auto& frames = t.frames;
      root.ranks.Add(v.rank);
      StackNode* node = &root;
      for (auto it = frames.rbegin(); it != frames.rend(); ++it) {  // outermost first
        auto child = std::find_if(node->children.begin(), node->children.end(),
                                  [&](const StackNode& c) { return c.frame == text[*it]; });
        if (child == node->children.end()) {
          node->children.push_back(StackNode{text[*it], *it, {}, {}});
          child = node->children.end() - 1;
        }
        child->ranks.Add(v.rank);
        node = &*child;
      }
    }
  }
  return root;
}

std::vector<UnreadStacks> UnreadNativeStacks(const Job& job) {
  std::vector<UnreadStacks> out;
  for (const RankView& v : job.ranks) {
    for (const ThreadStack& t : v.stacks) {
      if (t.not_read.empty()) continue;
      auto it = std::find_if(out.begin(), out.end(), [&](const UnreadStacks& u) { return u.why == t.not_read; });
      if (it == out.end()) {
        out.push_back(UnreadStacks{t.not_read, {}, {}, 0});
        it = out.end() - 1;
      }
      if (t.tid == uint32_t(v.pid)) {
        it->main_thread.Add(v.rank);
      } else {
        it->other_ranks.Add(v.rank);
        ++it->other_threads;
      }
    }
  }
  return out;
}

std::string UnreadStacksText(const std::vector<UnreadStacks>& unread) {
  if (unread.empty()) return "";
  std::string out = "\nnative stacks not read (shown above with their Python frames at most):\n";
  auto ranks = [](const RankSet& r) { return (r.Count() == 1 ? "rank " : "ranks ") + r.ToString(); };
  for (const UnreadStacks& u : unread) {
    if (!u.main_thread.Empty()) out += "  " + ranks(u.main_thread) + ", main thread: " + u.why + "\n";
    if (u.other_threads) {
      out += "  " + ranks(u.other_ranks) + ", " + std::to_string(u.other_threads) +
             (u.other_threads == 1 ? " other thread: " : " other threads: ") + u.why + "\n";
    }
  }
  return out;
}

std::string StackTreeText(const StackNode& root, size_t max_lines) {
  std::string out;
  size_t lines = 0;
  std::function<void(const StackNode&, const std::string&)> walk = [&](const StackNode& n, const std::string& indent) {
    std::vector<const StackNode*> kids;
    for (const StackNode& c : n.children) kids.push_back(&c);
    std::stable_sort(kids.begin(), kids.end(), [](auto* a, auto* b) { return a->ranks.Count() > b->ranks.Count(); });
    // A chain with a single child collapses into one line per frame; a
    // fork in the tree is where ranks part ways.
    for (const StackNode* c : kids) {
      if (++lines > max_lines) return;
      std::string set = c->ranks.ToString();
      if (set.size() > 40) set = std::to_string(c->ranks.Count()) + " ranks, e.g. " + std::to_string(c->ranks.First());
      out += indent + Shortened(c->frame) + "  [" + set + "]\n";
      walk(*c, indent + (kids.size() > 1 ? "| " : "  "));
    }
  };
  walk(root, "  ");
  if (lines > max_lines) out += "  ... (tree cut at " + std::to_string(max_lines) + " lines; the DOT file has it all)\n";
  return out;
}

}  // namespace hangtrace
