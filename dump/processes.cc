#include "dump/processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "tracer/procfs.h"

namespace hangtrace {
namespace {

std::map<std::string, std::string> ReadEnviron(pid_t pid) {
  std::map<std::string, std::string> env;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

bool ParseCount(const std::string& text, int32_t* out) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  *out = int32_t(strtol(text.c_str(), nullptr, 10));
  return true;
}

std::string Comm(pid_t pid) {
  char buf[64] = {};
  const std::string path = "/proc/" + std::to_string(pid) + "/comm";
  if (ReadSmallFile(path.c_str(), buf, sizeof(buf)) <= 0) return "";
  std::string s = buf;
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

bool IsShell(const std::string& comm) {
  return comm == "sh" || comm == "bash" || comm == "dash" || comm == "zsh" || comm == "ksh";
}

}  // namespace

std::map<pid_t, pid_t> ParentMap() {
  std::map<pid_t, pid_t> parents;
  DIR* d = opendir("/proc");
  if (!d) return parents;
  while (struct dirent* e = readdir(d)) {
    char* end = nullptr;
    const long pid = strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end) continue;
    ProcStat st;
    if (ReadProcStat(pid_t(pid), &st)) parents[pid_t(pid)] = st.ppid;
  }
  closedir(d);
  return parents;
}

std::vector<pid_t> ChildProcesses(pid_t pid, const std::map<pid_t, pid_t>& parents, size_t most) {
  constexpr int kDepth = 3;  // a worker's own helper, a shell's command
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& [p, parent] : parents) children[parent].push_back(p);
  std::vector<pid_t> out, level = {pid};
  for (int depth = 0; depth < kDepth && !level.empty() && out.size() < most; ++depth) {
    std::vector<pid_t> next;
    for (pid_t p : level) {
      for (pid_t c : children[p]) {
        // hangtrace's own (the automatic report's helper and its dumps) are
        // not the program's.
        if (Comm(c) == "hangtrace") continue;
        if (out.size() < most) out.push_back(c);
        next.push_back(c);
      }
    }
    level = std::move(next);
  }
  return out;
}

namespace {

// Of ranked processes, the topmost per rank: one whose parent is not a rank
// of the same job. A shell that only runs the rank's program hands over to it.
std::vector<RankedProcess> Topmost(const std::map<pid_t, RankedProcess>& ranked, const std::map<pid_t, pid_t>& parents) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& [pid, parent] : parents) children[parent].push_back(pid);
  std::vector<RankedProcess> out;
  for (const auto& [pid, p] : ranked) {
    auto parent = parents.find(pid);
    if (parent != parents.end()) {
      auto up = ranked.find(parent->second);
      if (up != ranked.end() && up->second.rank == p.rank) continue;  // its rank's own child
    }
    RankedProcess chosen = p;
    for (int depth = 0; depth < 4 && IsShell(Comm(chosen.pid)); ++depth) {
      std::vector<pid_t> same;
      for (pid_t c : children[chosen.pid]) {
        auto it = ranked.find(c);
        if (it != ranked.end() && it->second.rank == chosen.rank) same.push_back(c);
      }
      if (same.size() != 1) break;
      chosen = ranked.at(same[0]);
    }
    out.push_back(chosen);
  }
  std::sort(out.begin(), out.end(), [](const RankedProcess& a, const RankedProcess& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pid < b.pid;
  });
  return out;
}

}  // namespace

bool ReadRankedProcess(pid_t pid, RankedProcess* out) {
  const std::map<std::string, std::string> env = ReadEnviron(pid);
  out->pid = pid;
  auto get = [&](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  out->slurm_job = get("SLURM_JOB_ID");
  out->slurm_step = get("SLURM_STEP_ID");
  out->slurm_node = get("SLURMD_NODENAME");
  for (const RankVariable& v : kRankVariables) {
    int32_t rank;
    if (!ParseCount(get(v.rank), &rank)) continue;
    if (v.source == fmt::RankSource::kEnvTorch && get(v.size).empty()) continue;  // RANK alone is anybody's variable
    out->rank = rank;
    out->rank_from = v.rank;
    int32_t size;
    if (ParseCount(get(v.size), &size)) out->world_size = size;
    return true;
  }
  return false;
}

std::vector<RankedProcess> RanksUnder(pid_t pid) {
  RankedProcess self;
  if (ReadRankedProcess(pid, &self)) return {self};
  const std::map<pid_t, pid_t> parents = ParentMap();
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& [p, parent] : parents) children[parent].push_back(p);
  std::map<pid_t, RankedProcess> ranked;
  std::vector<pid_t> todo = {pid};
  std::set<pid_t> seen;
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    if (!seen.insert(p).second) continue;
    for (pid_t c : children[p]) {
      RankedProcess r;
      if (ReadRankedProcess(c, &r)) ranked[c] = r;
      todo.push_back(c);
    }
  }
  return Topmost(ranked, parents);
}

namespace {

// The uid a process runs as, or -1.
int64_t Uid(pid_t pid) {
  struct stat st;
  return stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 ? int64_t(st.st_uid) : -1;
}

// Whether `pid` runs under SLURM's step daemon of `job`: an ancestor that
// is root's slurmstepd ("slurmstepd: [JOB.STEP]"). Its environment anyone
// can write; its ancestry a user cannot fake (the daemon runs as root, and
// is named by its executable, not only by its command line).
bool UnderStepdOf(pid_t pid, const std::string& job, const std::map<pid_t, pid_t>& parents) {
  const std::string tag = "slurmstepd: [" + job + ".";
  for (int depth = 0; depth < 64; ++depth) {
    auto up = parents.find(pid);
    if (up == parents.end() || up->second <= 1) return false;
    pid = up->second;
    if (Comm(pid) != "slurmstepd" || Uid(pid) != 0) continue;
    char exe[4096];
    const ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof(exe) - 1);
    if (n <= 0) continue;
    exe[n] = '\0';
    const char* base = strrchr(exe, '/');
    if (strncmp(base ? base + 1 : exe, "slurmstepd", 10) != 0) continue;  // Debian's is slurmstepd-wlm
    char cmd[256] = {};
    if (ReadSmallFile(("/proc/" + std::to_string(pid) + "/cmdline").c_str(), cmd, sizeof(cmd)) <= 0) continue;
    if (strncmp(cmd, tag.c_str(), tag.size()) == 0) return true;
  }
  return false;
}

}  // namespace

std::vector<RankedProcess> RanksOfSlurmJob(const std::string& job, const std::string& exclude_step,
                                           const std::string& node, int64_t owner, size_t* refused) {
  const std::map<pid_t, pid_t> parents = ParentMap();
  std::map<pid_t, RankedProcess> ranked;
  const pid_t self = getpid();
  for (const auto& [pid, parent] : parents) {
    if (pid == self) continue;
    RankedProcess r;
    if (!ReadRankedProcess(pid, &r) || r.slurm_job != job) continue;
    // A job's process runs under its step daemon, or as its owner where
    // the daemon cannot be seen (a container's pid namespace).
    if (!UnderStepdOf(pid, job, parents) && (owner < 0 || Uid(pid) != owner)) {
      if (refused) ++*refused;
      continue;
    }
    if (!exclude_step.empty() && r.slurm_step == exclude_step) continue;  // the dump's own step
    if (!node.empty() && !r.slurm_node.empty() && r.slurm_node != node) continue;
    ranked[pid] = r;
  }
  // The batch script's shell (and the srun it runs) carries the job's
  // variables, SLURM_PROCID=0 among them, but is no rank: it belongs to no
  // numbered step. Where the job has numbered steps, only theirs are ranks.
  auto numbered = [](const std::string& step) {
    return !step.empty() && step.find_first_not_of("0123456789") == std::string::npos;
  };
  const bool any_numbered = std::any_of(ranked.begin(), ranked.end(), [&](const auto& kv) { return numbered(kv.second.slurm_step); });
  if (any_numbered) {
    for (auto it = ranked.begin(); it != ranked.end();) it = numbered(it->second.slurm_step) ? std::next(it) : ranked.erase(it);
  }
  return Topmost(ranked, parents);
}

std::string MappedTraceFile(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.size() > 7 && path.compare(path.size() - 7, 7, ".htrace") == 0) return path;
  }
  return "";
}

}  // namespace hangtrace
