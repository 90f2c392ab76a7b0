#include "merger/trace_compact.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "merger/load_stages.h"
#include "merger/trace_reader.h"
#include "tracer/format.h"

namespace hangtrace {
namespace {

constexpr uint32_t kMinLaneSlots = 64;
constexpr uint64_t kAlign = 64;  // a finished file: sections packed (format.h allows it)
constexpr int kSeqAttempts = 64;

uint64_t Up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The order sections take in the copy (that of fmt::LayOut).
constexpr fmt::SectionId kOrder[] = {fmt::kSecProcess, fmt::kSecCalls,   fmt::kSecComms,   fmt::kSecMembers,
                                     fmt::kSecThreads, fmt::kSecStacks,  fmt::kSecNames,   fmt::kSecModules,
                                     fmt::kSecPyFrames, fmt::kSecRing};

// Entries of a section in use, as the reader takes them: the counter,
// clamped to the capacity and to what the file holds.
uint32_t Used(const fmt::FileHeader& h, fmt::SectionId id, uint64_t file_size) {
  if (id >= h.section_count || id >= fmt::kMaxSections) return 0;
  const fmt::Section& sec = h.sections[id];
  const fmt::Counters& c = h.counters;
  uint64_t n = 0;
  switch (id) {
    case fmt::kSecProcess: n = 1; break;
    case fmt::kSecCalls: n = c.call_count; break;
    case fmt::kSecComms: n = c.comm_count; break;
    case fmt::kSecMembers: n = c.member_count; break;
    case fmt::kSecThreads: n = c.thread_count; break;
    case fmt::kSecStacks: n = c.stack_count; break;
    case fmt::kSecNames: n = c.name_count; break;
    case fmt::kSecModules: n = c.module_count; break;
    case fmt::kSecPyFrames: n = c.pyframe_count; break;
    default: return 0;
  }
  n = std::min<uint64_t>(n, sec.count);
  if (sec.entry_size == 0 || sec.offset >= file_size) return 0;
  return uint32_t(std::min<uint64_t>(n, (file_size - sec.offset) / sec.entry_size));
}

bool WriteAll(int fd, const void* data, size_t n, uint64_t at) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = pwrite(fd, p, n, off_t(at));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= size_t(w), at += uint64_t(w);
  }
  return true;
}

struct Lane {
  uint64_t top = 0;  // one past the newest record read: the slot's head, or one more
  std::vector<const Event*> records;
};

}  // namespace

bool WriteCompactCopy(int in, const std::string& from, int out, uint64_t budget, CompactCopyStats* stats,
                      std::string* error) {
  *stats = {};
  struct stat st;
  if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < off_t(fmt::kHeaderSize)) {
    *error = from + ": not a trace file (too short, or not a regular file)";
    return false;
  }
  stats->source_bytes = uint64_t(st.st_blocks) * 512;
  // The records through the reader: only committed ones, checked before and
  // after copying (a record being written now is left out, never torn).
  std::string why;
  auto snap = ReadTraceFile("/proc/self/fd/" + std::to_string(in), &why);
  if (!snap) {
    *error = from + ": " + why.substr(why.find(": ") == std::string::npos ? 0 : why.find(": ") + 2);
    return false;
  }
  const TraceSnapshot& s = *snap;
  const uint64_t size = uint64_t(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, in, 0);
  if (map == MAP_FAILED) {
    *error = from + ": cannot map: " + strerror(errno);
    return false;
  }
  const auto* data = static_cast<const uint8_t*>(map);
  fmt::FileHeader h = s.header;  // the reader's copy, checked
  const auto* live = reinterpret_cast<const fmt::FileHeader*>(data);
  // Counters as they are now (the reader loaded them once, so did we).
  h.counters = live->counters;
  uint32_t used[fmt::kMaxSections] = {};
  for (fmt::SectionId id : kOrder) used[id] = Used(h, id, size);

  // Lanes: the records read, by lane.
  const uint32_t threads = used[fmt::kSecThreads];
  const uint32_t src_lane_slots = h.lane_slots;
  std::vector<Lane> lanes(threads);
  std::vector<fmt::ThreadSlot> slots(threads);
  const fmt::Section& tsec = h.sections[fmt::kSecThreads];
  for (uint32_t i = 0; i < threads; ++i) {
    const uint8_t* src = data + tsec.offset + uint64_t(i) * tsec.entry_size;
    const auto* slot = reinterpret_cast<const fmt::ThreadSlot*>(src);
    if (!fmt::SeqReadPrefix(src, &slots[i], std::min<size_t>(tsec.entry_size, sizeof(fmt::ThreadSlot)),
                            &slot->version, kSeqAttempts)) {
      memcpy(&slots[i], src, std::min<size_t>(tsec.entry_size, sizeof(fmt::ThreadSlot)));  // the reader will say unstable
    }
    lanes[i].top = slots[i].head;
  }
  // The current and last calls as the reader found them, copied into the
  // slots (the lane records the runtime's slots name may be older than the
  // tails kept): the copy is written without kFeatCallPositions.
  for (fmt::ThreadSlot& slot : slots) {
    slot.current.kind = slot.last.kind = uint8_t(fmt::EventKind::kEmpty);
    slot.current_at = slot.last_at = 0;
  }
  for (const ThreadInfo& t : s.threads) {
    if (t.slot >= threads) continue;
    fmt::ThreadSlot& slot = slots[t.slot];
    slot.current = t.in_call ? t.current : fmt::Record{};
    slot.current.kind = uint8_t(t.in_call ? fmt::EventKind::kBegin : fmt::EventKind::kEmpty);
    slot.last = t.has_last ? t.last : fmt::Record{};
    slot.last.kind = uint8_t(t.has_last ? fmt::EventKind::kEnd : fmt::EventKind::kEmpty);
  }
  for (const Event& e : s.events) {
    if (e.lane >= threads) continue;
    lanes[e.lane].records.push_back(&e);
    lanes[e.lane].top = std::max(lanes[e.lane].top, e.index + 1);
  }

  // Bytes before the ring, then K: the largest that fits the budget.
  uint64_t tables = fmt::kHeaderSize;
  for (fmt::SectionId id : kOrder) {
    if (id != fmt::kSecRing) tables = Up(tables + uint64_t(used[id]) * h.sections[id].entry_size);
  }
  tables += Up(sizeof(fmt::ThreadSlot));  // the archive's slot
  auto tails = [&](uint32_t k) {
    std::vector<uint64_t> from(threads);
    for (uint32_t i = 0; i < threads; ++i) from[i] = lanes[i].top > k ? lanes[i].top - k : 0;
    return from;
  };
  auto cost = [&](uint32_t k, size_t archived) {
    uint64_t records = archived;
    for (const Lane& l : lanes) records += std::min<uint64_t>(l.top, k);
    return tables + records * sizeof(fmt::Record);
  };
  uint32_t k = kMinLaneSlots;
  if (src_lane_slots && !(src_lane_slots & (src_lane_slots - 1))) k = std::max(kMinLaneSlots, src_lane_slots);
  std::vector<uint64_t> tail_from = tails(k);
  std::vector<const Event*> archive = load::RecordsScanNeedsBefore(s, tail_from);
  while (k > kMinLaneSlots && cost(k, archive.size()) > budget) {
    k /= 2;
    tail_from = tails(k);
    archive = load::RecordsScanNeedsBefore(s, tail_from);
  }
  while (archive.size() > k) k *= 2;  // correctness over the budget (the tails stay as they are)
  stats->over_budget = cost(k, archive.size()) > budget;
  const uint32_t lanes_out = threads + (archive.empty() ? 0 : 1);

  // The layout.
  fmt::Section sections[fmt::kMaxSections] = {};
  uint64_t off = fmt::kHeaderSize;
  for (fmt::SectionId id : kOrder) {
    fmt::Section sec = id < h.section_count ? h.sections[id] : fmt::Section{0, 0, 0};
    if (sec.entry_size == 0) sec.entry_size = id == fmt::kSecRing ? fmt::kRecordSize : 1;
    uint32_t count = id == fmt::kSecRing ? lanes_out * k : id == fmt::kSecThreads ? lanes_out : used[id];
    sections[id] = {off, count, sec.entry_size};
    off = Up(off + uint64_t(count) * sec.entry_size);
  }
  const uint64_t file_size = off;

  // Header and tables in one buffer; the ring written record by record
  // (sparse: the slots no record fills stay holes).
  std::vector<uint8_t> buf(sections[fmt::kSecRing].offset, 0);
  h.file_size = file_size;
  h.section_count = fmt::kNumSections;
  h.lane_slots = k;
  h.features = (h.features | fmt::kFeatCompact) & ~uint64_t(fmt::kFeatCallPositions);
  memcpy(h.sections, sections, sizeof(sections));
  h.counters.call_count = used[fmt::kSecCalls];
  h.counters.comm_count = used[fmt::kSecComms];
  h.counters.member_count = used[fmt::kSecMembers];
  h.counters.thread_count = lanes_out;
  h.counters.stack_count = used[fmt::kSecStacks];
  h.counters.name_count = used[fmt::kSecNames];
  h.counters.module_count = used[fmt::kSecModules];
  h.counters.pyframe_count = used[fmt::kSecPyFrames];
  memcpy(buf.data(), &h, sizeof(h));
  for (fmt::SectionId id : kOrder) {
    if (id == fmt::kSecRing || id == fmt::kSecThreads || !used[id]) continue;
    memcpy(buf.data() + sections[id].offset, data + s.header.sections[id].offset,
           uint64_t(used[id]) * sections[id].entry_size);
  }
  // Seqlocked parts as one stable copy each: the clock, the communicators.
  if (used[fmt::kSecProcess] && sections[fmt::kSecProcess].entry_size >= sizeof(fmt::ProcessInfo)) {
    auto* p = reinterpret_cast<fmt::ProcessInfo*>(buf.data() + sections[fmt::kSecProcess].offset);
    p->clock = s.process.clock;
  }
  const fmt::Section& csec = sections[fmt::kSecComms];
  for (uint32_t i = 0; i < used[fmt::kSecComms]; ++i) {
    const uint8_t* src = data + s.header.sections[fmt::kSecComms].offset + uint64_t(i) * csec.entry_size;
    fmt::CommEntry e;
    const size_t n = std::min<size_t>(csec.entry_size, sizeof(e));
    if (fmt::SeqReadPrefix(src, &e, n, reinterpret_cast<const uint32_t*>(src), kSeqAttempts)) {
      memcpy(buf.data() + csec.offset + uint64_t(i) * csec.entry_size, &e, n);
    }
  }
  const fmt::Section& out_threads = sections[fmt::kSecThreads];
  const size_t slot_bytes = std::min<size_t>(out_threads.entry_size, sizeof(fmt::ThreadSlot));
  for (uint32_t i = 0; i < threads; ++i) {
    memcpy(buf.data() + out_threads.offset + uint64_t(i) * out_threads.entry_size, &slots[i], slot_bytes);
  }
  if (!archive.empty()) {
    fmt::ThreadSlot a{};
    a.version = 2;
    a.tid = 0;  // no thread: the reader reads the lane and lists no thread
    a.flags = fmt::kThreadTracer;
    a.head = archive.size();
    memcpy(a.name, "archive", 8);
    memcpy(buf.data() + out_threads.offset + uint64_t(threads) * out_threads.entry_size, &a, slot_bytes);
  }
  bool ok = ftruncate(out, off_t(file_size)) == 0 && WriteAll(out, buf.data(), buf.size(), 0);
  const uint64_t ring = sections[fmt::kSecRing].offset;
  for (uint32_t i = 0; ok && i < threads; ++i) {
    for (const Event* e : lanes[i].records) {
      if (e->index < tail_from[i]) continue;
      const uint64_t at = ring + (uint64_t(i) * k + (e->index & (k - 1))) * sizeof(fmt::Record);
      ok = WriteAll(out, &e->rec, sizeof(fmt::Record), at);
      ++stats->records;
    }
  }
  for (size_t j = 0; ok && j < archive.size(); ++j) {
    fmt::Record r = archive[j]->rec;
    r.commit = fmt::TicketOfVersion(j, h.version);  // the source's version, kept
    ok = WriteAll(out, &r, sizeof(r), ring + (uint64_t(threads) * k + j) * sizeof(fmt::Record));
  }
  munmap(map, size);
  if (!ok) {
    *error = from + ": cannot write its compact copy: " + strerror(errno);
    return false;
  }
  stats->records += archive.size();
  stats->archived = archive.size();
  stats->lane_slots = k;
  struct stat done;
  stats->bytes = fstat(out, &done) == 0 ? uint64_t(done.st_blocks) * 512 : file_size;
  return true;
}

}  // namespace hangtrace
