// The event lanes and their reader, in one process: the runtime is started
// once (small lanes, so they wrap), threads write, the reader checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "merger/trace_reader.h"
#include "tests/test_util.h"
#include "tracer/runtime.h"

namespace hangtrace {
namespace {

constexpr uint32_t kLane = 1024;

testing::TempDir* g_dir;
uint16_t g_call;

class RuntimeEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    g_dir = new testing::TempDir();
    Config c;
    c.dir = g_dir->path();
    c.job = "lane";
    c.ring_slots = kLane;
    c.timeout_s = 0;
    c.stacks = false;
    ASSERT_TRUE(StartRuntime(c) && Traced());  // no rank: the file is made at the first call
    ASSERT_TRUE(NameTraceFile());  // the tests read it by name before any traced call
    g_call = RegisterCall("lane_test", fmt::Api::kUser, fmt::Op::kOther, 0);
    ASSERT_NE(g_call, fmt::kNoCall);
  }
  void TearDown() override { delete g_dir; }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new RuntimeEnv);

// A record whose fields all derive from (writer, n): a torn copy mixing two
// records (or a half-written one) fails Intact().
fmt::Record Make(uint32_t writer, uint64_t n) {
  fmt::Record r{};
  r.call = g_call;
  r.comm = fmt::kNoComm;
  r.seq = n;
  r.count = n * 2654435761u ^ writer;
  r.handle = ~r.count;
  r.peer = int32_t(writer);
  r.tag = int32_t(n & 0x7fffffff);
  r.aux = uint32_t(n * 7 + writer);
  return r;
}

bool Intact(const fmt::Record& r) {
  uint32_t writer = uint32_t(r.peer);
  return r.count == (r.seq * 2654435761u ^ writer) && r.handle == ~r.count &&
         r.tag == int32_t(r.seq & 0x7fffffff) && r.aux == uint32_t(r.seq * 7 + writer) &&
         r.call == g_call;
}

std::vector<Event> EventsOfTid(const TraceSnapshot& s, uint32_t tid) {
  std::vector<Event> out;
  for (const Event& e : s.events) {
    if (e.rec.tid == tid) out.push_back(e);
  }
  return out;
}

// Thread `tid` as a reader finds it in the file now, and its events; none
// when the file lists no such thread (a failure when it cannot be read).
std::optional<ThreadInfo> ThreadNow(uint32_t tid, std::vector<Event>* events = nullptr) {
  std::string err;
  auto s = ReadTraceFile(g_trace->path, &err);
  EXPECT_TRUE(s) << err;
  if (!s) return std::nullopt;
  if (events) *events = EventsOfTid(*s, tid);
  for (const ThreadInfo& th : s->threads) {
    if (th.tid == tid) return th;
  }
  return std::nullopt;
}

TEST(Lane, WrapKeepsTheNewestRecordsInOrder) {
  uint32_t tid = 0;
  std::thread t([&] {
    fmt::Record r0 = Make(0, 0);
    RecordEvent(r0, fmt::EventKind::kMark);
    tid = t_thread.tid;
    for (uint64_t n = 1; n < 3 * kLane + 17; ++n) {
      fmt::Record r = Make(0, n);
      ASSERT_TRUE(RecordEvent(r, fmt::EventKind::kMark));
    }
  });
  t.join();
  std::string err;
  auto s = ReadTraceFile(g_trace->path, &err);
  ASSERT_TRUE(s) << err;
  std::vector<Event> mine = EventsOfTid(*s, tid);
  ASSERT_EQ(mine.size(), kLane);  // exactly one lane's worth survives
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].rec.seq, 2 * kLane + 17 + i) << "position " << i;
    EXPECT_TRUE(Intact(mine[i].rec));
  }
  EXPECT_GE(s->events_lost, 2u * kLane + 17);
}

TEST(Lane, EightWritersAndAConcurrentReaderNeverSeeATornRecord) {
  constexpr int kWriters = 8;
  constexpr uint64_t kPerWriter = 200000;
  std::atomic<bool> done{false};
  std::atomic<int> started{0};
  std::atomic<bool> reading{false};
  std::vector<std::thread> writers;
  std::vector<uint32_t> tids(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      fmt::Record first = Make(uint32_t(100 + w), 0);
      RecordEvent(first, fmt::EventKind::kMark);  // attach: tid known below
      tids[w] = t_thread.tid;
      started++;
      // All at once, and only once the reader reads: on a fast machine the
      // writers could otherwise finish before the reader's first read.
      while (started < kWriters || !reading) std::this_thread::yield();
      for (uint64_t n = 1; n < kPerWriter; ++n) {
        fmt::Record r = Make(uint32_t(100 + w), n);
        RecordEvent(r, fmt::EventKind::kMark);
      }
    });
  }
  uint64_t reads = 0, accepted = 0, broken = 0;
  while (started < kWriters) std::this_thread::yield();
  std::thread reader([&] {
    do {  // at least one read, even if the writers are done by now
      reading = true;
      std::string err;
      auto s = ReadTraceFile(g_trace->path, &err);
      ASSERT_TRUE(s) << err;
      ++reads;
      for (const Event& e : s->events) {
        if (e.rec.peer < 100) continue;  // another test's writer
        ++accepted;
        if (!Intact(e.rec)) ++broken;
      }
    } while (!done);
  });
  for (auto& t : writers) t.join();
  done = true;
  reader.join();
  EXPECT_GT(reads, 0u);
  EXPECT_GT(accepted, 0u);
  EXPECT_EQ(broken, 0u) << "the reader accepted torn records";

  // After the writers: each writer's newest kLane records, all intact and
  // consecutive.
  std::string err;
  auto s = ReadTraceFile(g_trace->path, &err);
  ASSERT_TRUE(s) << err;
  std::map<uint32_t, std::vector<uint64_t>> by_writer;
  for (const Event& e : s->events) {
    if (std::find(tids.begin(), tids.end(), e.rec.tid) != tids.end()) {
      ASSERT_TRUE(Intact(e.rec));
      by_writer[e.rec.tid].push_back(e.rec.seq);
    }
  }
  ASSERT_EQ(by_writer.size(), size_t(kWriters));
  for (auto& [w, seqs] : by_writer) {
    ASSERT_EQ(seqs.size(), kLane) << "writer " << w;
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], kPerWriter - kLane + i);
  }
}

// Copies the file's bytes so they can be damaged without touching the live
// runtime's mapping.
std::vector<uint8_t> FileBytes() {
  std::ifstream in(g_trace->path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(Lane, TornOrUncommittedRecordsAreRejected) {
  uint32_t tid = 0;
  std::thread t([&] {
    for (uint64_t n = 0; n < 10; ++n) {
      fmt::Record r = Make(7, n);
      RecordEvent(r, fmt::EventKind::kMark);
    }
    tid = t_thread.tid;
  });
  t.join();
  std::vector<uint8_t> bytes = FileBytes();
  std::string err;
  auto clean = ReadTraceBytes(bytes.data(), bytes.size(), "copy", &err);
  ASSERT_TRUE(clean) << err;
  std::vector<Event> mine = EventsOfTid(*clean, tid);
  ASSERT_EQ(mine.size(), 10u);

  // Locate records 3 and 6 of that lane in the copy.
  const fmt::FileHeader* h = reinterpret_cast<const fmt::FileHeader*>(bytes.data());
  auto record_at = [&](const Event& e) {
    uint64_t off = h->sections[fmt::kSecRing].offset +
                   (uint64_t(e.lane) * h->lane_slots + (e.index & (h->lane_slots - 1))) * sizeof(fmt::Record);
    return reinterpret_cast<fmt::Record*>(bytes.data() + off);
  };
  // A writer that died mid-write leaves commit 0.
  record_at(mine[3])->commit = 0;
  record_at(mine[3])->count = 0xdead;
  // A record overwritten by a later lap carries another ticket.
  record_at(mine[6])->commit += h->lane_slots;

  auto damaged = ReadTraceBytes(bytes.data(), bytes.size(), "copy", &err);
  ASSERT_TRUE(damaged) << err;
  std::vector<Event> left = EventsOfTid(*damaged, tid);
  ASSERT_EQ(left.size(), 8u);
  for (const Event& e : left) {
    EXPECT_TRUE(Intact(e.rec));
    EXPECT_NE(e.rec.seq, 3u);
    EXPECT_NE(e.rec.seq, 6u);
  }
  EXPECT_EQ(damaged->events_rejected, clean->events_rejected + 2);
}

TEST(Lane, CurrentCallStaysVisibleAfterItsBeginIsOverwritten) {
  std::atomic<bool> entered{false}, release{false};
  uint32_t tid = 0;
  std::thread t([&] {
    fmt::Record call = Make(9, 424242);
    Recorded rec = CallBegin(call);
    ASSERT_NE(rec, Recorded::kNo);
    tid = t_thread.tid;
    // Flood the lane so the BEGIN is long gone from the ring.
    for (uint64_t n = 0; n < 2 * kLane; ++n) {
      fmt::Record r = Make(9, n);
      RecordEvent(r, fmt::EventKind::kMark);
    }
    entered = true;
    while (!release) std::this_thread::yield();
    CallEnd(call, 0, rec);
  });
  while (!entered) std::this_thread::yield();
  std::vector<Event> events;
  std::optional<ThreadInfo> th = ThreadNow(tid, &events);
  ASSERT_TRUE(th);
  EXPECT_TRUE(th->in_call);
  EXPECT_EQ(th->current.seq, 424242u);
  EXPECT_TRUE(Intact(th->current));
  for (const Event& e : events) EXPECT_NE(e.rec.seq, 424242u) << "BEGIN should be overwritten";
  release = true;
  t.join();
  EXPECT_FALSE(ThreadNow(tid)) << "an exited thread's slot must be released";
}

// The last call is named by its END's place in the lane (format version
// 3): marks written after it, enough to wrap the lane twice, move it into
// the slot first, so it is still read whole.
TEST(Lane, LastCallStaysVisibleAfterItsEndIsOverwritten) {
  uint32_t tid = 0;
  std::thread t([&] {
    fmt::Record call = Make(11, 515151);
    Recorded rec = CallBegin(call);
    ASSERT_NE(rec, Recorded::kNo);
    CallEnd(call, 7, rec);
    tid = t_thread.tid;
    for (uint64_t n = 0; n < 2 * kLane; ++n) {
      fmt::Record r = Make(11, n);
      RecordEvent(r, fmt::EventKind::kMark);
    }
    std::vector<Event> events;
    std::optional<ThreadInfo> th = ThreadNow(tid, &events);
    ASSERT_TRUE(th);
    EXPECT_FALSE(th->in_call);
    ASSERT_TRUE(th->has_last);
    EXPECT_EQ(th->last.seq, 515151u);
    EXPECT_EQ(th->last.result, 7);
    EXPECT_TRUE(Intact(th->last));
    for (const Event& e : events) EXPECT_NE(e.rec.seq, 515151u) << "END should be overwritten";
  });
  t.join();
}

// A reader beside a thread that enters and leaves calls (and writes marks,
// which move published records into the slot) sees one moment each time: a
// call open is never also its last one, the last is older than the open
// one, and each is whole.
TEST(Lane, ACallIsNeverSeenOpenAndEndedAtOnce) {
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> slot_index{UINT32_MAX};
  std::thread writer([&] {
    for (uint64_t n = 1; !stop; ++n) {
      fmt::Record call = Make(13, n);
      Recorded rec = CallBegin(call);
      ASSERT_NE(rec, Recorded::kNo);
      if (slot_index == UINT32_MAX) slot_index = uint32_t(t_thread.slot - g_trace->threads);
      if (n % 7 == 0) {
        for (int k = 0; k < 300; ++k) {  // a long call's completions
          fmt::Record r = Make(13, n);
          RecordEvent(r, fmt::EventKind::kMark);
        }
      }
      CallEnd(call, 0, rec);
    }
  });
  while (slot_index == UINT32_MAX) std::this_thread::yield();
  const uint32_t i = slot_index;
  // At least 200,000 reads, and on until a few were whole with a call open
  // and a last one (a machine of any speed, a writer descheduled): 10 s at
  // most. No ASSERT in the loop: the writer must be joined.
  uint64_t both = 0, stable = 0;
  bool ordered = true;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (uint64_t k = 0; ordered && (k < 200000 || stable < 1000 || both == 0) &&
                       std::chrono::steady_clock::now() < give_up;
       ++k) {
    fmt::ThreadCalls c;
    if (!fmt::ReadThreadCalls(&g_trace->threads[i], g_trace->ring + uint64_t(i) * g_trace->lane_slots,
                              g_trace->lane_slots, g_trace->header->features, &c, 4)) {
      continue;
    }
    ++stable;
    if (c.in_call) {
      EXPECT_EQ(c.current.kind, uint8_t(fmt::EventKind::kBegin));
      EXPECT_TRUE(Intact(c.current));
    }
    if (c.has_last) {
      EXPECT_EQ(c.last.kind, uint8_t(fmt::EventKind::kEnd));
      EXPECT_TRUE(Intact(c.last));
    }
    if (c.in_call && c.has_last) {
      ++both;
      ordered = c.last.seq < c.current.seq;
      EXPECT_TRUE(ordered) << "the call open (" << c.current.seq << ") must come after the last one ended ("
                           << c.last.seq << ")";
    }
  }
  stop = true;
  writer.join();
  EXPECT_GE(stable, 1000u);
  EXPECT_GT(both, 0u);
}

TEST(Lane, NestedCallsAreRecordedOnce) {
  fmt::Record outer = Make(11, 1), inner = Make(11, 2);
  uint32_t tid = 0;
  std::thread t([&] {
    Recorded a = CallBegin(outer);
    Recorded b = CallBegin(inner);  // e.g. MPI_Allreduce calling MPI_Send inside
    EXPECT_NE(a, Recorded::kNo);
    EXPECT_EQ(b, Recorded::kNo);
    CallEnd(inner, 0, b);
    CallEnd(outer, 0, a);
    tid = t_thread.tid;
  });
  t.join();
  std::string err;
  auto s = ReadTraceFile(g_trace->path, &err);
  ASSERT_TRUE(s) << err;
  std::vector<Event> mine = EventsOfTid(*s, tid);
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_EQ(mine[0].rec.kind, uint8_t(fmt::EventKind::kBegin));
  EXPECT_EQ(mine[1].rec.kind, uint8_t(fmt::EventKind::kEnd));
  EXPECT_EQ(mine[0].rec.seq, 1u);
  EXPECT_EQ(mine[1].rec.seq, 1u);
}

TEST(Lane, CommTableRoundTrips) {
  const int32_t members[4] = {0, 2, 4, 6};
  CommDesc d;
  d.id = 0x1234567890abcdefull;
  d.parent_id = 42;
  d.kind = fmt::CommKind::kMpi;
  d.size = 4;
  d.my_index = 1;
  d.color = 0;
  d.key = 2;
  d.label = "tp0";
  d.members = members;
  uint16_t c = RegisterComm(d);
  ASSERT_NE(c, fmt::kNoComm);
  EXPECT_EQ(NextCollSeq(c), 1u);
  EXPECT_EQ(NextCollSeq(c), 2u);
  SetCommLabel(c, "tp0-renamed");
  std::string err;
  auto s = ReadTraceFile(g_trace->path, &err, {.events = false});
  ASSERT_TRUE(s) << err;
  const CommInfo* ci = s->Comm(c);
  ASSERT_NE(ci, nullptr);
  EXPECT_EQ(ci->entry.id, d.id);
  EXPECT_EQ(ci->entry.coll_seq, 2u);
  EXPECT_EQ(s->CommLabel(c), "tp0-renamed");
  EXPECT_EQ(ci->members, std::vector<int32_t>(members, members + 4));
}

}  // namespace
}  // namespace hangtrace
