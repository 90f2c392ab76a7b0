#include "tracer/config.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace hangtrace {
namespace {

const char* Env(const char* name) {
  const char* v = getenv(name);
  return (v && *v) ? v : nullptr;
}

std::string UserName() {
  if (const char* u = Env("USER")) return u;
  if (const passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return std::to_string(getuid());
}

// Job ids become folder names: keep [A-Za-z0-9._-], map the rest to '_'.
std::string PathSafe(std::string s) {
  for (char& c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "job";
  return s.substr(0, 63);
}

bool ParseBool(const char* v, bool* out) {
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

}  // namespace

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

Config Config::FromEnvironment() {
  Config c;
  auto bad = [&c](const char* name, const char* value, const char* want) {
    c.errors += std::string(c.errors.empty() ? "" : "; ") + name + "='" + value +
                "' is not " + want + ", using the default";
  };

  if (const char* v = Env("HANGTRACE_OFF")) {
    if (!ParseBool(v, &c.off)) bad("HANGTRACE_OFF", v, "0 or 1");
  }
  if (const char* v = Env("HANGTRACE_QUIET")) {
    if (!ParseBool(v, &c.quiet)) bad("HANGTRACE_QUIET", v, "0 or 1");
  }

  if (const char* v = Env("HANGTRACE_DIR")) {
    c.dir = v;
  } else {
    c.dir = "/dev/shm/hangtrace-" + UserName();
  }
  // Expand a literal $USER, as the documented default spells it.
  if (auto pos = c.dir.find("$USER"); pos != std::string::npos) c.dir.replace(pos, 5, UserName());

  if (const char* v = Env("HANGTRACE_TIMEOUT")) {
    char* end = nullptr;
    errno = 0;
    double t = strtod(v, &end);
    if (errno || end == v || *end || t < 0) bad("HANGTRACE_TIMEOUT", v, "a number of seconds >= 0");
    else c.timeout_s = t;
  }
  if (const char* v = Env("HANGTRACE_BLOCKING")) {
    if (!ParseBlockingMode(v, &c.blocking)) bad("HANGTRACE_BLOCKING", v, "off, coll, kernels or all");
  }
  if (const char* v = Env("HANGTRACE_DEVICE_EVENTS")) {
    std::string t = v;
    if (t == "all" || t == "1") c.device_events = DeviceEvents::kAll;
    else if (t == "coll") c.device_events = DeviceEvents::kColl;
    else if (t == "off" || t == "0") c.device_events = DeviceEvents::kOff;
    else bad("HANGTRACE_DEVICE_EVENTS", v, "all, coll or off");
  }
  if (const char* v = Env("HANGTRACE_RING")) {
    char* end = nullptr;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || end == v || *end || n == 0 || n > (1ull << 26)) {
      bad("HANGTRACE_RING", v, "a slot count between 1 and 67108864");
    } else {
      uint32_t p = 1024;
      while (p < n) p <<= 1;
      c.ring_slots = p;
    }
  }
  if (const char* v = Env("HANGTRACE_STACKS")) {
    if (!ParseBool(v, &c.stacks)) bad("HANGTRACE_STACKS", v, "0 or 1");
  }
  if (const char* v = Env("HANGTRACE_PYTHON")) {
    if (!ParseBool(v, &c.python)) bad("HANGTRACE_PYTHON", v, "0 or 1");
  }

  const char* job = Env("HANGTRACE_JOB");
  if (!job) job = Env("SLURM_JOB_ID");
  if (!job) job = Env("PMIX_NAMESPACE");           // OpenMPI 4/5 with PRRTE/ORTE
  if (!job) job = Env("OMPI_MCA_ess_base_jobid");  // OpenMPI 4
  if (!job) job = Env("TORCHELASTIC_RUN_ID");
  c.job = PathSafe(job ? job : "local");
  return c;
}

const SettingDoc* SettingDocs(int* count) {
  static const SettingDoc docs[] = {
#define HT_DOC(field, env, def, desc) {env, def, desc},
      HANGTRACE_SETTINGS(HT_DOC)
#undef HT_DOC
  };
  *count = sizeof(docs) / sizeof(docs[0]);
  return docs;
}

}  // namespace hangtrace
