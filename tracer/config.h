// Every HANGTRACE_* environment variable, read in one place.
//
// The table below is the only list: each entry names its Config field, its
// variable, the parser that reads it (and so the field's type), its default
// as text, and what it does. Config::FromEnvironment runs every entry's
// parser; `hangtrace env` prints the table, and the README's environment
// table is checked against that output by a test. Adding a setting is one
// line here (and a parser, if no existing one fits).
#pragma once

#include <cstdint>
#include <string>

namespace hangtrace {

enum class BlockingMode : uint8_t { kOff = 0, kColl = 1, kKernels = 2, kAll = 3 };
enum class DeviceEvents : uint8_t { kOff = 0, kColl = 1, kAll = 2 };

// The parsers. Each has the type of its field, and Parse(text, out), which
// returns false (leaving `out` alone) with `want` saying what text it takes.
struct FlagSetting {     // 0/1, true/false, yes/no, on/off
  using Type = bool;
  static bool Parse(const char* text, Type* out);
  static constexpr const char* kWant = "0 or 1";
};
struct TorchSetting {    // a flag, or "ctypes": the hook on, recording through ctypes (python/hangtrace_torch.py)
  using Type = bool;
  static bool Parse(const char* text, Type* out);
  static constexpr const char* kWant = "0, 1 or ctypes";
};
struct SecondsSetting {  // a number of seconds >= 0
  using Type = double;
  static bool Parse(const char* text, Type* out);
  static constexpr const char* kWant = "a number of seconds >= 0";
};
struct BlockingSetting {
  using Type = BlockingMode;
  static bool Parse(const char* text, Type* out);
  static constexpr const char* kWant = "off, coll, kernels or all";
};
struct DeviceEventsSetting {
  using Type = DeviceEvents;
  static bool Parse(const char* text, Type* out);
  static constexpr const char* kWant = "all, coll or off";
};
struct RingSetting {     // slots per lane, rounded up to a power of two >= 1024
  using Type = uint32_t;
  static bool Parse(const char* text, Type* out);
  static constexpr const char* kWant = "a slot count between 1 and 67108864";
};
struct PathSetting {     // a path, as given: ExpandUser() makes a literal $USER the user's name
  using Type = std::string;
  static bool Parse(const char* text, Type* out);
  static constexpr const char* kWant = "a path";
};
struct RunSetting {      // a run of a job, made safe as a name; empty: from the launcher
  using Type = std::string;
  static bool Parse(const char* text, Type* out);
  static constexpr const char* kWant = "a run id";
};

struct JobSetting {      // a job id, made safe as a folder name; empty: the launcher's
  using Type = std::string;
  static bool Parse(const char* text, Type* out);
  static constexpr const char* kWant = "a job id";
};

// X(field, ENV_NAME, Parser, default as text, description)
#define HANGTRACE_SETTINGS(X)                                                  \
  X(dir, "HANGTRACE_DIR", PathSetting, "/dev/shm/hangtrace-$USER",             \
    "Where trace files go: one subfolder per job, files 0600, folders 0700.") \
  X(timeout_s, "HANGTRACE_TIMEOUT", SecondsSetting, "120",                     \
    "Watchdog: seconds a call may stay in flight before it is marked and the " \
    "stacks of all threads are captured; then the job's automatic report "    \
    "(HANGTRACE_REPORT) or one line per rank. 0: off.")                        \
  X(blocking, "HANGTRACE_BLOCKING", BlockingSetting, "off",                    \
    "Blocking-launch mode of the CUDA/NCCL wrappers: off, coll, kernels or "  \
    "all. Synchronizes the stream after each traced collective and/or "       \
    "kernel launch (a selective, recorded CUDA_LAUNCH_BLOCKING=1).")          \
  X(device_events, "HANGTRACE_DEVICE_EVENTS", DeviceEventsSetting, "all",      \
    "Device completion of the CUDA/HIP/NCCL wrappers: all (collectives and "  \
    "kernel launches), coll (collectives only: cheaper launches) or off. An " \
    "event is recorded after each; a poller thread notes when it fires.")     \
  X(ring_slots, "HANGTRACE_RING", RingSetting, "65536",                        \
    "Event slots (64 bytes each) of each thread's lane of the ring, rounded " \
    "up to a power of two, 1024 at least.")                                    \
  X(stacks, "HANGTRACE_STACKS", FlagSetting, "1",                              \
    "1: capture native stacks in the process on a watchdog timeout, a "       \
    "fatal signal, or once after a timeout's time in no traced call: a "     \
    "thread blocked in a system call is read where it waits, a running one " \
    "is briefly signalled (no call of the program returns early). 0: never.")\
  X(python, "HANGTRACE_PYTHON", FlagSetting, "1",                              \
    "1: with the native stacks, capture every thread's Python frames by "     \
    "CPython's own dumper (the running threads wait in the stack signal's "  \
    "handler meanwhile, at most 1 s). 0: native stacks only.")                \
  X(torch, "HANGTRACE_TORCH", TorchSetting, "1",                               \
    "1: `hangtrace run` puts its Python hook first on PYTHONPATH (the "        \
    "program's own sitecustomize still runs), and torch.distributed's calls " \
    "are recorded like MPI's, on any backend. ctypes: the same, through the " \
    "hook's ctypes fallback rather than its C++ record path (slower; to "     \
    "compare). 0: not.")                                                      \
  X(keep, "HANGTRACE_KEEP", FlagSetting, "0",                                  \
    "1: give every process its trace file from the start and keep it. 0: a "  \
    "file appears at the first traced call (at start for a launcher's rank), "\
    "and one with no call in it is removed when its process exits 0.")        \
  X(off, "HANGTRACE_OFF", FlagSetting, "0",                                    \
    "1: load but trace nothing (no file, no thread, no handler).")            \
  X(job, "HANGTRACE_JOB", JobSetting, "",                                      \
    "Job id naming the subfolder. Default: SLURM_JOB_ID, else the "           \
    "launcher's (PMIX_NAMESPACE, OMPI jobid, TORCHELASTIC_RUN_ID), else "     \
    "'local'.")                                                                \
  X(run, "HANGTRACE_RUN", RunSetting, "",                                      \
    "Which run of the job: tells apart concurrent steps of one allocation "   \
    "and reruns under one job id, whose files are never merged. Default: "    \
    "SLURM's job, step and restart count, else the launcher's (Open MPI's "  \
    "namespace, torchrun's run id and restart count, the launcher's pid and " \
    "start time).")                                                           \
  X(quiet, "HANGTRACE_QUIET", FlagSetting, "0",                                \
    "1: no watchdog lines and no automatic report on stderr (errors still "   \
    "print).")                                                                 \
  X(report, "HANGTRACE_REPORT", FlagSetting, "1",                              \
    "1: when the watchdog fires, or a rank is blocked outside traced calls "  \
    "for the timeout, one report for the whole job in its log within "        \
    "seconds (each node dumps itself twice into HANGTRACE_REPORT_DIR; the "   \
    "first node done analyzes). 0: one watchdog line per rank instead.")      \
  X(report_dir, "HANGTRACE_REPORT_DIR", PathSetting, "",                       \
    "Where the automatic report gathers the nodes' dumps: a folder every "    \
    "node sees. Default: hangtrace-report-JOB in $SLURM_SUBMIT_DIR, else in " \
    "the folder the job was launched from.")                                  \
  X(cli, "HANGTRACE_CLI", PathSetting, "",                                     \
    "The hangtrace binary the runtime runs for the automatic report. "        \
    "Default: what `hangtrace run` sets, else ../bin/hangtrace beside "       \
    "libhangtrace.so.")                                                        \
  X(lib, "HANGTRACE_LIB", PathSetting, "",                                     \
    "Path of libhangtrace.so for `hangtrace run` to preload. Default: "       \
    "../lib/libhangtrace.so beside the hangtrace binary.")                         \
  X(user_paths, "HANGTRACE_USER_PATHS", PathSetting, "",                       \
    "Folders of the program's own code, ':' between them, for the reports: "  \
    "a rank's place is the innermost frame of the user's code, and by "       \
    "default a frame under site-packages, dist-packages, lib/python3.X or "   \
    "the system's folders is a library's. Name a folder where that guess is " \
    "wrong (your package installed into a virtualenv).")

struct Config {
#define HT_CONFIG_FIELD(field, env, parser, def, desc) parser::Type field{};
  HANGTRACE_SETTINGS(HT_CONFIG_FIELD)
#undef HT_CONFIG_FIELD
  std::string errors;  // what was wrong in the environment, if anything

  // Every setting at its default.
  Config();
  // Reads the environment. A bad value keeps the default and is described
  // in `errors`, so the caller can print one line and go on.
  static Config FromEnvironment();
};

struct SettingDoc {
  const char* env;
  const char* default_value;
  const char* description;
};
// The table above, for `hangtrace env` and the docs.
const SettingDoc* SettingDocs(int* count);

// A path setting with a literal $USER (the documented default of
// HANGTRACE_DIR spells it so) made the user's name: $USER, else the
// password database. Done where the path is used, not when settings are
// read: every traced process reads them, and a password lookup (nscd's
// socket, then /etc/passwd) was a third of a process's start.
std::string ExpandUser(std::string path);

bool ParseBlockingMode(const std::string& text, BlockingMode* out);
const char* BlockingModeName(BlockingMode m);

}  // namespace hangtrace
