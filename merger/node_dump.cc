#include "merger/node_dump.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "merger/stack_calls.h"

namespace hangtrace {

using json = nlohmann::json;

const char* LivenessName(Liveness l) {
  switch (l) {
    case Liveness::kRunning: return "alive";
    case Liveness::kStopped: return "stopped";
    case Liveness::kZombie: return "zombie";
    case Liveness::kGone: return "gone";
    case Liveness::kUnknown: break;
  }
  return "unknown";
}

Liveness LivenessFromName(const std::string& name) {
  if (name == "alive") return Liveness::kRunning;
  if (name == "stopped") return Liveness::kStopped;
  if (name == "zombie") return Liveness::kZombie;
  if (name == "gone") return Liveness::kGone;
  return Liveness::kUnknown;
}

bool NodeProcess::HasPythonFrames() const {
  for (const NodeThread& t : threads) {
    for (const Frame& f : t.frames) {
      if (f.lang == Frame::Lang::kPython) return true;
    }
  }
  return false;
}

json FrameToJson(const Frame& f) {
  json j = {{"func", f.func}, {"file", f.file}, {"line", f.line}, {"module", f.module}, {"lang", f.LangName()}};
  if (f.lang == Frame::Lang::kNative) j["offset"] = f.offset;
  return j;
}

// An object (func, file, line, module, offset, lang), or a plain string from
// dumps of older versions.
Frame FrameFromJson(const json& j) {
  Frame f;
  if (j.is_string()) {
    f.func = j.get<std::string>();
    if (f.func.rfind("[kernel] ", 0) == 0) {
      f.lang = Frame::Lang::kKernel;
      f.func = f.func.substr(9);
    }
    return f;
  }
  if (!j.is_object()) return f;
  f.func = j.value("func", "");
  f.file = j.value("file", "");
  f.line = j.value("line", 0);
  f.module = j.value("module", "");
  f.offset = j.value("offset", uint64_t(0));
  const std::string lang = j.value("lang", "native");
  f.lang = lang == "python" ? Frame::Lang::kPython : lang == "kernel" ? Frame::Lang::kKernel : Frame::Lang::kNative;
  return f;
}

namespace {
json Frames(const std::vector<Frame>& frames) {
  json out = json::array();
  for (const Frame& f : frames) out.push_back(FrameToJson(f));
  return out;
}
std::vector<Frame> Frames(const json& j) {
  std::vector<Frame> out;
  if (j.is_array()) {
    for (const json& f : j) out.push_back(FrameFromJson(f));
  }
  return out;
}
}  // namespace

json NodeToJson(const NodeDump& n) {
  json j = {{"schema", kNodeSchema}, {"host", n.host}, {"job", n.job}, {"warnings", n.warnings}, {"seconds", n.seconds}};
  // The node's distinct stacks, each once: a node's ranks mostly wait in a
  // few places, so the file (and what the analysis parses) grows with the
  // distinct stacks, not with the threads.
  j["stacks"] = json::array();
  std::unordered_map<std::string, size_t> stack_index;
  auto stack_of = [&](const std::vector<Frame>& frames) {
    json fr = Frames(frames);
    auto [it, added] = stack_index.emplace(fr.dump(), j["stacks"].size());
    if (added) j["stacks"].push_back(std::move(fr));
    return it->second;
  };
  j["processes"] = json::array();
  for (const NodeProcess& p : n.processes) {
    json o = {{"pid", p.pid},
              {"rank", p.rank},
              {"world_size", p.world_size},
              {"rank_from", p.rank_from},
              {"trace", p.trace},
              {"liveness", LivenessName(p.liveness)},
              {"heartbeat_age_s", p.heartbeat_age_s},
              {"state_before", p.state_before},
              {"state_after", p.state_after},
              {"error", p.error},
              {"seconds", p.seconds}};
    if (!p.python_version.empty()) o["python"] = {{"version", p.python_version}, {"error", p.python_error}};
    if (!p.cmdline.empty()) o["cmdline"] = p.cmdline;
    if (p.child_of) o["child_of"] = {{"pid", p.child_of}, {"rank", p.child_of_rank}};
    if (p.captured_on_request) o["captured_on_request"] = true;
    o["threads"] = json::array();
    for (const NodeThread& t : p.threads) {
      json th = {{"tid", t.tid}, {"name", t.name}, {"state", t.state}, {"wchan", t.wchan},
                 {"syscall", t.syscall}, {"method", t.method}, {"error", t.error}};
      if (!t.frames.empty()) th["stack"] = stack_of(t.frames);
      // The system call by name, for a person reading the file.
      if (!t.syscall.empty() && isdigit(static_cast<unsigned char>(t.syscall[0]))) {
        th["syscall_name"] = SyscallName(t.syscall);
      }
      if (t.lock_holder_pid) th["lock"] = {{"holder_pid", t.lock_holder_pid}, {"file", t.lock_file}};
      if (t.frame_pointer_scan) th["frame_pointer_scan"] = true;
      if (t.moved) th["moved"] = true;
      o["threads"].push_back(std::move(th));
    }
    j["processes"].push_back(o);
  }
  j["stack_groups"] = json::array();
  for (const NodeDump::StackGroup& g : n.stack_groups) {
    j["stack_groups"].push_back({{"stack", stack_of(g.frames)}, {"ranks", g.ranks}, {"count", g.count}});
  }
  return j;
}

bool NodeFromJson(const json& j, NodeDump* n, std::string* error) {
  if (!j.is_object() || !j.contains("processes") || !j["processes"].is_array()) {
    *error = "not a node dump (no processes)";
    return false;
  }
  try {
    const std::string schema = j.value("schema", "");
    if (schema != kNodeSchema && schema != kNodeSchemaV1) {
      *error = "schema '" + schema + "', this hangtrace reads " + kNodeSchema + " and " + kNodeSchemaV1;
      return false;
    }
    // A thread's or group's frames: inline (version 1), or a stack by index.
    std::vector<std::vector<Frame>> stacks;
    for (const json& s : j.value("stacks", json::array())) stacks.push_back(Frames(s));
    auto frames_of = [&](const json& o) {
      if (o.contains("stack") && o["stack"].is_number_unsigned()) {
        const size_t i = o["stack"].get<size_t>();
        return i < stacks.size() ? stacks[i] : std::vector<Frame>();
      }
      return Frames(o.value("frames", json::array()));
    };
    n->host = j.value("host", "");
    n->job = j.value("job", "");
    n->warnings = j.value("warnings", std::vector<std::string>());
    n->seconds = j.value("seconds", 0.0);
    for (const json& o : j["processes"]) {
      NodeProcess p;
      p.pid = o.value("pid", 0);
      p.rank = o.value("rank", -1);
      p.world_size = o.value("world_size", -1);
      p.rank_from = o.value("rank_from", "");
      p.trace = o.value("trace", "");
      p.liveness = LivenessFromName(o.value("liveness", ""));
      p.heartbeat_age_s = o.value("heartbeat_age_s", -1.0);
      p.state_before = o.value("state_before", "?");
      p.state_after = o.value("state_after", "?");
      p.error = o.value("error", "");
      p.cmdline = o.value("cmdline", "");
      p.seconds = o.value("seconds", 0.0);
      p.captured_on_request = o.value("captured_on_request", false);
      if (o.contains("child_of") && o["child_of"].is_object()) {
        p.child_of = o["child_of"].value("pid", 0);
        p.child_of_rank = o["child_of"].value("rank", -1);
      }
      if (o.contains("python") && o["python"].is_object()) {
        p.python_version = o["python"].value("version", "");
        p.python_error = o["python"].value("error", "");
      }
      for (const json& t : o.value("threads", json::array())) {
        NodeThread th;
        th.tid = t.value("tid", 0u);
        th.name = t.value("name", "");
        th.state = t.value("state", "?");
        th.wchan = t.value("wchan", "");
        th.syscall = t.value("syscall", "");
        th.method = t.value("method", "");
        th.frame_pointer_scan = t.value("frame_pointer_scan", false);
        th.moved = t.value("moved", false);
        th.error = t.value("error", "");
        if (t.contains("lock") && t["lock"].is_object()) {
          th.lock_holder_pid = t["lock"].value("holder_pid", 0);
          th.lock_file = t["lock"].value("file", "");
        }
        th.frames = frames_of(t);
        p.threads.push_back(std::move(th));
      }
      n->processes.push_back(std::move(p));
    }
    for (const json& g : j.value("stack_groups", json::array())) {
      n->stack_groups.push_back({frames_of(g), g.value("ranks", ""), g.value("count", size_t(0))});
    }
  } catch (const json::exception& e) {
    *error = std::string("malformed: ") + e.what();
    return false;
  }
  return true;
}

bool ReadNodeDump(const std::string& folder, NodeDump* node, std::string* error) {
  error->clear();
  std::ifstream f(folder + "/" + kNodeFile);
  if (!f) return false;
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded()) {
    *error = "not JSON";
    return false;
  }
  return NodeFromJson(j, node, error);
}

std::string ProcessStacksText(const NodeProcess& p) {
  std::string out = "Process " + std::to_string(p.pid) + ": " + p.cmdline + "\n";
  if (p.child_of) out += "(a process of rank " + std::to_string(p.child_of_rank) + "'s, pid " + std::to_string(p.child_of) + ")\n";
  if (!p.python_version.empty()) out += "Python v" + p.python_version + "\n";
  if (!p.error.empty()) out += "(" + p.error + ")\n";
  for (const NodeThread& th : p.threads) {
    std::string how = "state " + th.state;
    if (!th.syscall.empty() && isdigit(static_cast<unsigned char>(th.syscall[0]))) how += ", in " + SyscallName(th.syscall);
    if (th.lock_holder_pid) how += ", waiting for the file lock pid " + std::to_string(th.lock_holder_pid) + " holds";
    out += "\nThread " + std::to_string(th.tid) + " (" + how + "): \"" + th.name + "\"\n";
    if (th.frames.empty()) out += "    (no stack: " + (th.error.empty() ? th.method : th.error) + ")\n";
    for (const Frame& f : th.frames) {
      out += "    " + Shortened(f.Text()) + (f.lang == Frame::Lang::kPython ? "" : "  [native]") + "\n";
    }
  }
  return out + "\n";
}

std::vector<std::string> FindNodeDumps(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  // The path named is followed (as `ls` does, and as a /proc/PID/fd/N path
  // to an opened folder must be); what lies under it is not.
  if (!fs::is_directory(fs::status(path, ec))) return out;
  auto has = [&](const fs::path& dir) { return fs::is_regular_file(fs::symlink_status(dir / kNodeFile, ec)); };
  if (has(path)) out.push_back(path);
  const FolderTrust trust(path);  // another user's node folder is skipped (FindTraceFiles says so)
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    // Types from the listing (no stat per trace file); links not followed.
    std::error_code e2;
    if (!it->is_symlink(e2) && it->is_directory(e2) && has(it->path()) && trust.Distrust(it->path().string()).empty()) {
      out.push_back(it->path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Looks LooksIn(const std::string& path) {
  if (FindNodeDumps(path + "/first").empty()) return Looks::kNone;
  return FindNodeDumps(path + "/second").empty() ? Looks::kFirstOnly : Looks::kTwo;
}

}  // namespace hangtrace
