// Names of the on-disk enums, for readers and reports.
#include "tracer/format.h"

#include <cstring>

namespace hangtrace::fmt {

Layout LayOut(const Capacities& c, uint32_t align) {
  struct Entry {
    uint32_t id, count, size;
  };
  // File order: what the writer fills at start, then what it fills on demand.
  const Entry order[kNumSections] = {
      {kSecProcess, 1, sizeof(ProcessInfo)},
      {kSecCalls, c.calls, sizeof(CallInfo)},
      {kSecComms, c.comms, sizeof(CommEntry)},
      {kSecMembers, c.members, sizeof(int32_t)},
      {kSecThreads, c.threads, sizeof(ThreadSlot)},
      {kSecStacks, c.stacks, sizeof(StackSlot)},
      {kSecNames, c.names, sizeof(NameEntry)},
      {kSecModules, c.modules, sizeof(ModuleEntry)},
      {kSecPyFrames, c.pyframes, sizeof(PyFrame)},
      {kSecRing, c.threads * c.lane_slots, sizeof(Record)},
  };
  Layout l{};
  uint64_t off = kHeaderSize;
  for (const Entry& e : order) {
    if (e.id == kSecModules) l.prealloc_end = off;
    l.sections[e.id] = {off, e.count, e.size};
    off = (off + uint64_t(e.count) * e.size + align - 1) / align * align;
  }
  l.file_size = off;
  return l;
}

void FillHeader(FileHeader* h, const Layout& layout, uint32_t lane_slots, uint64_t features) {
  memcpy(h->magic, kMagic, 8);
  h->version = kVersion;
  h->oldest_readable = kOldestReadable;
  h->endian_tag = kEndianTag;
  h->header_size = kHeaderSize;
  h->record_size = kRecordSize;
  h->features = features;
  h->file_size = layout.file_size;
  h->section_count = kNumSections;
  h->lane_slots = lane_slots;
  memcpy(h->sections, layout.sections, sizeof(layout.sections));
}

const char* PythonStatusName(PythonStatus s) {
  switch (s) {
    case PythonStatus::kNone: return "none";
    case PythonStatus::kCaptured: return "captured";
    case PythonStatus::kUnsupported: return "unsupported version";
    case PythonStatus::kNoDumper: return "no frame dumper (stripped build)";
    case PythonStatus::kNotRunning: return "interpreter not running";
    case PythonStatus::kFailed: return "failed";
  }
  return "unknown";
}

const char* OpName(Op op) {
  switch (op) {
#define HT_OP_NAME(e, v, name) \
  case Op::e:                  \
    return name;
    HANGTRACE_OPS(HT_OP_NAME)
#undef HT_OP_NAME
  }
  return "unknown";
}

const char* ApiName(Api api) {
  switch (api) {
    case Api::kUnknown: return "unknown";
    case Api::kMpi: return "MPI";
    case Api::kNccl: return "NCCL";
    case Api::kCuda: return "CUDA";
    case Api::kHip: return "HIP";
    case Api::kUser: return "user";
    case Api::kTorch: return "torch";
  }
  return "unknown";
}

const char* DtypeName(Dtype d) {
  switch (d) {
    case Dtype::kNone: return "none";
    case Dtype::kInt8: return "int8";
    case Dtype::kUint8: return "uint8";
    case Dtype::kInt16: return "int16";
    case Dtype::kUint16: return "uint16";
    case Dtype::kInt32: return "int32";
    case Dtype::kUint32: return "uint32";
    case Dtype::kInt64: return "int64";
    case Dtype::kUint64: return "uint64";
    case Dtype::kFloat16: return "float16";
    case Dtype::kBfloat16: return "bfloat16";
    case Dtype::kFloat32: return "float32";
    case Dtype::kFloat64: return "float64";
    case Dtype::kByte: return "byte";
    case Dtype::kChar: return "char";
    case Dtype::kBool: return "bool";
    case Dtype::kFloat8e4m3: return "float8e4m3";
    case Dtype::kFloat8e5m2: return "float8e5m2";
    case Dtype::kLongDouble: return "long_double";
    case Dtype::kPair: return "pair";
    case Dtype::kOther: return "other";
  }
  return "unknown";
}

const char* RedopName(Redop r) {
  switch (r) {
    case Redop::kNone: return "none";
    case Redop::kSum: return "sum";
    case Redop::kProd: return "prod";
    case Redop::kMax: return "max";
    case Redop::kMin: return "min";
    case Redop::kAvg: return "avg";
    case Redop::kBand: return "band";
    case Redop::kBor: return "bor";
    case Redop::kBxor: return "bxor";
    case Redop::kLand: return "land";
    case Redop::kLor: return "lor";
    case Redop::kLxor: return "lxor";
    case Redop::kMaxloc: return "maxloc";
    case Redop::kMinloc: return "minloc";
    case Redop::kReplace: return "replace";
    case Redop::kOther: return "other";
  }
  return "unknown";
}

const char* CommKindName(CommKind k) {
  switch (k) {
    case CommKind::kUnknown: return "unknown";
    case CommKind::kMpi: return "MPI";
    case CommKind::kNccl: return "NCCL";
    case CommKind::kRccl: return "RCCL";
    case CommKind::kUser: return "user";
    case CommKind::kTorch: return "torch";
    case CommKind::kMpiWindow: return "MPI window";
    case CommKind::kMpiFile: return "MPI file";
  }
  return "unknown";
}

const char* ProcStateName(ProcState s) {
  switch (s) {
    case ProcState::kStarting: return "starting";
    case ProcState::kRunning: return "running";
    case ProcState::kExited: return "exited";
    case ProcState::kCrashed: return "crashed";
    case ProcState::kExeced: return "exec'ed";
  }
  return "unknown";
}

const char* RankSourceName(RankSource s) {
  switch (s) {
    case RankSource::kNone: return "none";
    case RankSource::kEnvOmpi: return "OMPI_COMM_WORLD_RANK";
    case RankSource::kEnvPmi: return "PMI_RANK";
    case RankSource::kEnvPmix: return "PMIX_RANK";
    case RankSource::kEnvSlurm: return "SLURM_PROCID";
    case RankSource::kEnvTorch: return "RANK";
    case RankSource::kMpi: return "MPI_Comm_rank";
    case RankSource::kInherited: return "inherited from parent";
    case RankSource::kNccl: return "NCCL";
    case RankSource::kTorch: return "torch.distributed";
  }
  return "unknown";
}

const char* EventKindName(EventKind k) {
  switch (k) {
    case EventKind::kEmpty: return "empty";
    case EventKind::kBegin: return "BEGIN";
    case EventKind::kEnd: return "END";
    case EventKind::kMark: return "MARK";
    case EventKind::kComplete: return "COMPLETE";
    case EventKind::kWatchdog: return "WATCHDOG";
    case EventKind::kDevicePending: return "PENDING";
  }
  return "unknown";
}

}  // namespace hangtrace::fmt
