#include "tracer/config.h"
#include "tracer/procfs.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>

namespace hangtrace {
namespace {

const char* Env(const char* name) {
  const char* v = getenv(name);
  return (v && *v) ? v : nullptr;
}

// The user whose folders these are: the real uid's name, never $USER,
// which a job may have set to anything (another user's name made every rank
// run untraced: "/dev/shm/hangtrace-root: Permission denied").
std::string UserName() {
  if (const passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return std::to_string(getuid());
}

// Job ids become folder names: keep [A-Za-z0-9._-], map the rest to '_'.
std::string PathSafe(std::string s) {
  for (char& c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-';
    if (!ok) c = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "job";
  return s.substr(0, 63);
}

// Reads one setting: the environment's value when it parses, else the
// default (which always does); a bad value is described in `errors`.
template <typename Parser>
void Read(const char* env, const char* def, typename Parser::Type* field, std::string* errors) {
  if (const char* v = Env(env)) {
    if (Parser::Parse(v, field)) return;
    *errors += std::string(errors->empty() ? "" : "; ") + env + "='" + v + "' is not " + Parser::kWant +
               ", using the default";
  }
  Parser::Parse(def, field);
}

}  // namespace

bool FlagSetting::Parse(const char* v, Type* out) {
  if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) {
    *out = true;
    return true;
  }
  if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) {
    *out = false;
    return true;
  }
  return false;
}

bool TorchSetting::Parse(const char* v, Type* out) {
  if (!strcmp(v, "ctypes")) {
    *out = true;
    return true;
  }
  return FlagSetting::Parse(v, out);
}

bool SecondsSetting::Parse(const char* v, Type* out) {
  char* end = nullptr;
  errno = 0;
  double t = strtod(v, &end);
  if (errno || end == v || *end || !(t >= 0)) return false;
  *out = t;
  return true;
}

bool BlockingSetting::Parse(const char* v, Type* out) { return ParseBlockingMode(v, out); }

bool DeviceEventsSetting::Parse(const char* v, Type* out) {
  std::string t = v;
  if (t == "all" || t == "1") *out = DeviceEvents::kAll;
  else if (t == "coll") *out = DeviceEvents::kColl;
  else if (t == "off" || t == "0") *out = DeviceEvents::kOff;
  else return false;
  return true;
}

bool RingSetting::Parse(const char* v, Type* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno || end == v || *end || n == 0 || n > (1ull << 26)) return false;
  uint32_t p = 1024;
  while (p < n) p <<= 1;
  *out = p;
  return true;
}

bool PathSetting::Parse(const char* v, Type* out) {
  *out = v;
  return true;
}

std::string ExpandUser(std::string path) {
  if (auto pos = path.find("$USER"); pos != std::string::npos) path.replace(pos, 5, UserName());
  return path;
}

// A run's name as a folder's: PathSafe, and where that had to cut it or
// change a character, the rest replaced by a hash of the whole, so that two
// runs never share a name (64 y's then A, and then B, were one run).
std::string UniqueName(const std::string& text) {
  const std::string safe = PathSafe(text);
  if (safe == text) return safe;
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return safe.substr(0, 46) + "-" + hex;
}

// torchrun's run id, unless it is its default "none" (every standalone
// torchrun has it: it names no run).
const char* TorchRunId() {
  const char* id = Env("TORCHELASTIC_RUN_ID");
  return id && strcmp(id, "none") != 0 ? id : nullptr;
}

bool JobSetting::Parse(const char* v, Type* out) {
  const char* job = *v ? v : nullptr;
  if (!job) job = Env("SLURM_JOB_ID");
  if (!job) job = Env("PMIX_NAMESPACE");           // Open MPI 4/5 with PRRTE/ORTE
  if (!job) job = Env("OMPI_MCA_ess_base_jobid");  // Open MPI 4
  if (!job) job = TorchRunId();
  *out = PathSafe(job ? job : "local");
  return true;
}

// The run: what every rank of one launch shares and another launch under
// the same job id does not. SLURM: job, step, restart count (concurrent
// srun steps and a requeued job differ). Open MPI: the namespace mpirun
// made. torchrun: its run id and restart count. Else, for a process a
// launcher started as a rank (hydra, a standalone torchrun): that
// launcher's pid and start time on this node. Else unknown ("").
bool RunSetting::Parse(const char* v, Type* out) {
  if (*v) {
    *out = UniqueName(v);
    return true;
  }
  auto or_default = [](const char* name, const char* fallback) {
    const char* x = Env(name);
    return std::string(x ? x : fallback);
  };
  std::string run;
  if (const char* job = Env("SLURM_JOB_ID")) {
    run = std::string("slurm-") + job + "." + or_default("SLURM_STEP_ID", "batch") + "." +
          or_default("SLURM_RESTART_COUNT", "0");
    // Two mpiruns of one batch script share its step: their namespaces differ.
    if (const char* ns = Env("PMIX_NAMESPACE")) run += std::string("-") + ns;
  } else if (const char* ns = Env("PMIX_NAMESPACE")) {
    run = std::string("pmix-") + ns;
  } else if (const char* id = Env("OMPI_MCA_ess_base_jobid")) {
    run = std::string("ompi-") + id;
  } else if (const char* torch = TorchRunId()) {
    run = std::string("torch-") + torch + "." + or_default("TORCHELASTIC_RESTART_COUNT", "0");
  } else if (Env("TORCHELASTIC_RUN_ID") || Env("PMI_RANK") || Env("RANK") || Env("PALS_RANKID")) {
    ProcStat parent;
    const pid_t ppid = getppid();
    if (ReadProcStat(ppid, &parent)) {
      run = "launcher-" + std::to_string(ppid) + "-" + std::to_string(parent.start_time);
      if (const char* restart = Env("TORCHELASTIC_RESTART_COUNT")) run += std::string(".") + restart;
    }
  } else {
    // No launcher: a process of its own (what it forks shares its run).
    ProcStat self;
    if (ReadProcStat(0, &self)) run = "process-" + std::to_string(getpid()) + "-" + std::to_string(self.start_time);
  }
  *out = run.empty() ? run : UniqueName(run);
  return true;
}

bool ParseBlockingMode(const std::string& t, BlockingMode* out) {
  if (t == "off" || t == "0" || t == "none") *out = BlockingMode::kOff;
  else if (t == "coll") *out = BlockingMode::kColl;
  else if (t == "kernels") *out = BlockingMode::kKernels;
  else if (t == "all" || t == "1") *out = BlockingMode::kAll;
  else return false;
  return true;
}

const char* BlockingModeName(BlockingMode m) {
  switch (m) {
    case BlockingMode::kOff: return "off";
    case BlockingMode::kColl: return "coll";
    case BlockingMode::kKernels: return "kernels";
    case BlockingMode::kAll: return "all";
  }
  return "?";
}

Config::Config() {
#define HT_DEFAULT(field, env, parser, def, desc) parser::Parse(def, &field);
  HANGTRACE_SETTINGS(HT_DEFAULT)
#undef HT_DEFAULT
}

Config Config::FromEnvironment() {
  Config c;
#define HT_READ(field, env, parser, def, desc) Read<parser>(env, def, &c.field, &c.errors);
  HANGTRACE_SETTINGS(HT_READ)
#undef HT_READ
  return c;
}

const SettingDoc* SettingDocs(int* count) {
  static const SettingDoc docs[] = {
#define HT_DOC(field, env, parser, def, desc) {env, def, desc},
      HANGTRACE_SETTINGS(HT_DOC)
#undef HT_DOC
  };
  *count = sizeof(docs) / sizeof(docs[0]);
  return docs;
}

}  // namespace hangtrace
