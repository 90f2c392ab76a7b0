// The public C API (include/hangtrace.h), on top of the runtime.
#include "hangtrace.h"

#include "tracer/runtime.h"

using namespace hangtrace;

namespace {
// Regions entered on this thread, so hangtrace_end can finish the record.
constexpr int kMaxDepth = 32;
thread_local fmt::Record t_regions[kMaxDepth];
thread_local bool t_recorded[kMaxDepth];
thread_local bool t_outer[kMaxDepth];
thread_local int t_region_depth = 0;
}  // namespace

extern "C" {

__attribute__((visibility("default"))) int hangtrace_enabled(void) { return Traced(); }

// A program that asks for its file means to read or keep it: named now.
__attribute__((visibility("default"))) const char* hangtrace_file(void) {
  return Traced() && NameTraceFile() ? g_trace->path : nullptr;
}

__attribute__((visibility("default"))) int hangtrace_region(const char* name) {
  if (!name || !*name || !Traced()) return -1;
  uint16_t id = RegisterCall(name, fmt::Api::kUser, fmt::Op::kOther, fmt::kCallBlocking);
  return id == fmt::kNoCall ? -1 : int(id);
}

__attribute__((visibility("default"))) int hangtrace_begin(int region, uint64_t arg) {
  if (region < 0 || t_region_depth >= kMaxDepth) return -1;
  fmt::Record& r = t_regions[t_region_depth];
  r = fmt::Record{};
  r.call = uint16_t(region);
  r.comm = fmt::kNoComm;
  r.peer = fmt::kNoPeer;
  r.count = arg;
  // The outermost open call of the thread becomes its current call; a region
  // inside another (or inside a traced call) is still recorded, as events.
  t_outer[t_region_depth] = t_thread.depth == 0;
  t_recorded[t_region_depth] =
      t_outer[t_region_depth] ? CallBegin(r) : RecordEvent(r, fmt::EventKind::kBegin);
  ++t_region_depth;
  return 0;
}

__attribute__((visibility("default"))) int hangtrace_end(int region) {
  if (t_region_depth == 0 || t_regions[t_region_depth - 1].call != uint16_t(region)) return -1;
  --t_region_depth;
  fmt::Record& r = t_regions[t_region_depth];
  if (t_outer[t_region_depth]) {
    CallEnd(r, 0, t_recorded[t_region_depth]);
  } else if (t_recorded[t_region_depth]) {
    RecordEvent(r, fmt::EventKind::kEnd);
  }
  return 0;
}

__attribute__((visibility("default"))) int hangtrace_mark(const char* label) {
  if (!label || !Traced()) return -1;
  uint16_t id = RegisterCall(label, fmt::Api::kUser, fmt::Op::kOther, 0);
  fmt::Record r{};
  r.call = id;
  r.comm = fmt::kNoComm;
  r.peer = fmt::kNoPeer;
  return RecordEvent(r, fmt::EventKind::kMark) ? 0 : -1;
}

__attribute__((visibility("default"))) int hangtrace_capture_stacks(void) {
  if (!Traced()) return 0;
  return CaptureAllStacks(fmt::StackReason::kRequest, 200);
}

}  // extern "C"
