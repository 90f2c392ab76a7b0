// Every HANGTRACE_* environment variable, read in one place.
//
// The table below is the only list: the runtime reads it once at start-up
// (never on the record path), `hangtrace env` prints it, and the README's
// environment table is checked against that output by a test.
#pragma once

#include <cstdint>
#include <string>

namespace hangtrace {

// HT_SETTING(field, ENV_NAME, default as text, description)
#define HANGTRACE_SETTINGS(X)                                                  \
  X(dir, "HANGTRACE_DIR", "/dev/shm/hangtrace-$USER",                          \
    "Where trace files go: one subfolder per job, files 0600, folders 0700.") \
  X(timeout, "HANGTRACE_TIMEOUT", "120",                                       \
    "Watchdog: seconds a call may stay in flight before it is marked, the "    \
    "stacks of all threads are captured and one line is printed. 0: off.")     \
  X(blocking, "HANGTRACE_BLOCKING", "off",                                     \
    "Blocking-launch mode of the CUDA/NCCL wrappers: off, coll, kernels or "  \
    "all. Synchronizes the stream after each traced collective and/or "       \
    "kernel launch (a selective, recorded CUDA_LAUNCH_BLOCKING=1).")          \
  X(device_events, "HANGTRACE_DEVICE_EVENTS", "all",                          \
    "Device completion of the CUDA/HIP/NCCL wrappers: all (collectives and "  \
    "kernel launches), coll (collectives only: cheaper launches) or off. An " \
    "event is recorded after each; a poller thread notes when it fires.")     \
  X(ring, "HANGTRACE_RING", "65536",                                           \
    "Event slots (64 bytes each) of each thread's lane of the ring, rounded " \
    "up to a power of two, 1024 at least.")                                    \
  X(stacks, "HANGTRACE_STACKS", "1",                                           \
    "1: capture native stacks in the process on a watchdog timeout or a "     \
    "fatal signal (briefly signals each thread). 0: never.")                  \
  X(python, "HANGTRACE_PYTHON", "1",                                           \
    "1: with the native stacks, capture every thread's Python frames by "     \
    "CPython's own dumper (the other threads wait in the stack signal's "     \
    "handler meanwhile, at most 1 s). 0: native stacks only.")                \
  X(off, "HANGTRACE_OFF", "0",                                                 \
    "1: load but trace nothing (no file, no thread, no handler).")            \
  X(job, "HANGTRACE_JOB", "",                                                  \
    "Job id naming the subfolder. Default: SLURM_JOB_ID, else the "           \
    "launcher's (PMIX_NAMESPACE, OMPI jobid, TORCHELASTIC_RUN_ID), else "     \
    "'local'.")                                                                \
  X(quiet, "HANGTRACE_QUIET", "0",                                             \
    "1: no watchdog lines on stderr (errors still print).")

enum class BlockingMode : uint8_t { kOff = 0, kColl = 1, kKernels = 2, kAll = 3 };
enum class DeviceEvents : uint8_t { kOff = 0, kColl = 1, kAll = 2 };

struct Config {
  std::string dir;          // expanded: $USER replaced
  double timeout_s = 120;   // 0: watchdog off
  BlockingMode blocking = BlockingMode::kOff;
  DeviceEvents device_events = DeviceEvents::kAll;
  uint32_t ring_slots = 65536;  // power of two
  bool stacks = true;
  bool python = true;
  bool off = false;
  std::string job;          // resolved job id, safe as a path component
  bool quiet = false;
  std::string errors;       // what was wrong in the environment, if anything

  // Reads the environment. Bad values keep the default and are described in
  // `errors`, so the caller can print one line and go on.
  static Config FromEnvironment();
};

struct SettingDoc {
  const char* env;
  const char* default_value;
  const char* description;
};
// The table above, for `hangtrace env` and the docs.
const SettingDoc* SettingDocs(int* count);

bool ParseBlockingMode(const std::string& text, BlockingMode* out);
const char* BlockingModeName(BlockingMode m);

}  // namespace hangtrace
