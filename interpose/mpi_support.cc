#include "interpose/mpi_support.h"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "interpose/dlsym.h"
#include "tracer/handle_map.h"
#include "tracer/hash.h"

namespace hangtrace::HT_MPI_NS {

// What the wrappers read inline (mpi_support.h).
EnumCache g_dtype_cache, g_redop_cache;
uint32_t g_comm_epoch = 0;
EnumCache g_fortran_dtype_cache, g_fortran_redop_cache;
constinit thread_local MpiThread t_mpi __attribute__((tls_model("initial-exec")));

namespace {

// Under g_comm_lock. The epoch never becomes kNoEpoch, which marks an
// empty LastCommOf.
void BumpCommEpoch() {
  if (__atomic_add_fetch(&g_comm_epoch, 1, __ATOMIC_RELEASE) == kNoEpoch) {
    __atomic_add_fetch(&g_comm_epoch, 1, __ATOMIC_RELEASE);
  }
}

// --- the real functions ------------------------------------------------------

// The real function in `slot`, found at its first use (the support code's
// own calls into MPI; the wrappers bind theirs with Resolve).
template <typename F>
F* Real(F*& slot, const char* name) {
  F* f = __atomic_load_n(&slot, __ATOMIC_ACQUIRE);
  return __builtin_expect(f != nullptr, 1) ? f : Resolve(slot, name);
}
#define HT_PMPI(fn) (*Real(g_##fn, "P" #fn))
decltype(&PMPI_Comm_size) g_MPI_Comm_size;
decltype(&PMPI_Comm_rank) g_MPI_Comm_rank;
decltype(&PMPI_Comm_test_inter) g_MPI_Comm_test_inter;
decltype(&PMPI_Comm_group) g_MPI_Comm_group;
decltype(&PMPI_Comm_remote_group) g_MPI_Comm_remote_group;
decltype(&PMPI_Group_size) g_MPI_Group_size;
decltype(&PMPI_Group_translate_ranks) g_MPI_Group_translate_ranks;
decltype(&PMPI_Group_free) g_MPI_Group_free;
decltype(&PMPI_Initialized) g_MPI_Initialized;
#if !HT_MPI_NO_FORTRAN
decltype(&PMPI_Comm_f2c) g_MPI_Comm_f2c;
decltype(&PMPI_Type_f2c) g_MPI_Type_f2c;
decltype(&PMPI_Op_f2c) g_MPI_Op_f2c;
decltype(&PMPI_Status_f2c) g_MPI_Status_f2c;
decltype(&PMPI_Request_f2c) g_MPI_Request_f2c;
decltype(&PMPI_Message_f2c) g_MPI_Message_f2c;
#endif
decltype(&PMPI_Finalized) g_MPI_Finalized;

#if HT_MPICH
// MPICH's predefined handles are integer constants of its mpi.h, the same
// in every library of its ABI (MPICH, Intel MPI, Cray MPICH, MVAPICH).
struct NamedDtype {
  MPI_Datatype handle;
  fmt::Dtype value;
};
constexpr NamedDtype kDtypes[] = {
    {MPI_CHAR, fmt::Dtype::kChar},        {MPI_SIGNED_CHAR, fmt::Dtype::kInt8},
    {MPI_UNSIGNED_CHAR, fmt::Dtype::kUint8}, {MPI_BYTE, fmt::Dtype::kByte},
    {MPI_SHORT, fmt::Dtype::kInt16},      {MPI_UNSIGNED_SHORT, fmt::Dtype::kUint16},
    {MPI_INT, fmt::Dtype::kInt32},        {MPI_UNSIGNED, fmt::Dtype::kUint32},
    {MPI_LONG, fmt::Dtype::kInt64},       {MPI_UNSIGNED_LONG, fmt::Dtype::kUint64},
    {MPI_LONG_LONG_INT, fmt::Dtype::kInt64}, {MPI_UNSIGNED_LONG_LONG, fmt::Dtype::kUint64},
    {MPI_INT8_T, fmt::Dtype::kInt8},      {MPI_UINT8_T, fmt::Dtype::kUint8},
    {MPI_INT16_T, fmt::Dtype::kInt16},    {MPI_UINT16_T, fmt::Dtype::kUint16},
    {MPI_INT32_T, fmt::Dtype::kInt32},    {MPI_UINT32_T, fmt::Dtype::kUint32},
    {MPI_INT64_T, fmt::Dtype::kInt64},    {MPI_UINT64_T, fmt::Dtype::kUint64},
    {MPI_FLOAT, fmt::Dtype::kFloat32},    {MPI_DOUBLE, fmt::Dtype::kFloat64},
    {MPI_LONG_DOUBLE, fmt::Dtype::kLongDouble}, {MPI_C_BOOL, fmt::Dtype::kBool},
    {MPI_FLOAT_INT, fmt::Dtype::kPair},   {MPI_DOUBLE_INT, fmt::Dtype::kPair},
    {MPI_LONG_INT, fmt::Dtype::kPair},    {MPI_2INT, fmt::Dtype::kPair},
    {MPI_SHORT_INT, fmt::Dtype::kPair},   {MPI_LONG_DOUBLE_INT, fmt::Dtype::kPair},
    {MPI_INTEGER, fmt::Dtype::kInt32},    {MPI_INTEGER4, fmt::Dtype::kInt32},
    {MPI_INTEGER8, fmt::Dtype::kInt64},   {MPI_REAL, fmt::Dtype::kFloat32},
    {MPI_REAL4, fmt::Dtype::kFloat32},    {MPI_REAL8, fmt::Dtype::kFloat64},
    {MPI_DOUBLE_PRECISION, fmt::Dtype::kFloat64}, {MPI_LOGICAL, fmt::Dtype::kInt32},
    {MPI_CHARACTER, fmt::Dtype::kChar},
    {MPI_DATATYPE_NULL, fmt::Dtype::kNone},
};
struct NamedRedop {
  MPI_Op handle;
  fmt::Redop value;
};
constexpr NamedRedop kRedops[] = {
    {MPI_SUM, fmt::Redop::kSum},   {MPI_PROD, fmt::Redop::kProd},  {MPI_MAX, fmt::Redop::kMax},
    {MPI_MIN, fmt::Redop::kMin},   {MPI_BAND, fmt::Redop::kBand},  {MPI_BOR, fmt::Redop::kBor},
    {MPI_BXOR, fmt::Redop::kBxor}, {MPI_LAND, fmt::Redop::kLand},  {MPI_LOR, fmt::Redop::kLor},
    {MPI_LXOR, fmt::Redop::kLxor}, {MPI_MAXLOC, fmt::Redop::kMaxloc}, {MPI_MINLOC, fmt::Redop::kMinloc},
    {MPI_REPLACE, fmt::Redop::kReplace}, {MPI_OP_NULL, fmt::Redop::kNone},
};
#else
// Open MPI's predefined handles are addresses of data symbols in libmpi
// (MPI_COMM_WORLD is &ompi_mpi_comm_world). They are looked up by name when
// MPI is first called (FindMpi), never referenced at link time: libmpi
// may arrive by dlopen after start-up, and a program without MPI must load
// libhangtrace.so without it. Nothing here uses mpi.h's handle macros.
struct NamedDtype {
  const char* symbol;
  fmt::Dtype value;
};
constexpr NamedDtype kDtypes[] = {
    {"ompi_mpi_char", fmt::Dtype::kChar},       {"ompi_mpi_signed_char", fmt::Dtype::kInt8},
    {"ompi_mpi_unsigned_char", fmt::Dtype::kUint8}, {"ompi_mpi_byte", fmt::Dtype::kByte},
    {"ompi_mpi_short", fmt::Dtype::kInt16},     {"ompi_mpi_unsigned_short", fmt::Dtype::kUint16},
    {"ompi_mpi_int", fmt::Dtype::kInt32},       {"ompi_mpi_unsigned", fmt::Dtype::kUint32},
    {"ompi_mpi_long", fmt::Dtype::kInt64},      {"ompi_mpi_unsigned_long", fmt::Dtype::kUint64},
    {"ompi_mpi_long_long_int", fmt::Dtype::kInt64}, {"ompi_mpi_unsigned_long_long", fmt::Dtype::kUint64},
    {"ompi_mpi_int8_t", fmt::Dtype::kInt8},     {"ompi_mpi_uint8_t", fmt::Dtype::kUint8},
    {"ompi_mpi_int16_t", fmt::Dtype::kInt16},   {"ompi_mpi_uint16_t", fmt::Dtype::kUint16},
    {"ompi_mpi_int32_t", fmt::Dtype::kInt32},   {"ompi_mpi_uint32_t", fmt::Dtype::kUint32},
    {"ompi_mpi_int64_t", fmt::Dtype::kInt64},   {"ompi_mpi_uint64_t", fmt::Dtype::kUint64},
    {"ompi_mpi_float", fmt::Dtype::kFloat32},   {"ompi_mpi_double", fmt::Dtype::kFloat64},
    {"ompi_mpi_long_double", fmt::Dtype::kLongDouble}, {"ompi_mpi_c_bool", fmt::Dtype::kBool},
    {"ompi_mpi_float_int", fmt::Dtype::kPair},  {"ompi_mpi_double_int", fmt::Dtype::kPair},
    {"ompi_mpi_long_int", fmt::Dtype::kPair},   {"ompi_mpi_2int", fmt::Dtype::kPair},
    {"ompi_mpi_short_int", fmt::Dtype::kPair},  {"ompi_mpi_longdbl_int", fmt::Dtype::kPair},
    // Fortran's (a Fortran program's handles, made C ones by MPI_Type_f2c)
    {"ompi_mpi_integer", fmt::Dtype::kInt32},  {"ompi_mpi_integer4", fmt::Dtype::kInt32},
    {"ompi_mpi_integer8", fmt::Dtype::kInt64}, {"ompi_mpi_real", fmt::Dtype::kFloat32},
    {"ompi_mpi_real4", fmt::Dtype::kFloat32},  {"ompi_mpi_real8", fmt::Dtype::kFloat64},
    {"ompi_mpi_dblprec", fmt::Dtype::kFloat64}, {"ompi_mpi_logical", fmt::Dtype::kInt32},
    {"ompi_mpi_character", fmt::Dtype::kChar},
    {"ompi_mpi_datatype_null", fmt::Dtype::kNone},
};
struct NamedRedop {
  const char* symbol;
  fmt::Redop value;
};
constexpr NamedRedop kRedops[] = {
    {"ompi_mpi_op_sum", fmt::Redop::kSum},   {"ompi_mpi_op_prod", fmt::Redop::kProd},
    {"ompi_mpi_op_max", fmt::Redop::kMax},   {"ompi_mpi_op_min", fmt::Redop::kMin},
    {"ompi_mpi_op_band", fmt::Redop::kBand}, {"ompi_mpi_op_bor", fmt::Redop::kBor},
    {"ompi_mpi_op_bxor", fmt::Redop::kBxor}, {"ompi_mpi_op_land", fmt::Redop::kLand},
    {"ompi_mpi_op_lor", fmt::Redop::kLor},   {"ompi_mpi_op_lxor", fmt::Redop::kLxor},
    {"ompi_mpi_op_maxloc", fmt::Redop::kMaxloc}, {"ompi_mpi_op_minloc", fmt::Redop::kMinloc},
    {"ompi_mpi_op_replace", fmt::Redop::kReplace}, {"ompi_mpi_op_null", fmt::Redop::kNone},
};
#endif
constexpr size_t kNumDtypes = sizeof(kDtypes) / sizeof(kDtypes[0]);
constexpr size_t kNumRedops = sizeof(kRedops) / sizeof(kRedops[0]);

// The handles, filled once by FindMpi before g_mpi_library says kReady
// (release), read by every wrapper after it (acquire): no lock on the way.
struct MpiHandles {
  MPI_Comm world{}, self{}, null{};
  MPI_Request request_null{};
  MPI_Datatype dtypes[kNumDtypes] = {};
  MPI_Op redops[kNumRedops] = {};
};
MpiHandles g_handles;

}  // namespace

uint8_t DtypeSlow(MPI_Datatype d) {
  for (size_t i = 0; i < kNumDtypes; ++i) {
    if (g_handles.dtypes[i] == d) return uint8_t(kDtypes[i].value);
  }
  return uint8_t(fmt::Dtype::kOther);
}

uint8_t RedopSlow(MPI_Op op) {
  for (size_t i = 0; i < kNumRedops; ++i) {
    if (g_handles.redops[i] == op) return uint8_t(kRedops[i].value);
  }
  return uint8_t(fmt::Redop::kOther);
}

namespace {

// --- communicators -------------------------------------------------------------

// Handle -> index in the file's comm table (writers hold g_comm_lock).
HandleMap<8192> g_comm_map;
pthread_mutex_t g_comm_lock = PTHREAD_MUTEX_INITIALIZER;
// MPI_Comm_create_group and intercomms: creations so far per (parent, members)
// key, since no parent-wide counter is shared by every member.
std::map<uint64_t, uint32_t>* g_keyed_counters;

// World ranks of a communicator's members (local group, then the remote
// group of an intercomm), by local group translation: no communication.
std::vector<int32_t> WorldRanks(MPI_Comm comm, bool remote) {
  std::vector<int32_t> out;
  MPI_Group group, world;
  if ((remote ? HT_PMPI(MPI_Comm_remote_group)(comm, &group) : HT_PMPI(MPI_Comm_group)(comm, &group)) !=
      MPI_SUCCESS) {
    return out;
  }
  HT_PMPI(MPI_Comm_group)(g_handles.world, &world);
  int n = 0;
  HT_PMPI(MPI_Group_size)(group, &n);
  std::vector<int> in(size_t(std::max(n, 0))), ranks(size_t(std::max(n, 0)));
  for (int i = 0; i < n; ++i) in[size_t(i)] = i;
  if (n > 0 && HT_PMPI(MPI_Group_translate_ranks)(group, n, in.data(), world, ranks.data()) == MPI_SUCCESS) {
    out.assign(ranks.begin(), ranks.end());
  }
  HT_PMPI(MPI_Group_free)(&group);
  HT_PMPI(MPI_Group_free)(&world);
  return out;
}

uint64_t HashRanks(const std::vector<int32_t>& ranks) {
  uint64_t h = 0x6d656d62657273ull;  // "members"
  for (int32_t r : ranks) h = Combine(h, uint64_t(uint32_t(r)));
  return h;
}

struct NewComm {
  uint64_t id = 0;
  uint64_t parent_id = 0;
  uint16_t creator_call = fmt::kNoCall;
  int color = -1, key = -1;
  uint32_t parent_counter = 0;
  const char* label = nullptr;
  bool world = false;
  fmt::CommKind kind = fmt::CommKind::kMpi;
};

// Registers the communicator, window or file whose handle's key is
// `handle` (g_comm_lock held) and returns its index. `facts`: the comm to
// ask for size, rank and kind (the parent for a comm that is not usable
// yet, a window's or file's communicator).
uint16_t RegisterLocked(uint64_t handle, MPI_Comm facts, const NewComm& n, const std::vector<int32_t>& members) {
  CommDesc d;
  d.id = n.id;
  d.parent_id = n.parent_id;
  d.kind = n.kind;
  d.creator_call = n.creator_call;
  d.color = n.color;
  d.key = n.key;
  d.parent_counter = n.parent_counter;
  d.handle = handle;
  d.label = n.label;
  int inter = 0;
  HT_PMPI(MPI_Comm_test_inter)(facts, &inter);
  int size = 0, rank = -1;
  HT_PMPI(MPI_Comm_size)(facts, &size);
  HT_PMPI(MPI_Comm_rank)(facts, &rank);
  d.size = size;
  d.my_index = rank;
  if (inter) d.flags |= fmt::kCommInter;
  if (n.world) {
    d.flags |= fmt::kCommWorld;
  } else if (!members.empty()) {
    d.members = members.data();
    d.size = int32_t(members.size());
  }
  uint16_t index = RegisterComm(d);
  if (index != fmt::kNoComm) {
    g_comm_map.Map(handle, index);
    BumpCommEpoch();
  }
  return index;
}

uint64_t CommIdOf(uint16_t index) {
  if (!g_trace || index >= fmt::kMaxComms) return 0;
  return g_trace->comms[index].id;
}

int32_t WorldRank() { return g_trace ? g_trace->process->rank : -1; }

// --- pending requests ------------------------------------------------------------

// Markers of the request table's keys (HandleKey never returns them).
constexpr uint64_t kEmpty = 0, kTomb = 1, kBusy = 2;

struct RequestSlot {
  uint64_t key;
  fmt::Record rec;
};
constexpr size_t kRequestsSize = 1 << 16;
RequestSlot g_requests[kRequestsSize];

// Open addressing over a table of `n` slots (a power of two).
void Store(RequestSlot* table, size_t n, uint64_t key, const fmt::Record& r) {
  size_t tomb = SIZE_MAX;
  for (size_t i = Mix(key) & (n - 1), k = 0; k < n; i = (i + 1) & (n - 1), ++k) {
    uint64_t cur = __atomic_load_n(&table[i].key, __ATOMIC_ACQUIRE);
    size_t at = SIZE_MAX;
    if (cur == key) at = i;  // a stale entry of a recycled handle
    else if (cur == kTomb && tomb == SIZE_MAX) tomb = i;
    else if (cur == kEmpty) at = tomb != SIZE_MAX ? tomb : i;
    if (at == SIZE_MAX) continue;
    uint64_t expected = table[at].key;
    if (expected == kBusy ||
        !__atomic_compare_exchange_n(&table[at].key, &expected, kBusy, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      tomb = SIZE_MAX;  // lost the race: look again from here
      continue;
    }
    table[at].rec = r;
    __atomic_store_n(&table[at].key, key, __ATOMIC_RELEASE);
    return;
  }
  if (g_trace) __atomic_fetch_add(&g_trace->header->counters.dropped, 1, __ATOMIC_RELAXED);
}

// Copies out the entry of `key`; `take`: and frees its slot.
bool Find(RequestSlot* table, size_t n, uint64_t key, fmt::Record* out, bool take) {
  for (size_t i = Mix(key) & (n - 1), k = 0; k < n; i = (i + 1) & (n - 1), ++k) {
    uint64_t cur = __atomic_load_n(&table[i].key, __ATOMIC_ACQUIRE);
    if (cur == key) {
      *out = table[i].rec;
      if (take) __atomic_store_n(&table[i].key, kTomb, __ATOMIC_RELEASE);
      return take || __atomic_load_n(&table[i].key, __ATOMIC_ACQUIRE) == key;
    }
    if (cur == kEmpty) return false;
  }
  return false;
}

// Requests in flight: posted, not yet retired.
void Remember(uint64_t key, const fmt::Record& r) { Store(g_requests, kRequestsSize, key, r); }
bool Take(uint64_t key, fmt::Record* out) { return Find(g_requests, kRequestsSize, key, out, /*take=*/true); }

// Persistent requests, by handle: their parameters, kept until the handle
// is made again (a freed handle that MPI recycles is overwritten then).
constexpr size_t kPersistentSize = 1 << 12;
RequestSlot g_persistent[kPersistentSize];
void KeepPersistent(uint64_t key, const fmt::Record& r) { Store(g_persistent, kPersistentSize, key, r); }
bool FindPersistent(uint64_t key, fmt::Record* out) {
  return Find(g_persistent, kPersistentSize, key, out, /*take=*/false);
}

thread_local std::vector<MPI_Request>* t_saved;
thread_local std::vector<MPI_Status>* t_statuses;

// The thread's buffer of `count` saved requests (one completion call per
// thread at a time, C or Fortran): grows rarely, then no allocation.
MPI_Request* SavedRequests(int count) {
  if (!t_saved) t_saved = new std::vector<MPI_Request>();
  const size_t n = size_t(std::max(count, 0));
  if (t_saved->size() < n) t_saved->resize(n);
  return t_saved->data();
}

}  // namespace

// ---------------------------------------------------------------------------

// The MPI libraries hangtrace looks in when the global scope has no MPI:
// one opened with RTLD_LOCAL (a Python extension's libmpi) is found by soname.
const char* const kMpiLibraries[] = {"libmpi.so.40", "libmpi.so.12", "libmpich.so.12", "libmpi.so"};

// glibc's dlsym throughout (RealDlsym): our exported dlsym consults this.
void* FindReal(const char* name) {
  void* f = RealDlsym(RTLD_NEXT, name);
  if (!f) f = RealDlsym(RTLD_DEFAULT, name);
  for (const char* lib : kMpiLibraries) {
    if (f) break;
    if (void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD)) {
      f = RealDlsym(h, name);
      dlclose(h);  // NOLOAD took a reference; the library stays loaded
    }
  }
  return f;
}

int NoSuchMpiFunction() {
  static bool said = false;
  if (!__atomic_exchange_n(&said, true, __ATOMIC_ACQ_REL)) {
    WriteStderrLine("hangtrace: an MPI function was called that no loaded MPI library defines; it returns "
                    "MPI_ERR_OTHER (untraced, the call could not have been made)");
  }
  return 16;  // MPI_ERR_OTHER in Open MPI, MPI_ERR_INTERN in MPICH: an error either way
}

void* ResolveReal(const char* name) {
  void* f = FindReal(name);
  if (!f && name[0] == 'P') {
    // An MPI without this PMPI_ entry point: its own MPI_ function, the
    // next definition after this library's, untraced below the wrapper.
    f = RealDlsym(RTLD_NEXT, name + 1);
  }
  return f ? f : reinterpret_cast<void*>(&NoSuchMpiFunction);
}

#if !HT_MPI_NO_FORTRAN  // MPICH's Fortran bindings call the C functions
MPI_Comm FortranComm(MPI_Fint comm) { return HT_PMPI(MPI_Comm_f2c)(comm); }
MPI_Datatype FortranType(MPI_Fint type) { return HT_PMPI(MPI_Type_f2c)(type); }
MPI_Op FortranOp(MPI_Fint op) { return HT_PMPI(MPI_Op_f2c)(op); }
uint8_t FortranDtypeSlow(MPI_Fint type) { return Dtype(FortranType(type)); }
uint8_t FortranRedopSlow(MPI_Fint op) { return Redop(FortranOp(op)); }

uint16_t FortranCommIndexSlow(MPI_Fint comm) {
  const uint32_t epoch = __atomic_load_n(&g_comm_epoch, __ATOMIC_ACQUIRE);
  const uint16_t index = CommIndex(FortranComm(comm));
  if (index != fmt::kNoComm) t_mpi.fortran_comm = {comm, epoch, index, StreamWhere(index)};
  return index;
}

MPI_Request FortranRequest(MPI_Fint request) { return HT_PMPI(MPI_Request_f2c)(request); }
MPI_Message FortranMessage(MPI_Fint message) { return HT_PMPI(MPI_Message_f2c)(message); }

namespace {
// Where a Fortran program's MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE point:
// MPI_F_STATUS(ES)_IGNORE (MPI-3) hold the library's; mpif.h's common blocks
// may have a copy in the program under any compiler's name; `use mpi_f08`
// has its own.
bool FortranStatusIgnored(const MPI_Fint* s) {
  static const std::vector<const MPI_Fint*> sentinels = [] {
    std::vector<const MPI_Fint*> v;
    for (const char* var : {"MPI_F_STATUS_IGNORE", "MPI_F_STATUSES_IGNORE"}) {
      if (void* p = RealDlsym(RTLD_DEFAULT, var)) v.push_back(*static_cast<MPI_Fint* const*>(p));
    }
    for (const char* common : {"mpi_fortran_status_ignore", "mpi_fortran_statuses_ignore"}) {
      const std::string base = common;
      for (const std::string& name : {base + "_", base, base + "__"}) {
        if (void* p = RealDlsym(RTLD_DEFAULT, name.c_str())) v.push_back(static_cast<const MPI_Fint*>(p));
      }
      std::string upper = base;
      for (char& ch : upper) ch = char(toupper(ch));
      if (void* p = RealDlsym(RTLD_DEFAULT, upper.c_str())) v.push_back(static_cast<const MPI_Fint*>(p));
    }
    for (const char* f08 : {"mpi_f08_status_ignore", "mpi_f08_statuses_ignore"}) {
      if (void* p = RealDlsym(RTLD_DEFAULT, f08)) v.push_back(static_cast<const MPI_Fint*>(p));
    }
    return v;
  }();
  return std::find(sentinels.begin(), sentinels.end(), s) != sentinels.end();
}
}  // namespace

const MPI_Status* FortranStatus(const MPI_Fint* statuses, int k, MPI_Status* out) {
  if (!statuses || FortranStatusIgnored(statuses)) return nullptr;
  const MPI_Fint* s = statuses + size_t(k) * (sizeof(MPI_Status) / sizeof(MPI_Fint));
  return HT_PMPI(MPI_Status_f2c)(s, out) == MPI_SUCCESS ? out : nullptr;
}

void ResolveFortranReceive(fmt::Record& r, const MPI_Fint* status) {
  if (!(r.flags & (fmt::kRecAnyPeer | fmt::kRecAnyTag))) return;
  MPI_Status c;
  if (const MPI_Status* st = FortranStatus(status, 0, &c)) ResolveReceive(r, st);
}

void FortranCommNamed(MPI_Fint comm, const char* name, int len) {
  char label[64];
  int n = std::max(0, std::min(len, int(sizeof(label)) - 1));
  while (n > 0 && name[n - 1] == ' ') --n;  // CHARACTER values are blank-padded
  memcpy(label, name, size_t(n));
  label[n] = '\0';
  CommNamed(FortranComm(comm), label);
}

MPI_Request* SaveFortranRequests(int count, const MPI_Fint* requests) {
  MPI_Request* saved = SavedRequests(count);
  for (int k = 0; k < count; ++k) saved[k] = FortranRequest(requests[k]);
  return saved;
}
#endif

uint16_t CommIndexSlow(MPI_Comm comm) {
  const uint32_t epoch = __atomic_load_n(&g_comm_epoch, __ATOMIC_ACQUIRE);
  LastComm& last = t_mpi.comm;
  if (comm == g_handles.null) return fmt::kNoComm;
  uint64_t key = HandleKey(comm);
  int found = g_comm_map.Find(key);
  if (found >= 0) {
    last = {comm, epoch, uint16_t(found), StreamWhere(uint16_t(found))};
    return uint16_t(found);
  }
  // First sight: the world or self before MPI_Init returned to us, or a comm
  // made by a call we do not wrap (MPI_Cart_create, MPI_Intercomm_merge...).
  int init = 0, fin = 0;
  HT_PMPI(MPI_Initialized)(&init);
  HT_PMPI(MPI_Finalized)(&fin);
  if (!init || fin) return fmt::kNoComm;
  pthread_mutex_lock(&g_comm_lock);
  found = g_comm_map.Find(key);
  uint16_t index = found >= 0 ? uint16_t(found) : fmt::kNoComm;
  if (found < 0) {
    NewComm n;
    std::vector<int32_t> members;
    if (comm == g_handles.world) {
      n.id = fmt::kWorldCommId;
      n.label = "world";
      n.world = true;
    } else if (comm == g_handles.self) {
      n.id = Combine(HashString("self"), uint64_t(uint32_t(WorldRank())));
      n.label = "self";
      members.push_back(WorldRank());
    } else {
      members = WorldRanks(comm, false);
      if (!g_keyed_counters) g_keyed_counters = new std::map<uint64_t, uint32_t>();
      uint64_t k = Combine(HashString("unwrapped"), HashRanks(members));
      n.id = Combine(k, ++(*g_keyed_counters)[k]);
    }
    index = RegisterLocked(key, comm, n, members);
  }
  pthread_mutex_unlock(&g_comm_lock);
  return index;
}

void CommCreated(uint16_t call, MPI_Comm parent, MPI_Comm newcomm, int color, int key,
                 bool collective_over_parent, bool facts_from_parent) {
  if (!g_trace) return;
  uint16_t parent_index = CommIndex(parent);
  uint64_t parent_id = CommIdOf(parent_index);
  // Every member of the parent counts the creation, also those that get
  // MPI_COMM_NULL (color MPI_UNDEFINED), so the counters stay in step.
  uint32_t counter = collective_over_parent ? NextChildCounter(parent_index) : 0;
  if (newcomm == g_handles.null) return;
  const char* call_name = call < g_trace->header->counters.call_count ? g_trace->calls[call].name : "?";

  pthread_mutex_lock(&g_comm_lock);
  const MPI_Comm facts = facts_from_parent ? parent : newcomm;
  int inter = 0;
  HT_PMPI(MPI_Comm_test_inter)(facts, &inter);
  std::vector<int32_t> members = WorldRanks(facts, false);
  NewComm n;
  n.parent_id = parent_id;
  n.creator_call = call;
  n.color = color;
  n.key = key;
  n.parent_counter = counter;
  uint64_t id = Combine(HashString(call_name), HashRanks(members));
  if (inter) {
    // Both sides must agree: hash the union of both groups, in rank order,
    // and count per union (the two sides' parents differ).
    std::vector<int32_t> all = members, remote = WorldRanks(facts, true);
    all.insert(all.end(), remote.begin(), remote.end());
    std::sort(all.begin(), all.end());
    if (!g_keyed_counters) g_keyed_counters = new std::map<uint64_t, uint32_t>();
    uint64_t k = Combine(HashString("intercomm"), HashRanks(all));
    n.id = Combine(k, ++(*g_keyed_counters)[k]);
  } else if (collective_over_parent) {
    n.id = Combine(Combine(Combine(parent_id, id), uint64_t(uint32_t(color))), counter);
  } else {
    if (!g_keyed_counters) g_keyed_counters = new std::map<uint64_t, uint32_t>();
    uint64_t k = Combine(Combine(parent_id, id), uint64_t(uint32_t(key)));  // key: the tag
    n.id = Combine(k, ++(*g_keyed_counters)[k]);
  }
  RegisterLocked(HandleKey(newcomm), facts, n, members);
  pthread_mutex_unlock(&g_comm_lock);
}

void CommFreeing(MPI_Comm comm) {
  if (comm == g_handles.null) return;
  HandleFreeing(HandleKey(comm));
}

void HandleCreated(uint16_t call, MPI_Comm comm, uint64_t handle, fmt::CommKind kind) {
  if (!g_trace) return;
  const uint16_t parent_index = CommIndex(comm);
  // Every member counts it, so the ids agree: the n-th window (file) of
  // that communicator, by the call that made it.
  const uint32_t counter = NextChildCounter(parent_index);
  const char* call_name = call < g_trace->header->counters.call_count ? g_trace->calls[call].name : "?";
  pthread_mutex_lock(&g_comm_lock);
  NewComm n;
  n.parent_id = CommIdOf(parent_index);
  n.creator_call = call;
  n.parent_counter = counter;
  n.kind = kind;
  n.id = Combine(Combine(n.parent_id, HashString(call_name)), counter);
  RegisterLocked(handle, comm, n, WorldRanks(comm, false));
  pthread_mutex_unlock(&g_comm_lock);
}

uint16_t HandleIndex(uint64_t handle) {
  const int found = g_comm_map.Find(handle);
  return found >= 0 ? uint16_t(found) : fmt::kNoComm;
}

void HandleFreeing(uint64_t handle) {
  int index = g_comm_map.Find(handle);
  if (index >= 0) MarkCommFreed(uint16_t(index));
  pthread_mutex_lock(&g_comm_lock);
  g_comm_map.Unmap(handle);
  BumpCommEpoch();
  pthread_mutex_unlock(&g_comm_lock);
}

void CommNamed(MPI_Comm comm, const char* name) {
  uint16_t index = CommIndex(comm);
  if (index != fmt::kNoComm && name) SetCommLabel(index, name);
}


void ReceiveUnsequenced(fmt::Record& r, int ret, const MPI_Status* status) {
  if (ret == MPI_SUCCESS) ResolveReceive(r, status);
}

void PersistentMade(fmt::Record& r, MPI_Request request) {
  if (request == g_handles.request_null) return;
  r.handle = HandleKey(request);
  fmt::Record mark = r;
  RecordEvent(mark, fmt::EventKind::kMark);
  KeepPersistent(r.handle, r);
}

void PersistentStarted(MPI_Request request) {
  fmt::Record r;
  if (request == g_handles.request_null || !g_trace || !FindPersistent(HandleKey(request), &r)) return;
  const bool send = r.call < g_trace->header->counters.call_count &&
                    fmt::Op(g_trace->calls[r.call].op) == fmt::Op::kSend;
  r.seq = 0;
  if (send) {
    if (r.peer >= 0) r.seq = NextP2pSeq(r.comm, r.peer, r.tag, true);
  } else {
    SequenceReceive(r);
  }
  Posted(r, request);
}

void Posted(fmt::Record& r, MPI_Request request) {
  if (request == g_handles.request_null) return;
  r.handle = HandleKey(request);
  if (!RecordEvent(r, fmt::EventKind::kBegin)) return;
  Remember(r.handle, r);
}

uint64_t RequestKey(MPI_Request request) { return HandleKey(request); }

namespace {
// The communicators of the messages this thread's probes matched and its
// receives have not taken yet: a handful at most (a program receives what
// it probed), the oldest overwritten.
struct MatchedMessage {
  uint64_t message;
  uint16_t comm;
};
constexpr int kMatchedMessages = 8;
constinit thread_local MatchedMessage t_matched[kMatchedMessages] = {};
constinit thread_local unsigned t_matched_next = 0;
}  // namespace

void MessageMatched(uint64_t message, uint16_t comm) {
  t_matched[t_matched_next++ % kMatchedMessages] = {message, comm};
}

void MatchedReceive(fmt::Record& r, uint64_t message) {
  r.comm = fmt::kNoComm;
  for (MatchedMessage& m : t_matched) {
    if (m.message == message && message) {
      r.comm = m.comm;
      m.message = 0;  // taken: a later message may have the same handle
      break;
    }
  }
  r.peer = fmt::kAnyPeer;
  r.tag = fmt::kAnyTag;
  r.flags |= fmt::kRecAnyPeer | fmt::kRecAnyTag;
}

MPI_Request* SaveRequests(int count, const MPI_Request* requests) {
  MPI_Request* saved = SavedRequests(count);
  std::copy(requests, requests + std::max(count, 0), saved);
  return saved;
}

MPI_Status* StatusBuffer(MPI_Status* given, bool ignored, int count) {
  if (!ignored) return given;
  if (!t_statuses) t_statuses = new std::vector<MPI_Status>();
  size_t n = size_t(std::max(count, 1));
  if (t_statuses->size() < n) t_statuses->resize(n);
  return t_statuses->data();
}

void Retire(MPI_Request saved, const MPI_Status* status) {
  if (saved == g_handles.request_null || !g_trace) return;
  fmt::Record r;
  if (!Take(HandleKey(saved), &r)) return;  // not posted by a traced call
  if (r.call < g_trace->header->counters.call_count &&
      fmt::Op(g_trace->calls[r.call].op) == fmt::Op::kRecv) {
    ResolveReceive(r, status);
  }
  r.tid = 0;
  r.result = 0;
  RecordEvent(r, fmt::EventKind::kEnd);
}

int g_mpi_library = int(MpiLibrary::kUnknown);

namespace {
pthread_mutex_t g_find_lock = PTHREAD_MUTEX_INITIALIZER;
}  // namespace

void* OpenMpiLibrary(std::string* path) {
  Dl_info info;
  void* init = FindReal("PMPI_Init");
  if (!init || !dladdr(init, &info) || !info.dli_fname) return nullptr;
  *path = info.dli_fname;
  return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

void* MpiData(const char* symbol, void* library) {
  void* p = RealDlsym(RTLD_DEFAULT, symbol);
  return p || !library ? p : RealDlsym(library, symbol);
}

#if HT_MPICH
bool FindMpi() {
  // Reached only once mpi_abi.cc found an MPICH-ABI library: the handles
  // are the constants of its mpi.h.
  pthread_mutex_lock(&g_find_lock);
  if (__atomic_load_n(&g_mpi_library, __ATOMIC_ACQUIRE) == int(MpiLibrary::kUnknown)) {
    MpiHandles h;
    h.world = MPI_COMM_WORLD;
    h.self = MPI_COMM_SELF;
    h.null = MPI_COMM_NULL;
    h.request_null = MPI_REQUEST_NULL;
    for (size_t i = 0; i < kNumDtypes; ++i) h.dtypes[i] = kDtypes[i].handle;
    for (size_t i = 0; i < kNumRedops; ++i) h.redops[i] = kRedops[i].handle;
    g_handles = h;
    __atomic_store_n(&g_mpi_library, int(MpiLibrary::kReady), __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_find_lock);
  return true;
}

#else
bool FindMpi() {
  pthread_mutex_lock(&g_find_lock);
  int state = __atomic_load_n(&g_mpi_library, __ATOMIC_ACQUIRE);
  if (state == int(MpiLibrary::kUnknown)) {
    std::string path;
    void* library = OpenMpiLibrary(&path);
    MpiHandles h;
    h.world = static_cast<MPI_Comm>(MpiData("ompi_mpi_comm_world", library));
    h.self = static_cast<MPI_Comm>(MpiData("ompi_mpi_comm_self", library));
    h.null = static_cast<MPI_Comm>(MpiData("ompi_mpi_comm_null", library));
    h.request_null = static_cast<MPI_Request>(MpiData("ompi_request_null", library));
    bool all = h.world && h.self && h.null && h.request_null;
    for (size_t i = 0; i < kNumDtypes; ++i) {
      h.dtypes[i] = static_cast<MPI_Datatype>(MpiData(kDtypes[i].symbol, library));
      all &= h.dtypes[i] != nullptr;
    }
    for (size_t i = 0; i < kNumRedops; ++i) {
      h.redops[i] = static_cast<MPI_Op>(MpiData(kRedops[i].symbol, library));
      all &= h.redops[i] != nullptr;
    }
    if (all) {
      g_handles = h;
      state = int(MpiLibrary::kReady);
    } else if (library) {
      state = int(MpiLibrary::kOther);
      std::string line = "hangtrace: the MPI library " + path +
                         " is not an MPI hangtrace was built for (" HT_MPI_BUILT_FOR "): its calls pass through untraced";
      WriteStderrLine(line.c_str());
    }
    // Neither: no MPI library is loaded yet (a probe, or a call that will
    // fail anyway). Stay kUnknown and look again at the next call.
    if (library) dlclose(library);
    __atomic_store_n(&g_mpi_library, state, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_find_lock);
  return state == int(MpiLibrary::kReady);
}

#endif

void RegisterMpiCalls() {
  for (int i = 0; i < kNumMpiCalls; ++i) {
    g_mpi_call[i] = RegisterCall(kMpiCalls[i].name, fmt::Api::kMpi, kMpiCalls[i].op, kMpiCalls[i].flags);
  }
}

void Initialized(int provided_level) {
  if (!g_trace) return;
  int rank = -1, size = -1;
  HT_PMPI(MPI_Comm_rank)(g_handles.world, &rank);
  HT_PMPI(MPI_Comm_size)(g_handles.world, &size);
  SetRank(rank, size, fmt::RankSource::kMpi);
  g_trace->process->mpi_thread_level = provided_level;
  CommIndex(g_handles.world);
  CommIndex(g_handles.self);
  // MPI_Init installed the MPI library's own fatal-signal handlers over ours;
  // take them back, chaining to the library's.
  if (RuntimeConfig().stacks) InstallSignalHandlers();
}

}  // namespace hangtrace::HT_MPI_NS
