// Which frames of a stack mean "blocked in communication" (or in a device
// sync, a file lock, a sleep): the table the stacks-based evidence reads.
// Traced or not: a Fortran program's mpi_allreduce_, torch.distributed on
// gloo, a program built with another MPI all show here what their trace
// cannot.
#include "merger/stack_calls.h"

#include <cctype>
#include <cstring>
#include <unordered_map>

namespace hangtrace {
namespace {

bool StartsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// A function's name without its parameters ("c10d::Work::wait").
std::string Bare(const std::string& func) { return func.substr(0, func.find('(')); }

// "all_reduce" -> "allreduce": lowercase letters and digits only.
std::string Squash(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (isalnum(static_cast<unsigned char>(c))) out += char(tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// Squashed call names (without their API's prefix) and their op. MPI's
// nonblocking, persistent and v/w forms, NCCL's, torch.distributed's and
// gloo's names for the same operations.
const std::unordered_map<std::string, fmt::Op>& OpTable() {
  static const std::unordered_map<std::string, fmt::Op> table = [] {
    std::unordered_map<std::string, fmt::Op> t;
    auto add = [&](fmt::Op op, std::initializer_list<const char*> names) {
      for (const char* n : names) t.emplace(n, op);
    };
    using fmt::Op;
    add(Op::kAllreduce, {"allreduce", "iallreduce", "allreduceinit", "allreducecoalesced"});
    add(Op::kBcast, {"bcast", "ibcast", "bcastinit", "broadcast", "broadcastobjectlist", "broadcastcoalesced"});
    add(Op::kReduce, {"reduce", "ireduce", "reduceinit", "reducelocal"});
    add(Op::kAllgather, {"allgather", "iallgather", "allgatherv", "iallgatherv", "allgatherintotensor",
                         "allgatherbase", "allgatherobject", "allgathercoalesced", "allgatherintotensorcoalesced",
                         "neighborallgather", "neighborallgatherv"});
    add(Op::kReducescatter, {"reducescatter", "ireducescatter", "reducescatterblock", "ireducescatterblock",
                             "reducescattertensor", "reducescatterbase", "reducescattertensorcoalesced"});
    add(Op::kAlltoall, {"alltoall", "ialltoall", "alltoallv", "ialltoallv", "alltoallw", "ialltoallw",
                        "alltoallsingle", "alltoallbase", "neighboralltoall", "neighboralltoallv"});
    add(Op::kGather, {"gather", "igather", "gatherv", "igatherv", "gatherobject"});
    add(Op::kScatter, {"scatter", "iscatter", "scatterv", "iscatterv", "scatterobjectlist"});
    add(Op::kBarrier, {"barrier", "ibarrier", "monitoredbarrier"});
    add(Op::kScan, {"scan", "iscan", "exscan", "iexscan"});
    add(Op::kSend, {"send", "isend", "ssend", "issend", "bsend", "ibsend", "rsend", "irsend", "sendinit",
                    "ssendinit", "bsendinit", "rsendinit", "sendobject", "waitsend"});
    add(Op::kRecv, {"recv", "irecv", "mrecv", "imrecv", "recvinit", "recvobject", "waitrecv", "recvanysource"});
    add(Op::kSendrecv, {"sendrecv", "sendrecvreplace", "batchisendirecv"});
    add(Op::kWait, {"wait", "waitall", "waitany", "waitsome", "test", "testall", "testany", "testsome"});
    add(Op::kProbe, {"probe", "mprobe"});
    add(Op::kSync, {"streamsynchronize", "devicesynchronize", "eventsynchronize", "ctxsynchronize",
                    "synchronize", "threadsynchronize"});
    add(Op::kCommMgmt, {"init", "initthread", "finalize", "commsplit", "commsplittype", "commdup", "commidup",
                        "commcreate", "commcreategroup", "commfree", "comminitrank", "comminitall",
                        "commsplit", "commdestroy", "commabort", "initprocessgroup", "newgroup",
                        "destroyprocessgroup", "newsubgroups"});
    add(Op::kGroup, {"groupstart", "groupend"});
    return t;
  }();
  return table;
}

fmt::Op OpOf(const std::string& squashed) {
  const auto& t = OpTable();
  auto it = t.find(squashed);
  return it == t.end() ? fmt::Op::kNone : it->second;
}

// A native frame of a communication library, or of a device sync: the name
// users know, or "" when the frame is neither.
struct NativeCall {
  std::string name;
  StackCallKind kind = StackCallKind::kNone;
};
NativeCall NativeCommunication(const std::string& func) {
  const std::string bare = Bare(func);
  auto upper_at = [&](const std::string& s, size_t i) {
    return s.size() > i && isupper(static_cast<unsigned char>(s[i]));
  };
  std::string name = bare;
  if (StartsWith(name, "PMPI_")) name = name.substr(1);
  if (StartsWith(name, "pnccl")) name = name.substr(1);
  // MPI's C names (and Open MPI's C entry behind its Fortran bindings).
  if (StartsWith(name, "MPI_") && upper_at(name, 4)) return {name, StackCallKind::kCommunication};
  if ((StartsWith(name, "nccl") || StartsWith(name, "rccl")) && upper_at(name, 4)) {
    return {name, StackCallKind::kCommunication};
  }
  // Fortran bindings: mpi_allreduce_, mpi_allreduce__, MPI_ALLREDUCE,
  // pmpi_allreduce_, mpi_allreduce_f08, ompi_allreduce_f (Open MPI's).
  {
    std::string lower;
    for (char c : bare) lower += char(tolower(static_cast<unsigned char>(c)));
    for (const char* prefix : {"pmpi_", "mpi_", "ompi_"}) {
      if (!StartsWith(lower, prefix)) continue;
      std::string rest = lower.substr(strlen(prefix));
      for (const char* suffix : {"_f08ts", "_f08", "_f", "__", "_"}) {
        const size_t n = strlen(suffix);
        if (rest.size() > n && rest.compare(rest.size() - n, n, suffix) == 0) {
          rest.resize(rest.size() - n);
          break;
        }
      }
      const bool fortran = lower != bare || lower.back() == '_' || lower.find("_f08") != std::string::npos ||
                           StartsWith(lower, "ompi_");
      if (fortran && OpOf(Squash(rest)) != fmt::Op::kNone) {
        std::string upper = "MPI_";
        for (char c : rest) upper += char(toupper(static_cast<unsigned char>(c)));
        return {upper, StackCallKind::kCommunication};
      }
    }
  }
  if (bare.find("Synchronize") != std::string::npos &&
      (StartsWith(bare, "cuda") || StartsWith(bare, "cu") || StartsWith(bare, "hip"))) {
    return {bare, StackCallKind::kDeviceSync};
  }
  // PyTorch's c10d: a work's wait (the caller of every blocking
  // torch.distributed call), a store's wait (rendezvous, barriers).
  if (StartsWith(bare, "c10d::")) {
    const std::string last = bare.substr(bare.rfind("::") + 2);
    // DistributedDataParallel's reducer waits for its gradient all-reduce
    // at the end of backward.
    if (StartsWith(bare, "c10d::Reducer::")) return {bare, StackCallKind::kCommunication};
    if (last == "wait" || last == "synchronize" || last == "synchronizeInternal") {
      return {bare, StackCallKind::kCommunication};
    }
    if (bare.find("Store::") != std::string::npos && (last == "wait" || last == "get" || last == "doWait" ||
                                                       last == "doGet" || last == "receiveValue")) {
      return {bare, StackCallKind::kCommunication};
    }
  }
  // gloo's collectives and its transport's waits.
  if (StartsWith(bare, "gloo::")) {
    const std::string last = bare.substr(bare.rfind("::") + 2);
    if (OpOf(Squash(last)) != fmt::Op::kNone) return {bare, StackCallKind::kCommunication};
  }
  return {};
}

bool IsFileLock(const std::string& bare) {
  static const char* const kNames[] = {"fcntl", "fcntl64", "__libc_fcntl64", "__fcntl64_nocancel",
                                       "__fcntl64_nocancel_adjusted", "__GI___fcntl64_nocancel", "flock",
                                       "lockf", "lockf64", "__lockf64"};
  for (const char* n : kNames) {
    if (bare == n) return true;
  }
  return false;
}

bool IsSleep(const std::string& bare) {
  static const char* const kNames[] = {"nanosleep", "__nanosleep", "clock_nanosleep", "__clock_nanosleep",
                                       "__GI___clock_nanosleep", "__GI___nanosleep", "sleep", "usleep",
                                       "__clock_nanosleep_time64", "pysleep"};
  for (const char* n : kNames) {
    if (bare == n) return true;
  }
  return false;
}

// A frame of torch.distributed's Python code.
bool IsTorchDistributed(const Frame& f) {
  return f.lang == Frame::Lang::kPython && (f.file.find("torch/distributed/") != std::string::npos ||
                                            f.file.find("distributed_c10d.py") != std::string::npos);
}

}  // namespace

fmt::Op OpOfCallName(const std::string& name) {
  std::string bare = Bare(name);
  for (const char* prefix : {"torch.distributed.", "PMPI_", "MPI_", "pmpi_", "mpi_", "ompi_", "pnccl", "nccl",
                             "rccl", "cuda", "hip", "cu"}) {
    if (StartsWith(bare, prefix)) {
      bare = bare.substr(strlen(prefix));
      break;
    }
  }
  const size_t colons = bare.rfind("::");
  if (colons != std::string::npos) bare = bare.substr(colons + 2);
  return OpOf(Squash(bare));
}

StackCalls::StackCalls(const Job& job) : frames_(job.frames.size()) {
  for (size_t i = 0; i < job.frames.size(); ++i) {
    const Frame& f = job.frames[i];
    Said& said = frames_[i];
    if (IsTorchDistributed(f)) {
      said.torch = true;
      said.op = OpOf(Squash(f.func));
      said.name = "torch.distributed." + f.func;
      continue;
    }
    if (f.lang != Frame::Lang::kNative || f.func.empty()) continue;
    const std::string bare = Bare(f.func);
    const NativeCall c = NativeCommunication(f.func);
    if (c.kind != StackCallKind::kNone) {
      said.kind = c.kind;
      said.name = c.name;
      said.op = c.kind == StackCallKind::kDeviceSync      ? fmt::Op::kSync
                : c.name.rfind("c10d::Reducer::", 0) == 0 ? fmt::Op::kAllreduce
                                                          : OpOfCallName(c.name);
      if (said.op == fmt::Op::kNone) said.op = fmt::Op::kOther;
    } else if (IsFileLock(bare)) {
      said.kind = StackCallKind::kFileLock;
      said.op = fmt::Op::kOther;
      said.name = bare.find("flock") != std::string::npos   ? "flock (a file lock)"
                  : bare.find("lockf") != std::string::npos ? "lockf (a file lock)"
                                                            : "fcntl (a file lock)";
    } else if (IsSleep(bare)) {
      said.kind = StackCallKind::kSleep;
      said.name = bare;
    }
  }
}

bool IsCollectiveCall(fmt::Op op, const std::string& name) {
  if (IsCollectiveOp(op)) return true;
  static const char* const kCollective[] = {
      "MPI_Win_fence",      "MPI_Win_create",      "MPI_Win_allocate", "MPI_Win_create_dynamic",
      "MPI_Win_free",       "MPI_File_open",       "MPI_File_close",   "MPI_File_set_view",
      "MPI_File_set_size",  "MPI_File_preallocate", "MPI_File_sync",   "MPI_File_set_atomicity",
      "MPI_File_set_info"};
  for (const char* c : kCollective) {
    if (name == c || (name.size() > strlen(c) && name.compare(0, strlen(c), c) == 0 && name[strlen(c)] == '_')) {
      return true;  // MPI_Win_allocate_shared with MPI_Win_allocate
    }
  }
  // MPI-IO's collective data access: *_all, *_all_begin/_end, *_ordered...
  return name.rfind("MPI_File_", 0) == 0 &&
         (name.find("_all") != std::string::npos || name.find("_ordered") != std::string::npos);
}

StackCall StackCalls::Find(const ThreadStack& t) const {
  StackCall native, lock, sleep, torch;
  for (size_t i = 0; i < t.frames.size(); ++i) {
    if (t.frames[i] >= frames_.size()) continue;
    const Said& f = frames_[t.frames[i]];
    if (f.torch) {
      // The outermost frame of the innermost run of torch.distributed
      // frames that names an operation: the call the program made
      // (all_gather_object, not the all_gather it calls).
      if (torch.kind == StackCallKind::kNone || torch.frame + 1 == i) {
        if (f.op != fmt::Op::kNone) torch = {StackCallKind::kCommunication, f.name, f.op, i};
        else if (torch.kind != StackCallKind::kNone) torch.frame = i;  // the run goes on
      }
      continue;
    }
    StackCall* slot = f.kind == StackCallKind::kCommunication || f.kind == StackCallKind::kDeviceSync ? &native
                      : f.kind == StackCallKind::kFileLock                                         ? &lock
                      : f.kind == StackCallKind::kSleep                                            ? &sleep
                                                                                                   : nullptr;
    if (slot && slot->kind == StackCallKind::kNone) *slot = {f.kind, f.name, f.op, i};
  }
  // A thread the dump found in a lock's system call, with no frame that
  // says so (a stack read from the kernel only).
  if (lock.kind == StackCallKind::kNone && (t.state == "S" || t.state == "D")) {
    const std::string sc = SyscallName(t.syscall);
    if (sc == "fcntl" || sc == "flock") lock = {StackCallKind::kFileLock, sc + " (a file lock)", fmt::Op::kOther, 0};
  }
  if (torch.kind != StackCallKind::kNone) return torch;
  if (native.kind != StackCallKind::kNone) return native;
  if (lock.kind != StackCallKind::kNone) return lock;
  return sleep;
}

std::string SyscallName(const std::string& number) {
  if (number.empty() || !isdigit(static_cast<unsigned char>(number[0]))) return number;
  // The blocking calls a hung rank sits in, by this architecture's numbers.
  struct Entry {
    int nr;
    const char* name;
  };
#if defined(__x86_64__)
  static const Entry kTable[] = {
      {0, "read"},        {1, "write"},          {7, "poll"},          {17, "pread64"},    {19, "readv"},
      {23, "select"},     {24, "sched_yield"},   {34, "pause"},        {35, "nanosleep"},  {43, "accept"},
      {44, "sendto"},     {45, "recvfrom"},      {46, "sendmsg"},      {47, "recvmsg"},    {61, "wait4"},
      {72, "fcntl"},      {73, "flock"},         {74, "fsync"},        {202, "futex"},     {230, "clock_nanosleep"},
      {232, "epoll_wait"}, {270, "pselect6"},    {271, "ppoll"},       {281, "epoll_pwait"}, {288, "accept4"},
      {299, "recvmmsg"},  {307, "sendmmsg"},     {441, "epoll_pwait2"}, {16, "ioctl"},     {62, "kill"},
  };
#elif defined(__aarch64__)
  static const Entry kTable[] = {
      {63, "read"},       {64, "write"},         {73, "ppoll"},        {72, "pselect6"},   {98, "futex"},
      {101, "nanosleep"}, {115, "clock_nanosleep"}, {124, "sched_yield"}, {202, "accept"}, {206, "sendto"},
      {207, "recvfrom"},  {211, "sendmsg"},      {212, "recvmsg"},     {25, "fcntl"},      {32, "flock"},
      {22, "epoll_pwait"}, {29, "ioctl"},        {260, "wait4"},       {242, "accept4"},   {82, "fsync"},
  };
#else
  static const Entry kTable[] = {{-1, ""}};
#endif
  const int nr = atoi(number.c_str());
  for (const Entry& e : kTable) {
    if (e.nr == nr) return e.name;
  }
  return "syscall " + number;
}

}  // namespace hangtrace
