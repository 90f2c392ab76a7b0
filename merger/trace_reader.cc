// The reader side of the protocols documented in tracer/format.h (the
// writer's side is tracer/lane.h and tracer/runtime.h).
#include "merger/trace_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "tracer/procfs.h"

namespace hangtrace {
namespace {

// Seqlock-protected copies from a live or dead writer (fmt::SeqRead).
constexpr int kSeqAttempts = 64;

bool IsPowerOfTwo(uint64_t v) { return v && !(v & (v - 1)); }

// Where a sparse file holds data. A header can claim sections far larger
// than what was ever written (a crafted file: lane_slots of 2^24 over a
// sparse file of a few pages); every page the reader touches in a hole costs
// page cache, and on a full tmpfs a SIGBUS. The runtime's own files are
// read only where they were allocated, so the reader keeps a budget: free
// until it has asked for more bytes than the file has allocated, then it
// asks the file system once where the data is (SEEK_DATA/SEEK_HOLE) and
// from then on reads only there. What lies in a hole reads as zeros, which
// no record, slot or entry is, so skipping it changes no result.
class FileExtents {
 public:
  FileExtents(int fd, uint64_t size, uint64_t allocated) : fd_(fd), size_(size), budget_(allocated) {}

  // The reader is about to touch `bytes`; true when it must ask Runs().
  bool Charge(uint64_t bytes) {
    if (loaded_) return true;
    if (bytes <= budget_) {
      budget_ -= bytes;
      return false;
    }
    Load();
    return true;
  }
  // The data run holding `off`, or the next one after it: [lo, hi), with
  // lo > off when off is in a hole; lo == hi == UINT64_MAX when none follows.
  std::pair<uint64_t, uint64_t> RunAt(uint64_t off) const {
    auto it = std::upper_bound(runs_.begin(), runs_.end(), off,
                               [](uint64_t o, const std::pair<uint64_t, uint64_t>& r) { return o < r.second; });
    if (it == runs_.end()) return {UINT64_MAX, UINT64_MAX};
    return *it;
  }
  bool AnyData(uint64_t lo, uint64_t len) const {
    auto r = RunAt(lo);
    return r.first < lo + len;
  }

 private:
  void Load() {
    loaded_ = true;
    for (off_t at = 0; uint64_t(at) < size_;) {
      off_t lo = lseek(fd_, at, SEEK_DATA);
      if (lo < 0) {
        if (errno != ENXIO) runs_ = {{0, size_}};  // no SEEK_DATA here: all of it is data
        return;
      }
      off_t hi = lseek(fd_, lo, SEEK_HOLE);
      if (hi < 0) hi = off_t(size_);
      runs_.push_back({uint64_t(lo), uint64_t(hi)});
      // A file fragmented past reason: the rest counts as data, which is no
      // worse than not knowing.
      if (runs_.size() >= 65536) {
        runs_.push_back({uint64_t(hi), size_});
        return;
      }
      at = hi;
    }
  }
  int fd_;
  uint64_t size_, budget_;
  bool loaded_ = false;
  std::vector<std::pair<uint64_t, uint64_t>> runs_;  // sorted, disjoint
};

}  // namespace

std::string BoundedBytes(const char* s, size_t cap) { return std::string(s, strnlen(s, cap)); }

namespace {
// Turns, in place, a control byte or a byte that is not valid UTF-8 into
// '?': the same length (BoundedString).
void MakePrintable(char* text, size_t n) {
  const auto* b = reinterpret_cast<unsigned char*>(text);
  for (size_t i = 0; i < n;) {
    const unsigned char c = b[i];
    if (c < 0x80) {  // ASCII: its control bytes are not printed
      if (c < 0x20 || c == 0x7f) text[i] = '?';
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte (C0, C1 and F5-FF
    // lead nothing valid), then that many continuation bytes.
    const size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    size_t k = 1;
    while (len && k < len && i + k < n && (b[i + k] & 0xc0) == 0x80) ++k;
    if (len == 0 || k < len) {
      text[i] = '?';  // this byte; what follows is judged on its own
      ++i;
      continue;
    }
    i += len;
  }
}
}  // namespace

std::string BoundedString(const char* s, size_t cap) {
  std::string out = BoundedBytes(s, cap);
  MakePrintable(out.data(), out.size());
  return out;
}

Liveness ProcessLiveness(const TraceSnapshot& s) {
  static uint8_t boot[16];
  static const std::string host = [] {
    ReadBootId(boot);
    char h[64] = {};
    gethostname(h, sizeof(h) - 1);
    return std::string(h);
  }();
  if (memcmp(s.process.boot_id, boot, 16) != 0 || host != s.process.host) return Liveness::kUnknown;
  ProcStat st;
  if (!ReadProcStat(s.process.pid, &st) || st.start_time != s.process.proc_start_time) return Liveness::kGone;
  if (st.state == 'T') return Liveness::kStopped;
  if (st.state == 'Z') return Liveness::kZombie;
  return Liveness::kRunning;
}

int64_t TraceSnapshot::TicksToMonoNs(uint64_t ticks) const {
  const fmt::ClockInfo& c = process.clock;
  if (c.kind != uint32_t(fmt::ClockKind::kTsc) || c.ticks_hz == 0) return int64_t(ticks);
  __int128 d = (__int128)(int64_t)(ticks - c.ref_ticks) * 1000000000 / (__int128)c.ticks_hz;
  return c.ref_mono_ns + int64_t(d);
}

int64_t TraceSnapshot::TicksToRealNs(uint64_t ticks) const {
  return TicksToMonoNs(ticks) - process.clock.ref_mono_ns + process.clock.ref_real_ns;
}

double TraceSnapshot::Seconds(uint64_t from, uint64_t to) const {
  return double(TicksToMonoNs(to) - TicksToMonoNs(from)) / 1e9;
}

int64_t TraceSnapshot::LastKnownMonoNs() const {
  if (process.end_ticks) return TicksToMonoNs(process.end_ticks);
  return int64_t(process.heartbeat_mono_ns);
}

double TraceSnapshot::SecondsInCall(uint64_t begin_ticks) const {
  return std::max(0.0, double(LastKnownMonoNs() - TicksToMonoNs(begin_ticks)) / 1e9);
}

uint64_t TraceSnapshot::CaptureTicks() const {
  uint64_t at = 0;
  for (const StackInfo& st : stacks) {
    const bool answered = st.status == fmt::StackStatus::kDone || st.status == fmt::StackStatus::kTruncated;
    if (answered) at = std::max(at, st.ticks);
  }
  return at;
}

std::string TraceSnapshot::CallName(uint16_t call) const {
  const CallDesc* c = Call(call);
  return c ? c->name : "call#" + std::to_string(call);
}

const CommInfo* TraceSnapshot::Comm(uint16_t comm) const {
  return comm < comms.size() && comm_valid[comm] ? &comms[comm] : nullptr;
}

std::string TraceSnapshot::CommLabel(uint16_t comm) const {
  const CommInfo* c = Comm(comm);
  if (!c) return comm == fmt::kNoComm ? "" : "comm#" + std::to_string(comm);
  if (c->entry.label[0]) return BoundedString(c->entry.label, sizeof(c->entry.label));
  return HexId(c->entry.id);
}

std::string WhyStackNotRead(const StackInfo& st) {
  switch (st.status) {
    case fmt::StackStatus::kDone:
    case fmt::StackStatus::kTruncated: return "";
    case fmt::StackStatus::kPending: return "it did not answer the capture signal in time";
    case fmt::StackStatus::kBlocked: return "it blocks the capture signal (hangtrace dump reads it from outside)";
    case fmt::StackStatus::kUnread:
      if (st.flags & fmt::kStackNotSignalled) {
        return "it ran in the kernel, or hardly ran at all (a busy machine), while looked at: not signalled, since a "
               "signal could cut its system call short";
      }
      return "neither readable while blocked nor signalled safely";
    case fmt::StackStatus::kEmpty: break;
  }
  return "its capture never started";
}

std::string HexId(uint64_t id) {
  char text[24];
  snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(id));
  return text;
}

namespace {

// in_place: `data` is the reading thread's buffer, and the caller allows
// records to stay there (ReadOptions::events_in_place).
std::optional<TraceSnapshot> ReadTrace(const uint8_t* data, size_t size, const std::string& path,
                                       std::string* error, const ReadOptions& options, FileExtents* extents,
                                       bool in_place = false) {
  // Whether the `count` entries of `entry` bytes at `off` need a look at the
  // file's extents before they are read (never for bytes in memory).
  auto sparse = [&](uint64_t count, uint64_t entry) { return extents && extents->Charge(count * entry); };
  // The first entry from i on (of n at the section's offset) that holds any
  // data: i itself unless `holes` says the file must be asked.
  auto next_entry = [&](const fmt::Section& sec, uint64_t i, uint64_t n, bool holes) -> uint64_t {
    if (!holes || i >= n) return i;
    const uint64_t off = sec.offset + i * sec.entry_size;
    const auto [lo, hi] = extents->RunAt(off);
    if (lo <= off) return i;
    if (lo == UINT64_MAX) return n;
    return std::min(n, std::max(i, (lo - sec.offset) / sec.entry_size));
  };
  auto fail = [&](const std::string& why) -> std::optional<TraceSnapshot> {
    *error = path + ": " + why;
    return std::nullopt;
  };
  if (size >= 8 && memcmp(data, fmt::kMagic, 8) != 0) return fail("not a hangtrace trace file (bad magic)");
  if (size < fmt::kHeaderSize) {
    return fail("truncated: " + std::to_string(size) + " bytes, shorter than the " +
                std::to_string(fmt::kHeaderSize) + "-byte header");
  }
  TraceSnapshot s;
  s.path = path;
  s.bytes = size;
  memcpy(&s.header, data, sizeof(s.header));
  const fmt::FileHeader& h = s.header;
  if (h.endian_tag != fmt::kEndianTag) return fail("written with another byte order; not readable here");
  if (h.oldest_readable > fmt::kVersion) {
    return fail("written by a newer hangtrace (format version " + std::to_string(h.version) +
                ", readable from version " + std::to_string(h.oldest_readable) +
                "); this reader knows version " + std::to_string(fmt::kVersion));
  }
  if (h.header_size != fmt::kHeaderSize || h.record_size != fmt::kRecordSize) {
    return fail("corrupt header (header size " + std::to_string(h.header_size) + ", record size " +
                std::to_string(h.record_size) + ")");
  }
  if (__atomic_load_n(&reinterpret_cast<const fmt::FileHeader*>(data)->ready, __ATOMIC_ACQUIRE) !=
      fmt::kReadyMagic) {
    return fail("incomplete: its process died or is still starting before the file was laid out");
  }
  if (h.section_count < fmt::kMinSections || h.section_count > fmt::kMaxSections) {
    return fail("corrupt header (" + std::to_string(h.section_count) + " sections)");
  }
  if (h.file_size > size) {
    s.warnings.push_back("truncated: " + std::to_string(size) + " of " +
                         std::to_string(h.file_size) + " bytes present; what is missing is skipped");
  }

  if (const uint32_t n = h.counters.comms_refused) {
    s.warnings.push_back(std::to_string(n) + " communicator(s) not recorded: the communicator table (" +
                         std::to_string(h.sections[fmt::kSecComms].count) + " entries) was full and none of its "
                         "communicators had been freed; calls on them show no communicator");
  }
  if (const uint32_t n = h.counters.lanes_refused) {
    s.warnings.push_back(std::to_string(n) + " thread(s) went untraced: the storage had no room for their record "
                         "lanes (a full disk or /dev/shm); their calls are not in this file");
  }

  // Each section is checked on its own: a damaged one is skipped, not fatal.
  auto section = [&](fmt::SectionId id, size_t known, const char* what) -> const uint8_t* {
    const fmt::Section& sec = h.sections[id];
    if (sec.count == 0) return nullptr;
    if (sec.entry_size < known) {
      s.warnings.push_back(std::string(what) + " skipped: entries of " +
                           std::to_string(sec.entry_size) + " bytes, expected " +
                           std::to_string(known));
      return nullptr;
    }
    unsigned __int128 end = (unsigned __int128)sec.offset + (unsigned __int128)sec.count * sec.entry_size;
    if (sec.offset < fmt::kHeaderSize || sec.offset % 8 || end > size) {
      s.warnings.push_back(std::string(what) + " skipped: outside the file (offset " +
                           std::to_string(sec.offset) + ", " + std::to_string(sec.count) + " x " +
                           std::to_string(sec.entry_size) + " bytes)");
      return nullptr;
    }
    return data + sec.offset;
  };

  const uint8_t* proc = section(fmt::kSecProcess, sizeof(fmt::ProcessInfo), "process facts");
  if (!proc) return fail("no readable process section: " + (s.warnings.empty() ? "" : s.warnings.back()));
  memcpy(&s.process, proc, sizeof(s.process));
  fmt::ProcessInfo& p = s.process;
  // Bound every string so no later code can read past a field, and make it
  // printable (BoundedString: same length, control and stray bytes '?').
  p.host[sizeof(p.host) - 1] = p.job[sizeof(p.job) - 1] = p.step[sizeof(p.step) - 1] = '\0';
  p.exe[sizeof(p.exe) - 1] = p.cmdline[sizeof(p.cmdline) - 1] = '\0';
  p.run[sizeof(p.run) - 1] = p.term_sender[sizeof(p.term_sender) - 1] = '\0';
  for (char* field : {p.host, p.job, p.step, p.exe, p.cmdline, p.run, p.term_sender}) {
    MakePrintable(field, strlen(field));  // each ends in a NUL now
  }
  {
    const auto* live = reinterpret_cast<const fmt::ProcessInfo*>(proc);
    if (!fmt::SeqRead(&live->clock, &p.clock, &live->clock.version, kSeqAttempts)) {
      s.warnings.push_back("clock block unstable; times may be off");
    }
    p.state = __atomic_load_n(&live->state, __ATOMIC_ACQUIRE);
    p.heartbeat_mono_ns = __atomic_load_n(&live->heartbeat_mono_ns, __ATOMIC_ACQUIRE);
    p.heartbeat_real_ns = __atomic_load_n(&live->heartbeat_real_ns, __ATOMIC_ACQUIRE);
  }
  if (p.clock.kind == uint32_t(fmt::ClockKind::kTsc) && p.clock.ticks_hz == 0) {
    s.warnings.push_back("clock never calibrated (process ended within 20 ms of start); durations are in raw ticks");
  }

  const auto* live_counters =
      reinterpret_cast<const fmt::Counters*>(data + offsetof(fmt::FileHeader, counters));
  auto load32 = [](const uint32_t* p32) { return __atomic_load_n(p32, __ATOMIC_ACQUIRE); };

  // Calls.
  if (const uint8_t* base = section(fmt::kSecCalls, sizeof(fmt::CallInfo), "call table")) {
    const fmt::Section& sec = h.sections[fmt::kSecCalls];
    uint32_t n = std::min(load32(&live_counters->call_count), sec.count);
    const bool holes = sparse(n, sec.entry_size);
    for (uint32_t i = 0; holes && i < n; ++i) {
      if (next_entry(sec, i, n, holes) != i) {  // entries keep their index: the rest is cut
        s.warnings.push_back("call table: entries from " + std::to_string(i) + " of " + std::to_string(n) +
                             " were never written (a hole in a sparse file): skipped");
        n = i;
      }
    }
    s.calls.reserve(n);
    uint32_t nameless = 0;
    for (uint32_t i = 0; i < n; ++i) {
      fmt::CallInfo ci;
      memcpy(&ci, base + size_t(i) * h.sections[fmt::kSecCalls].entry_size, sizeof(ci));
      s.calls.push_back({BoundedString(ci.name, sizeof(ci.name)), fmt::Api(ci.api), fmt::Op(ci.op), ci.flags});
      // Every call the runtime registers has a name: one without is
      // damaged, and what its records would say (a collective at #n) is
      // not believed: they stay, as calls of no kind.
      if (s.calls.back().name.empty()) {
        s.calls.back() = {"(a call the file does not name)", fmt::Api::kUnknown, fmt::Op::kNone, 0};
        ++nameless;
      }
      // Files written before kCallFinalize existed: the one call it marks.
      if (s.calls.back().api == fmt::Api::kMpi && s.calls.back().name == "MPI_Finalize") {
        s.calls.back().flags |= fmt::kCallFinalize;
      }
    }
    if (nameless) {
      s.warnings.push_back("call table: " + std::to_string(nameless) + " of " + std::to_string(n) +
                           " entries have no name (damaged): their records are read as calls of no kind");
    }
  }

  // Communicators and their members.
  const uint8_t* members = section(fmt::kSecMembers, sizeof(int32_t), "member pool");
  const uint32_t member_cap = members ? h.sections[fmt::kSecMembers].count : 0;
  if (const uint8_t* base = section(fmt::kSecComms, fmt::kCommEntryV1Size, "communicator table")) {
    const fmt::Section& sec = h.sections[fmt::kSecComms];
    uint32_t n = std::min(load32(&live_counters->comm_count), sec.count);
    const bool holes = sparse(n, sec.entry_size);
    // Every communicator has its own members in the pool: more than the
    // pool in all is a damaged table, and copying it could cost any memory.
    uint64_t members_left = member_cap;
    s.comms.resize(n);
    s.comm_valid.assign(n, false);
    for (uint32_t i = uint32_t(next_entry(sec, 0, n, holes)); i < n; i = uint32_t(next_entry(sec, i + 1, n, holes))) {
      const uint8_t* src = base + size_t(i) * h.sections[fmt::kSecComms].entry_size;
      CommInfo& c = s.comms[i];
      bool stable = fmt::SeqReadPrefix(src, &c.entry, sec.entry_size, reinterpret_cast<const uint32_t*>(src), kSeqAttempts);
      if (c.entry.version == 0) continue;  // claimed, never published
      if (!stable) s.warnings.push_back("communicator " + std::to_string(i) + " was being written; read best effort");
      c.entry.label[sizeof(c.entry.label) - 1] = '\0';
      s.comm_valid[i] = true;
      if ((c.entry.flags & fmt::kCommMembersKnown) && c.entry.size > 0 &&
          uint64_t(c.entry.members_offset) + uint64_t(c.entry.size) <= member_cap &&
          uint64_t(c.entry.size) <= members_left) {
        members_left -= uint64_t(c.entry.size);
        c.members.resize(size_t(c.entry.size));
        memcpy(c.members.data(), members + size_t(c.entry.members_offset) * sizeof(int32_t),
               size_t(c.entry.size) * sizeof(int32_t));
      }
    }
  }

  // Threads and their lanes.
  const uint8_t* threads = section(fmt::kSecThreads, sizeof(fmt::ThreadSlot), "thread table");
  const uint32_t lane_slots = h.lane_slots;
  // The ring is read lane by lane: in a file cut short (a full disk, a
  // copy that stopped), the lanes that are whole are kept, not dropped with
  // the section.
  const fmt::Section& ring_sec = h.sections[fmt::kSecRing];
  uint64_t lanes_present = UINT64_MAX;
  const uint8_t* ring = nullptr;
  if (ring_sec.count && ring_sec.entry_size == sizeof(fmt::Record) && ring_sec.offset >= fmt::kHeaderSize &&
      ring_sec.offset % 8 == 0 && ring_sec.offset < size && IsPowerOfTwo(lane_slots) &&
      (unsigned __int128)ring_sec.offset + (unsigned __int128)ring_sec.count * ring_sec.entry_size > size) {
    lanes_present = (size - ring_sec.offset) / (uint64_t(lane_slots) * sizeof(fmt::Record));
    s.warnings.push_back("event ring cut short: " + std::to_string(lanes_present) + " whole lane(s) of " +
                         std::to_string(h.sections[fmt::kSecThreads].count) + " present; the records of the "
                         "threads past them are lost");
    ring = data + ring_sec.offset;
  } else {
    ring = section(fmt::kSecRing, sizeof(fmt::Record), "event ring");
  }
  bool lanes_ok = ring && threads && IsPowerOfTwo(lane_slots) &&
                  uint64_t(lane_slots) * h.sections[fmt::kSecThreads].count <= ring_sec.count &&
                  ring_sec.entry_size == sizeof(fmt::Record);
  if (ring && threads && !lanes_ok) s.warnings.push_back("event ring skipped: lane layout is inconsistent");
  if (threads) {
    const fmt::Section& sec = h.sections[fmt::kSecThreads];
    uint32_t n = std::min(load32(&live_counters->thread_count), sec.count);
    const bool holes = sparse(n, sec.entry_size);
    for (uint32_t i = uint32_t(next_entry(sec, 0, n, holes)); i < n; i = uint32_t(next_entry(sec, i + 1, n, holes))) {
      const uint8_t* src = threads + size_t(i) * h.sections[fmt::kSecThreads].entry_size;
      const auto* live = reinterpret_cast<const fmt::ThreadSlot*>(src);
      fmt::ThreadSlot slot;
      bool stable = fmt::SeqRead(src, &slot, &live->version, kSeqAttempts);
      ThreadInfo t;
      t.slot = i;
      t.tid = slot.tid;
      t.name = BoundedString(slot.name, sizeof(slot.name));
      t.tracer = slot.flags & fmt::kThreadTracer;
      t.head = __atomic_load_n(&live->head, __ATOMIC_ACQUIRE);
      // The current and last calls: copies in the slot, or (the runtime's
      // files) records of the lane the slot names, where there is one.
      const fmt::Record* own_lane = lanes_ok && i < lanes_present
                                        ? reinterpret_cast<const fmt::Record*>(ring) + uint64_t(i) * lane_slots
                                        : nullptr;
      // Never into a hole (FileExtents; charged as the lane's read is, since
      // one page touched in a hole reads ahead many): a record there is
      // zeros, which no ticket matches, so a lane whose named record lies
      // in one is read as lost.
      const uint64_t lane_used = std::min<uint64_t>(__atomic_load_n(&live->head, __ATOMIC_ACQUIRE), lane_slots);
      if (own_lane && (h.features & fmt::kFeatCallPositions) && sparse(lane_used, sizeof(fmt::Record))) {
        for (const uint64_t* at : {&live->current_at, &live->last_at}) {
          const uint64_t a = __atomic_load_n(at, __ATOMIC_ACQUIRE) & ~fmt::kAtCopy;
          const uint64_t off = uint64_t(reinterpret_cast<const uint8_t*>(own_lane + ((a - 1) & (lane_slots - 1))) - data);
          if (a != 0 && !extents->AnyData(off, sizeof(fmt::Record))) own_lane = nullptr;
        }
      }
      fmt::ThreadCalls calls;
      const bool calls_stable = fmt::ReadThreadCalls(live, own_lane, lane_slots, h.features, &calls, kSeqAttempts);
      t.unstable = !stable || !calls_stable;
      t.in_call = calls.in_call;
      t.current = calls.current;
      t.has_last = calls.has_last;
      t.last = calls.last;
      t.watchdog_flagged = t.in_call && slot.watchdog_ticks == calls.current.ticks;
      if (t.tid != 0) s.threads.push_back(t);

      if (!lanes_ok || !options.events || t.head == 0 || i >= lanes_present) continue;
      // The lane, oldest readable record first; probe one past the head (a
      // writer that died between commit and head update).
      const auto* lane = reinterpret_cast<const fmt::Record*>(ring) + uint64_t(i) * lane_slots;
      uint64_t first = t.head > lane_slots ? t.head - lane_slots : 0;
      s.events_lost += first;
      // Count, never compare with the head: a damaged head of UINT64_MAX
      // would make `idx <= head` true forever (found by the fuzzer).
      const uint64_t span = t.head - first + 1;  // at most lane_slots + 1
      auto read = [&](uint64_t from, uint64_t to) {
        for (uint64_t k = from; k < to; ++k) {
          const uint64_t idx = first + k;
          Event e;
          const fmt::LaneRead got =
              fmt::ReadLaneSlot(&lane[idx & (lane_slots - 1)], fmt::TicketOfVersion(idx, h.version), &e.rec);
          if (got != fmt::LaneRead::kRead) {
            // The probe one past the head counts only if torn: it may never have been written.
            if (got == fmt::LaneRead::kTorn || idx < t.head) ++s.events_rejected;
            continue;
          }
          e.lane = i;
          e.index = idx;
          s.events.push_back(e);
        }
      };
      if (!sparse(std::min<uint64_t>(span, lane_slots), sizeof(fmt::Record))) {
        if (in_place) {
          // Only the tickets are read here: a copy holds still, so what
          // passes now passes when ForEachRecord reads the records.
          const TraceSnapshot::LaneInPlace l{lane, lane_slots - 1, first, span, i, h.version};
          uint64_t accepted = 0;
          for (uint64_t idx = first; idx < first + span; ++idx) {
            if (lane[idx & l.slot_mask].commit == fmt::TicketOfVersion(idx, h.version)) ++accepted;
            else if (idx < t.head) ++s.events_rejected;
          }
          s.events_in_place += accepted;
          s.lanes_in_place.push_back(l);
          continue;
        }
        s.events.reserve(s.events.size() + span);
        read(0, span);
        continue;
      }
      // Only the runs of the lane that hold data; a record in a hole is
      // zeros, rejected like any record whose ticket is not its index.
      const uint64_t base = uint64_t(reinterpret_cast<const uint8_t*>(lane) - data);
      const uint64_t rec = sizeof(fmt::Record);
      for (uint64_t k = 0; k < span;) {
        const uint64_t slot = (first + k) & (lane_slots - 1), off = base + slot * rec;
        const auto [lo, hi] = extents->RunAt(off);
        if (lo <= off) {  // in data up to hi (a record across hi is read whole)
          const uint64_t end = std::min<uint64_t>(lane_slots, (hi - base + rec - 1) / rec);
          const uint64_t run = std::min(end - slot, span - k);
          read(k, k + run);
          k += run;
          continue;
        }
        const uint64_t data_slot = lo == UINT64_MAX ? lane_slots : std::min<uint64_t>(lane_slots, (lo - base) / rec);
        if (data_slot <= slot) {  // the record straddles the hole's end
          read(k, k + 1);
          ++k;
          continue;
        }
        const uint64_t skip = std::min(data_slot - slot, span - k);
        const uint64_t idx = first + k;
        if (idx < t.head) s.events_rejected += std::min(idx + skip, t.head) - idx;
        k += skip;
      }
    }
  }
  if (options.sort_events) std::sort(s.events.begin(), s.events.end(), [](const Event& a, const Event& b) {
    if (a.rec.ticks != b.rec.ticks) return a.rec.ticks < b.rec.ticks;
    if (a.lane != b.lane) return a.lane < b.lane;
    return a.index < b.index;
  });

  // Stacks: the current round, in slot order.
  if (const uint8_t* base = section(fmt::kSecStacks, sizeof(fmt::StackSlot), "stack table")) {
    const fmt::Section& sec = h.sections[fmt::kSecStacks];
    uint32_t n = std::min(load32(&live_counters->stack_count), sec.count);
    const bool holes = sparse(n, sec.entry_size);
    for (uint32_t i = uint32_t(next_entry(sec, 0, n, holes)); i < n; i = uint32_t(next_entry(sec, i + 1, n, holes))) {
      fmt::StackSlot slot;
      memcpy(&slot, base + size_t(i) * h.sections[fmt::kSecStacks].entry_size, sizeof(slot));
      if (slot.status == uint32_t(fmt::StackStatus::kEmpty) || slot.tid == 0) continue;
      StackInfo st;
      st.tid = slot.tid;
      st.pthread_id = slot.pthread_id;
      st.thread_name = BoundedString(slot.thread_name, sizeof(slot.thread_name));
      st.reason = fmt::StackReason(slot.reason);
      st.status = fmt::StackStatus(slot.status);
      st.ticks = slot.ticks;
      st.lock_holder_pid = slot.lock_holder_pid;  // 0 in files before it had a name
      st.method = fmt::StackMethod(slot.method);   // 0 (the signal) in older files
      st.flags = slot.flags;
      st.syscall_nr = st.method == fmt::StackMethod::kBlockedRead && slot.syscall_nr != 0xffff ? slot.syscall_nr : -1;
      // Frames only from a slot its thread finished (no version word: the
      // status is stored after the frames); a pending one may be half written.
      const bool finished = st.status == fmt::StackStatus::kDone || st.status == fmt::StackStatus::kTruncated;
      uint32_t nf = finished ? std::min(slot.nframes, fmt::kMaxFrames) : 0;
      for (uint32_t f = 0; f < nf; ++f) {
        slot.frames[f].symbol[fmt::kSymbolLen - 1] = '\0';
        st.frames.push_back(slot.frames[f]);
      }
      s.stacks.push_back(std::move(st));
    }
  }

  // Interned names (kernel names of launch records); absent in old files.
  if (h.section_count > fmt::kSecNames) {
    if (const uint8_t* base = section(fmt::kSecNames, sizeof(fmt::NameEntry), "name table")) {
      const fmt::Section& sec = h.sections[fmt::kSecNames];
      uint32_t n = std::min(load32(&live_counters->name_count), sec.count);
      const bool holes = sparse(n, sec.entry_size);
      for (uint32_t i = 0; holes && i < n; ++i) {
        if (next_entry(sec, i, n, holes) != i) n = i;  // indices are names: the rest is cut
      }
      s.names.reserve(n);
      for (uint32_t i = 0; i < n; ++i) {
        const char* text = reinterpret_cast<const char*>(base + size_t(i) * h.sections[fmt::kSecNames].entry_size);
        s.names.push_back(BoundedString(text, sizeof(fmt::NameEntry::text)));
      }
    }
  }
  // The module map and the Python frames of the current capture round;
  // absent in old files.
  const uint32_t round = load32(&live_counters->stack_round);
  if (h.section_count > fmt::kSecModules) {
    if (const uint8_t* base = section(fmt::kSecModules, sizeof(fmt::ModuleEntry), "module table")) {
      const fmt::Section& sec = h.sections[fmt::kSecModules];
      uint32_t n = std::min(load32(&live_counters->module_count), sec.count);
      const bool holes = sparse(n, sec.entry_size);
      for (uint32_t i = uint32_t(next_entry(sec, 0, n, holes)); i < n; i = uint32_t(next_entry(sec, i + 1, n, holes))) {
        fmt::ModuleEntry m;
        memcpy(&m, base + size_t(i) * h.sections[fmt::kSecModules].entry_size, sizeof(m));
        if (m.round != round || m.end <= m.start) continue;
        s.modules.push_back({m.start, m.end, m.file_offset, BoundedBytes(m.path, sizeof(m.path))});
      }
    }
  }
  if (h.section_count > fmt::kSecPyFrames) {
    if (const uint8_t* base = section(fmt::kSecPyFrames, sizeof(fmt::PyFrame), "Python frame table")) {
      const fmt::Section& sec = h.sections[fmt::kSecPyFrames];
      uint32_t n = std::min(load32(&live_counters->pyframe_count), sec.count);
      const bool holes = sparse(n, sec.entry_size);
      for (uint32_t i = uint32_t(next_entry(sec, 0, n, holes)); i < n; i = uint32_t(next_entry(sec, i + 1, n, holes))) {
        fmt::PyFrame f;
        memcpy(&f, base + size_t(i) * h.sections[fmt::kSecPyFrames].entry_size, sizeof(f));
        if (f.round != round) continue;
        s.py_frames.push_back({f.tid, f.thread_id, f.depth, f.line, f.flags,
                               BoundedString(f.function, sizeof(f.function)), BoundedString(f.file, sizeof(f.file))});
      }
    }
  }
  return s;
}

// Each munmap of a file mapping costs a TLB shootdown (an interrupt to every
// other core running one of the process's threads): with two reader threads
// it was 28% of an analysis. A reading thread maps its files side by side
// into one reserved region and unmaps them together, one shootdown per
// region; mapping over the untouched reservation flushes nothing. What
// ReadTraceBytes returns owns its data, so a mapping may outlive its read.
class MappingBatch {
 public:
  ~MappingBatch() { Release(); }
  // Maps `size` bytes of `fd`; *own is set when the caller must munmap it
  // itself (a file larger than the region, or no region to be had).
  void* Map(int fd, size_t size, bool* own) {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t span = (size + page - 1) / page * page;
    *own = true;
    if (span > kRegion / 2) return mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (!base_ || used_ + span > kRegion) {
      Release();
      void* r = mmap(nullptr, kRegion, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (r == MAP_FAILED) return mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
      base_ = static_cast<uint8_t*>(r);
    }
    void* m = mmap(base_ + used_, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED) return m;
    used_ += span;
    *own = false;
    return m;
  }

 private:
  static constexpr size_t kRegion = size_t(16) << 20;  // what it maps counts in the RSS
  void Release() {
    if (base_) munmap(base_, kRegion);
    base_ = nullptr;
    used_ = 0;
  }
  uint8_t* base_ = nullptr;
  size_t used_ = 0;
};
thread_local MappingBatch t_mappings;

// A small file with every byte allocated (what dumps, compaction and
// `simulate` write: 100-200 KiB) is read whole with pread into the reading
// thread's buffer instead: mapping 131,072 such files, even in batches,
// cost 2.4 times as much as reading them (page tables made and torn down
// per file; bench/README.md). A live runtime's file is mapped: it is
// several MiB (a lane for every thread it may have), of which a reader
// touches the lanes of the threads that ran, and a slot caught mid-write is
// read again live. A copy that shows one is read again through a mapping.
constexpr size_t kReadWholeMax = size_t(1) << 20;
thread_local std::vector<uint8_t> t_read_buffer;

bool ReadWhole(int fd, uint8_t* to, size_t size) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = pread(fd, to + done, size - done, off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// Whether a snapshot read from a copy saw something being written.
bool CaughtMidWrite(const TraceSnapshot& s) {
  if (s.events_rejected > 0) return true;
  for (const ThreadInfo& t : s.threads) {
    if (t.unstable) return true;
  }
  return false;
}

}  // namespace

std::optional<TraceSnapshot> ReadTraceBytes(const uint8_t* data, size_t size, const std::string& path,
                                            std::string* error, const ReadOptions& options) {
  return ReadTrace(data, size, path, error, options, nullptr);
}

std::optional<TraceSnapshot> ReadTraceFile(const std::string& path, std::string* error,
                                           const ReadOptions& options) {
  // O_NONBLOCK: a fifo in place of a file must not hang the reader.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *error = path + ": cannot open: " + strerror(errno);
    return std::nullopt;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = path + ": not a regular file";
    close(fd);
    return std::nullopt;
  }
  size_t size = size_t(st.st_size);
  if (size == 0) {
    close(fd);
    *error = path + ": empty file (its process died before writing the header?)";
    return std::nullopt;
  }
  if (size <= kReadWholeMax && uint64_t(st.st_blocks) * 512 >= size) {
    std::vector<uint8_t>& buffer = t_read_buffer;
    if (buffer.size() < size) buffer.resize(size);
    if (ReadWhole(fd, buffer.data(), size)) {
      std::string copy_error;  // (a mapping's read says it again)
      auto snap = ReadTrace(buffer.data(), size, path, &copy_error, options, nullptr, options.events_in_place);
      if (snap && !CaughtMidWrite(*snap)) {
        close(fd);
        return snap;
      }
      // Damaged, or being written: read again live, as any other file is.
    }
  }
  bool own = true;
  void* map = t_mappings.Map(fd, size, &own);
  if (map == MAP_FAILED) {
    *error = path + ": cannot map: " + strerror(errno);
    close(fd);
    return std::nullopt;
  }
  // One page beyond the allocation: the header's own page may be counted
  // twice, and a page of slack costs nothing.
  FileExtents extents(fd, size, uint64_t(st.st_blocks) * 512 + 4096);
  auto snap = ReadTrace(static_cast<const uint8_t*>(map), size, path, error, options, &extents);
  close(fd);
  if (own) munmap(map, size);
  return snap;
}

FolderTrust::FolderTrust(const std::string& top) : top_(top) {
  struct stat st;
  if (stat(top.c_str(), &st) != 0) return;
  uid_ = (st.st_mode & S_IWOTH) ? int64_t(geteuid()) : int64_t(st.st_uid);
}

std::string FolderTrust::Distrust(const std::string& dir) const {
  struct stat st;
  if (uid_ < 0 || lstat(dir.c_str(), &st) != 0 || st.st_uid == 0 || int64_t(st.st_uid) == uid_) return "";
  return dir + " belongs to uid " + std::to_string(st.st_uid) + ", not to uid " + std::to_string(uid_) +
         " (the owner of " + top_ + "): planted by another user? skipped";
}

bool ParseNoRoomMarker(const std::string& path, NoRoomMarker* out) {
  const std::string name = std::filesystem::path(path).filename().string();
  const std::string suffix = fmt::kNoRoomSuffix;
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  // host.pid.rankR[ofN]: the host may hold dots, so from the right.
  const std::string stem = name.substr(0, name.size() - suffix.size());
  const size_t rank_dot = stem.rfind('.');
  if (rank_dot == std::string::npos || rank_dot == 0) return false;
  const size_t pid_dot = stem.rfind('.', rank_dot - 1);
  if (pid_dot == std::string::npos || pid_dot == 0) return false;
  NoRoomMarker m;
  m.path = path;
  m.host = stem.substr(0, pid_dot);
  const std::string pid = stem.substr(pid_dot + 1, rank_dot - pid_dot - 1);
  const std::string rank = stem.substr(rank_dot + 1);
  unsigned long r = 0, n = 0, id = 0;
  int used = 0;
  if (sscanf(pid.c_str(), "%lu%n", &id, &used) != 1 || size_t(used) != pid.size() || id == 0 || id > INT32_MAX) {
    return false;
  }
  if (sscanf(rank.c_str(), "rank%luof%lu%n", &r, &n, &used) == 2 && size_t(used) == rank.size()) {
    m.world_size = n <= INT32_MAX ? int32_t(n) : -1;
  } else if (!(sscanf(rank.c_str(), "rank%lu%n", &r, &used) == 1 && size_t(used) == rank.size())) {
    return false;
  }
  if (r > INT32_MAX || (m.world_size > 0 && int64_t(r) >= m.world_size)) return false;
  m.pid = int32_t(id);
  m.rank = int32_t(r);
  *out = std::move(m);
  return true;
}

std::vector<std::string> FindTraceFiles(const std::string& path, std::string* error,
                                        std::vector<std::string>* warnings, std::vector<NoRoomMarker>* no_room,
                                        std::vector<std::string>* dump_folders) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  auto warn = [&](const std::string& w) {
    if (warnings) warnings->push_back(w);
  };
  // The path itself is the user's choice: followed if it is a link.
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    *error = path + ": " + (ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such file or folder");
    return out;
  }
  if (fs::is_regular_file(st)) {
    out.push_back(path);
    return out;
  }
  if (!fs::is_directory(st)) {
    *error = path + ": not a trace file or a folder";
    return out;
  }
  // Inside it nothing is followed: a link, a fifo or a device named
  // *.htrace is skipped with one warning, a folder that cannot be read too,
  // and nothing here can throw or block. Job folders are one level down,
  // dump folders two (OUT/<host>/).
  fs::recursive_directory_iterator it(path, fs::directory_options::none, ec), end;
  if (ec) {
    *error = path + ": " + ec.message();
    return out;
  }
  const FolderTrust trust(path);
  for (; it != end; it.increment(ec)) {
    if (ec) {
      warn(path + ": " + ec.message() + "; the rest is read");
      ec.clear();
      break;
    }
    // The entry's own type comes with the listing (d_type): no stat per
    // file, which at 100k ranks would cost a third of the reading. A link
    // is a link (never followed); a stat only where the file system does
    // not say, or to name what an odd *.htrace is.
    const fs::path p = it->path();
    const bool link = it->is_symlink(ec);
    const bool dir = !ec && !link && it->is_directory(ec);
    if (ec) {
      warn(p.string() + ": " + ec.message() + ": skipped");
      ec.clear();
      continue;
    }
    if (dir) {
      if (it.depth() >= 2) it.disable_recursion_pending();
      if (const std::string why = trust.Distrust(p.string()); !why.empty()) {
        warn(why);
        it.disable_recursion_pending();
        continue;
      }
      // A folder we may not enter: say so now (the iterator would stop).
      if (access(p.c_str(), R_OK | X_OK) != 0) {
        warn(p.string() + ": cannot read this folder (" + strerror(errno) + "): skipped");
        it.disable_recursion_pending();
      }
      continue;
    }
    // A dump's node.json (the name node_dump.h's kNodeFile gives it), in
    // the path or one level down: its folder is a dump's.
    if (dump_folders && it.depth() <= 1 && !link && p.filename() == "node.json" && it->is_regular_file(ec)) {
      dump_folders->push_back(it.depth() == 0 ? path : p.parent_path().string());
      continue;
    }
    ec.clear();
    if (p.extension() == fmt::kNoRoomSuffix) {
      NoRoomMarker m;
      if (no_room && !link && ParseNoRoomMarker(p.string(), &m)) no_room->push_back(std::move(m));
      continue;
    }
    if (p.extension() != fmt::kTraceSuffix) continue;
    if (!link && it->is_regular_file(ec)) {
      out.push_back(p.string());
    } else {
      const fs::file_status ls = it->symlink_status(ec);
      const char* what = fs::is_symlink(ls) ? "a symbolic link" : fs::is_fifo(ls) ? "a fifo"
                         : fs::is_socket(ls) ? "a socket" : (fs::is_block_file(ls) || fs::is_character_file(ls)) ? "a device"
                                                                                                           : "not a regular file";
      warn(p.string() + ": " + what + ", not a trace file: skipped");
      ec.clear();
    }
  }
  std::sort(out.begin(), out.end());
  if (dump_folders) std::sort(dump_folders->begin(), dump_folders->end());
  return out;
}

}  // namespace hangtrace
