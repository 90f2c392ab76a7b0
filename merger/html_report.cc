#include "merger/html_report.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <map>
#include <set>

#include "merger/pictures.h"
#include "merger/report.h"
#include "merger/trace_reader.h"

namespace hangtrace {
namespace {

// The page's template (merger/report_page.html), made a string at build time.
const char kPage[] =
#include "merger/report_page.inc"
    ;

// What a page at 16,384 ranks may hold: the tree's nodes, the ranks whose
// last calls are in it, the calls kept per communicator and rank.
constexpr size_t kMostTreeNodes = 4000;
constexpr size_t kMostCulpritsDetailed = 64;
constexpr size_t kMostClassesDetailed = 200;
constexpr int32_t kEveryRankUpTo = 64;  // a job this small: every rank's calls
constexpr size_t kCallsPerComm = 8;
constexpr size_t kCommsPerRank = 12;

std::string HtmlEscaped(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// The JSON report without what the page does not draw: the per-rank lists
// (the range strings say the same, at a fraction of the size) and the raw
// stacks (the merged tree below holds them).
void DropListsAndStacks(nlohmann::json* j) {
  if (j->is_object()) {
    for (auto it = j->begin(); it != j->end();) {
      const std::string& k = it.key();
      if ((k.size() > 5 && k.compare(k.size() - 5, 5, "_list") == 0) || k == "stacks") {
        it = j->erase(it);
      } else {
        DropListsAndStacks(&it.value());
        ++it;
      }
    }
  } else if (j->is_array()) {
    for (auto& e : *j) DropListsAndStacks(&e);
  }
}

nlohmann::json TreeJson(const Job& job, const StackNode& n, bool root, size_t* budget) {
  nlohmann::json o = {{"f", root ? "all threads" : Shortened(n.frame)}, {"r", n.ranks.ToString()}, {"n", n.ranks.Count()}};
  if (!root && n.frame_id < job.frames.size()) {
    const Frame& f = job.frames[n.frame_id];
    o["o"] = FrameOwnerName(job.owners.Of(f));
    o["l"] = f.LangName();
    if (IsServiceSubtree(job, n)) {
      o["s"] = true;  // a service thread: folded, its frames left out
      return o;
    }
  }
  nlohmann::json kids = nlohmann::json::array();
  size_t left_out = 0;
  for (const StackNode& c : n.children) {
    if (*budget == 0) {
      ++left_out;
      continue;
    }
    --*budget;
    kids.push_back(TreeJson(job, c, false, budget));
  }
  if (!kids.empty()) o["c"] = std::move(kids);
  if (left_out) o["more"] = left_out;
  return o;
}

// The classes (folded as the text report folds them) and who waits for
// whom among them: the page's table and graph.
nlohmann::json ClassesJson(const Job& job, const Diagnosis& d, const ClassWaits& w) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < w.classes.size(); ++i) {
    const ClassLine& l = w.classes[i];
    const Group& g = d.groups[l.groups.front()];
    nlohmann::json o = {{"ranks", l.ranks.ToString()}, {"brief", l.ranks.Brief(40)}, {"count", l.ranks.Count()},
                        {"state", RankStateName(g.state)}, {"basis", BasisName(g.basis)}, {"what", l.what},
                        {"waiting_for", l.waiting.Brief(40)}, {"hosts", l.hosts},
                        {"culprits", w.culprits.Empty() ? "" : w.CulpritsOf(i).ToString()}};
    if (g.state == RankState::kInCall && g.in_call_s > 0) o["for_s"] = l.in_call_s;
    if (g.state == RankState::kCompute && g.outside_s > 0) o["for_s"] = g.outside_s;
    if (l.user_frame >= 0) o["place"] = Shortened(job.frames[size_t(l.user_frame)].Text());
    if (i < w.shown) o["label"] = ClassText(job, d, l);
    out.push_back(std::move(o));
  }
  return out;
}

nlohmann::json EdgesJson(const ClassWaits& w) {
  nlohmann::json edges = nlohmann::json::array();
  for (const ClassWaits::Edge& e : w.edges) {
    edges.push_back({{"from", e.from}, {"to", e.to}, {"ranks", e.ranks.Brief(16)}, {"red", e.cycle || e.into_culprit},
                     {"cycle", e.cycle}});
  }
  return edges;
}

// How a rank's process ended, or that it runs: what its file and /proc say.
std::string HowItEnded(const RankView& v) {
  if (v.state == RankState::kMissing) return v.from_stacks ? "untraced, seen in a dump" : "no trace file";
  const std::string inside = v.ended_in_call ? ", from inside its call" : "";
  switch (v.ending) {
    case Ending::kExited: return "exited with status " + std::to_string(v.exit_code & 0xff) + inside;
    case Ending::kCrashed: {
      const char* name = sigabbrev_np(v.signal);
      return "crashed: SIG" + std::string(name ? name : std::to_string(v.signal).c_str()) + inside;
    }
    case Ending::kTerminated:
      return "ended by SIGTERM" + (v.term_sender.empty() ? "" : " from " + v.term_sender) + inside;
    case Ending::kKilled: return "gone without an exit record (SIGKILL, the OOM killer)" + inside;
    case Ending::kRunning: break;
  }
  switch (v.liveness) {
    case Liveness::kRunning: return "running";
    case Liveness::kStopped: return "stopped (state T)";
    case Liveness::kZombie: return "exited, not yet reaped (a zombie)";
    case Liveness::kGone: return "gone";
    case Liveness::kUnknown: break;
  }
  return "not known to have ended (on another node, or read from a copy)";
}

nlohmann::json EndingJson(const Job& job) {
  std::map<std::string, RankSet> by_what;
  for (const RankView& v : job.ranks) by_what[HowItEnded(v)].Add(v.rank);
  std::vector<std::pair<std::string, RankSet>> rows(by_what.begin(), by_what.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.Count() > b.second.Count(); });
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [what, ranks] : rows) out.push_back({{"what", what}, {"ranks", ranks.ToString()}, {"count", ranks.Count()}});
  return out;
}

// The moment the page's times count back from: the newest sign of life of
// any rank (its end, its last heartbeat or record).
int64_t JobEndNs(const Job& job) {
  int64_t end = 0;
  for (const RankView& v : job.ranks) end = std::max({end, v.end_real_ns, v.last_record_real_ns});
  return end;
}

// A rank's last calls, per communicator, from its file read again (the Job
// keeps no records): each with its begin and end as seconds before `end_ns`
// (no end: still in it when the file was read).
nlohmann::json LastCalls(const RankView& v, int64_t end_ns) {
  std::string err;
  auto s = ReadTraceFile(v.path, &err);
  if (!s) return {{"error", err}};
  std::map<uint32_t, std::string> thread_names;
  for (const ThreadInfo& t : s->threads) thread_names[t.tid] = t.name;
  struct Call {
    fmt::Record begin;
    bool ended = false;
    uint64_t end_ticks = 0;
  };
  std::vector<Call> calls;
  std::map<uint32_t, std::vector<size_t>> open_by_tid;  // blocking calls nest per thread
  std::map<uint64_t, size_t> open_by_handle;            // nonblocking ones end by request
  for (const Event& e : s->events) {
    const fmt::Record& r = e.rec;
    const CallDesc* c = s->Call(r.call);
    const bool nonblocking = c && (c->flags & fmt::kCallNonblocking);
    if (r.kind == uint8_t(fmt::EventKind::kBegin)) {
      calls.push_back({r, false, 0});
      if (nonblocking) open_by_handle[r.handle] = calls.size() - 1;
      else open_by_tid[r.tid].push_back(calls.size() - 1);
    } else if (r.kind == uint8_t(fmt::EventKind::kEnd)) {
      size_t at = SIZE_MAX;
      if (nonblocking) {
        auto it = open_by_handle.find(r.handle);
        if (it != open_by_handle.end()) at = it->second, open_by_handle.erase(it);
      } else {
        auto& stack = open_by_tid[r.tid];
        if (!stack.empty()) at = stack.back(), stack.pop_back();
      }
      if (at != SIZE_MAX) calls[at].ended = true, calls[at].end_ticks = r.ticks;
    }
  }
  auto before_end = [&](uint64_t ticks) { return double(s->TicksToRealNs(ticks) - end_ns) / 1e9; };
  // The newest calls of each communicator, newest communicators first.
  std::map<std::string, std::vector<const Call*>> by_comm;
  std::vector<std::string> order;
  for (auto it = calls.rbegin(); it != calls.rend(); ++it) {
    const std::string comm = it->begin.comm == fmt::kNoComm ? "" : s->CommLabel(it->begin.comm);
    auto& list = by_comm[comm];
    if (list.empty()) {
      if (order.size() >= kCommsPerRank) continue;
      order.push_back(comm);
    }
    if (list.size() < kCallsPerComm) list.push_back(&*it);
  }
  nlohmann::json comms = nlohmann::json::array();
  for (const std::string& comm : order) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Call* c : by_comm[comm]) {
      const CallDesc* desc = s->Call(c->begin.call);
      nlohmann::json row = {{"name", s->CallName(c->begin.call)}, {"seq", c->begin.seq},
                            {"op", desc ? fmt::OpName(desc->op) : "none"}, {"t0", before_end(c->begin.ticks)},
                            {"t1", c->ended ? nlohmann::json(before_end(c->end_ticks)) : nlohmann::json(nullptr)}};
      const std::string& thread = thread_names[c->begin.tid];
      if (c->begin.tid != uint32_t(v.pid) && !thread.empty()) row["thread"] = thread;
      rows.push_back(std::move(row));
    }
    comms.push_back({{"comm", comm}, {"calls", rows}});
  }
  return {{"comms", comms}, {"lost", s->events_lost}};
}

nlohmann::json RanksJson(const Job& job, const Diagnosis& d, const std::vector<ClassLine>& classes, int64_t end_ns) {
  std::vector<int> class_of(job.ranks.size(), -1);
  for (size_t i = 0; i < classes.size(); ++i) {
    for (int32_t r : classes[i].ranks.Ranks()) {
      if (r >= 0 && size_t(r) < class_of.size()) class_of[size_t(r)] = int(i);
    }
  }
  // Which ranks: the culprits, then the first rank of each class; every
  // rank of a small job.
  std::vector<int32_t> chosen;
  std::set<int32_t> taken;
  auto take = [&](int32_t r) {
    if (r >= 0 && size_t(r) < job.ranks.size() && taken.insert(r).second) chosen.push_back(r);
  };
  for (size_t i = 0; i < d.culprits.size() && i < kMostCulpritsDetailed; ++i) take(d.culprits[i].rank);
  for (size_t i = 0; i < classes.size() && i < kMostClassesDetailed; ++i) {
    const auto ranks = classes[i].ranks.Ranks();
    if (!ranks.empty()) take(ranks.front());
  }
  if (job.world_size <= kEveryRankUpTo) {
    for (int32_t r = 0; r < job.world_size; ++r) take(r);
  }
  const RankSet culprits = CulpritRanks(d);
  nlohmann::json out = nlohmann::json::array();
  for (int32_t r : chosen) {
    const RankView& v = job.ranks[size_t(r)];
    nlohmann::json o = {{"rank", r}, {"host", v.host}, {"pid", v.pid}, {"class", class_of[size_t(r)]},
                        {"culprit", culprits.Contains(r)}, {"file", v.path}, {"ended", HowItEnded(v)}};
    if (!v.path.empty() && !v.from_stacks) o["calls"] = LastCalls(v, end_ns);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

nlohmann::json HtmlPageData(const Job& job, const Diagnosis& d, const std::string& text_report) {
  nlohmann::json report = JsonReport(job, d);
  DropListsAndStacks(&report);
  const int64_t end_ns = JobEndNs(job);
  size_t budget = kMostTreeNodes;
  const ClassWaits w = WaitsBetweenClasses(job, d);
  nlohmann::json data = {{"report", report},
                         {"classes", ClassesJson(job, d, w)},
                         {"edges", EdgesJson(w)},
                         {"shown", w.shown},
                         {"ranks", RanksJson(job, d, w.classes, end_ns)},
                         {"ending", EndingJson(job)},
                         {"text", text_report},
                         {"end_real_ns", end_ns}};
  if (HasStacks(job)) data["tree"] = TreeJson(job, MergeStacks(job), true, &budget);
  return data;
}

std::string HtmlReport(const Job& job, const Diagnosis& d, const std::string& text_report) {
  // In a <script> element, "</" could end it: written "<\/" (the same JSON).
  std::string data = JsonText(HtmlPageData(job, d, text_report));
  for (size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3) data.replace(at, 2, "<\\/");
  // The verdict and culprits in the markup itself: readable with scripts off.
  std::string head = "<p class=\"summary\"><span class=\"verdict v-" + std::string(VerdictName(d.verdict)) + "\">" +
                     HtmlEscaped(VerdictName(d.verdict)) + "</span> " + HtmlEscaped(d.summary) + "</p>\n";
  if (!d.culprits.empty()) {
    head += "<ul id=\"culprits\">\n";
    for (const Culprit& c : d.culprits) {
      head += "<li class=\"culprit\" data-rank=\"" + std::to_string(c.rank) + "\"><b>culprit rank " +
              std::to_string(c.rank) + "</b> (" + HtmlEscaped(c.host) + ", pid " + std::to_string(c.pid) +
              "): " + HtmlEscaped(c.why) + "</li>\n";
    }
    head += "</ul>\n";
  }
  if (!d.notes.empty()) {
    head += "<ul id=\"notes\">\n";
    for (const std::string& n : d.notes) head += "<li>" + HtmlEscaped(n) + "</li>\n";
    head += "</ul>\n";
  }
  head += "<p class=\"muted\" id=\"traced\">" + HtmlEscaped(TracedLine(d)) + "</p>\n";
  // What could not be read changes what the verdict stands on: in sight.
  if (!job.warnings.empty()) {
    head += "<details id=\"warnings\" open><summary class=\"warn\">" + std::to_string(job.warnings.size()) +
            " warning(s): what could not be read</summary><ul>\n";
    for (size_t i = 0; i < job.warnings.size() && i < 20; ++i) head += "<li>" + HtmlEscaped(job.warnings[i]) + "</li>\n";
    if (job.warnings.size() > 20) head += "<li>... " + std::to_string(job.warnings.size() - 20) + " more in the text report</li>\n";
    head += "</ul></details>\n";
  }
  // The template's marks, each replaced once, the page written in one pass
  // (so that nothing a replacement holds is taken for a mark).
  const std::pair<const char*, std::string> marks[] = {
      {"<!--TITLE-->", HtmlEscaped("hangtrace: " + std::string(VerdictName(d.verdict)))},
      {"<!--VERDICT-->", head},
      {"/*DATA*/", data},
  };
  const std::string page_template = kPage;
  std::string page;
  page.reserve(page_template.size() + data.size() + head.size());
  for (size_t from = 0;;) {
    size_t at = std::string::npos;
    const std::pair<const char*, std::string>* mark = nullptr;
    for (const auto& m : marks) {
      const size_t found = page_template.find(m.first, from);
      if (found < at) at = found, mark = &m;
    }
    if (!mark) {
      page.append(page_template, from, std::string::npos);
      break;
    }
    page.append(page_template, from, at - from);
    page += mark->second;
    from = at + strlen(mark->first);
  }
  return page;
}

}  // namespace hangtrace
