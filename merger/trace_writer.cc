#include "merger/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hangtrace {
namespace {

}  // namespace

bool WriteTraceFile(const std::string& path, const FileSpec& spec, std::string* error) {
  uint32_t lane = spec.lane_slots;
  if (!lane) {
    size_t most = 1;
    for (const auto& t : spec.threads) most = std::max(most, t.records.size());
    lane = 1;
    while (lane < most) lane <<= 1;
  }
  size_t members = 0;
  for (const auto& c : spec.comms) members += c.members.size();
  size_t stacks = 0;
  for (const auto& t : spec.threads) stacks += !t.stack.empty();

  fmt::Capacities caps;
  caps.calls = uint32_t(spec.calls.size());
  caps.comms = uint32_t(spec.comms.size());
  caps.members = uint32_t(members);
  caps.threads = uint32_t(spec.threads.size());
  caps.stacks = uint32_t(stacks);
  caps.names = caps.modules = caps.pyframes = 0;
  caps.lane_slots = lane;
  const fmt::Layout layout = fmt::LayOut(caps, 8);  // finished files: packed
  fmt::FileHeader h{};
  fmt::FillHeader(&h, layout, lane, 0);
  const uint64_t off = layout.file_size;
  h.counters.call_count = uint32_t(spec.calls.size());
  h.counters.comm_count = uint32_t(spec.comms.size());
  h.counters.member_count = uint32_t(members);
  h.counters.thread_count = uint32_t(spec.threads.size());
  h.counters.stack_round = stacks ? 1 : 0;
  h.counters.stack_count = uint32_t(stacks);
  h.ready = fmt::kReadyMagic;

  std::vector<uint8_t> buf(off, 0);
  memcpy(buf.data(), &h, sizeof(h));
  auto at = [&](int s, size_t i) { return buf.data() + h.sections[s].offset + i * h.sections[s].entry_size; };
  memcpy(at(fmt::kSecProcess, 0), &spec.process, sizeof(spec.process));
  for (size_t i = 0; i < spec.calls.size(); ++i) memcpy(at(fmt::kSecCalls, i), &spec.calls[i], sizeof(fmt::CallInfo));
  uint32_t next_member = 0;
  for (size_t i = 0; i < spec.comms.size(); ++i) {
    fmt::CommEntry e = spec.comms[i].entry;
    e.version = 2;  // published, stable
    if (!spec.comms[i].members.empty()) {
      e.flags |= fmt::kCommMembersKnown;
      e.members_offset = next_member;
      memcpy(at(fmt::kSecMembers, next_member), spec.comms[i].members.data(), spec.comms[i].members.size() * sizeof(int32_t));
      next_member += uint32_t(spec.comms[i].members.size());
    }
    memcpy(at(fmt::kSecComms, i), &e, sizeof(e));
  }
  size_t stack_slot = 0;
  // Stacks are captured after every record (as the watchdog's of the call
  // each thread is in): readers ignore a capture older than the newest call.
  uint64_t newest = 0;
  for (const FileSpec::Thread& t : spec.threads) {
    if (t.in_call) newest = std::max(newest, t.current.ticks);
    if (t.has_last) newest = std::max(newest, t.last.ticks);
    for (const fmt::Record& r : t.records) newest = std::max(newest, r.ticks);
  }
  for (size_t i = 0; i < spec.threads.size(); ++i) {
    const FileSpec::Thread& t = spec.threads[i];
    fmt::ThreadSlot slot{};
    slot.tid = t.tid;
    slot.head = t.records.size();
    if (t.in_call) {
      slot.current = t.current;
      slot.current.kind = uint8_t(fmt::EventKind::kBegin);
      if (t.watchdog) slot.watchdog_ticks = t.current.ticks;
    }
    if (t.has_last) {
      slot.last = t.last;
      slot.last.kind = uint8_t(fmt::EventKind::kEnd);
    }
    memcpy(at(fmt::kSecThreads, i), &slot, sizeof(slot));
    auto* ring = reinterpret_cast<fmt::Record*>(buf.data() + h.sections[fmt::kSecRing].offset) + i * lane;
    size_t first = t.records.size() > lane ? t.records.size() - lane : 0;
    for (size_t k = first; k < t.records.size(); ++k) {
      fmt::Record r = t.records[k];
      r.commit = fmt::Ticket(k);
      ring[k & (lane - 1)] = r;
    }
    if (!t.stack.empty()) {
      fmt::StackSlot st{};
      st.status = uint32_t(fmt::StackStatus::kDone);
      st.tid = t.tid;
      st.reason = uint32_t(fmt::StackReason::kWatchdog);
      st.round = 1;
      st.ticks = newest + 1;
      st.nframes = uint32_t(std::min<size_t>(t.stack.size(), fmt::kMaxFrames));
      for (uint32_t f = 0; f < st.nframes; ++f) {
        st.frames[f].pc = 0x400000 + f;
        strncpy(st.frames[f].symbol, t.stack[f].c_str(), fmt::kSymbolLen - 1);
      }
      memcpy(at(fmt::kSecStacks, stack_slot++), &st, sizeof(st));
    }
  }

  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = "cannot create " + path + ": " + strerror(errno);
    return false;
  }
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t n = write(fd, buf.data() + done, buf.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = "cannot write " + path + ": " + strerror(errno);
      close(fd);
      return false;
    }
    done += size_t(n);
  }
  close(fd);
  return true;
}

}  // namespace hangtrace
