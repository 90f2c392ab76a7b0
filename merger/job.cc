// The Job's own methods: interning, communicator members, and the
// collective signatures seen at each (comm, seq) (SigWindow).
#include <algorithm>
#include <cstring>

#include "merger/model.h"

namespace hangtrace {

uint32_t Job::InternFrame(const Frame& f) {
  std::string key;
  key.reserve(f.func.size() + f.file.size() + f.module.size() + 32);
  key.push_back(char('0' + int(f.lang)));
  key += f.func;
  key.push_back('\0');
  key += f.file;
  key.push_back('\0');
  key += std::to_string(f.line);
  key.push_back('\0');
  key += f.module;
  key.push_back('\0');
  key += std::to_string(f.offset);
  auto [it, fresh] = frame_index.emplace(std::move(key), uint32_t(frames.size()));
  if (fresh) {
    frames.push_back(f);
    frames.back().entry = false;
  }
  return it->second;
}

uint16_t Job::Intern(const std::string& name) {
  auto it = name_index.find(name);
  if (it != name_index.end()) return it->second;
  uint16_t id = uint16_t(names.size());
  names.push_back(name);
  name_index.emplace(name, id);
  return id;
}

std::vector<int32_t> Job::Members(int32_t comm) const {
  std::vector<int32_t> out;
  if (comm < 0) return out;
  const GlobalComm& c = comms[size_t(comm)];
  int32_t n = c.world ? world_size : int32_t(c.members.size());
  for (int32_t i = 0; i < n; ++i) {
    int32_t r = c.world ? i : c.members[size_t(i)];
    if (r >= 0 && r < world_size) out.push_back(r);
  }
  return out;
}

std::string Job::OddKey(int32_t comm, uint64_t seq, int32_t rank) {
  std::string k(16, '\0');
  memcpy(&k[0], &comm, 4);
  memcpy(&k[4], &seq, 8);
  memcpy(&k[12], &rank, 4);
  return k;
}
namespace {
// A dense window may span at most this many entries per entry it holds
// (plus a floor): beyond, a sequence number goes to the hash map.
constexpr size_t kWindowSlack = 4, kWindowFloor = 4096;
}  // namespace

SigWindow::Entry* SigWindow::SlotOutside(uint64_t seq) {
  if (seq == 0) return nullptr;
  if (base_ == 0) {
    base_ = seq;
    dense_.assign(1, {-1, CollSig{}});
  }
  const size_t limit = kWindowFloor + kWindowSlack * filled_;
  Entry* e = nullptr;
  if (seq >= base_ && seq - base_ < dense_.size()) {
    e = &dense_[seq - base_];
  } else if (seq >= base_ && seq - base_ < limit) {
    // With headroom, as the front: a rank's records come one sequence
    // number past the last, and growing by one each was 5% of a load.
    dense_.resize(std::min<uint64_t>(limit, std::max<uint64_t>(seq - base_ + 1, dense_.size() * 2)),
                  {-1, CollSig{}});
    e = &dense_[seq - base_];
  } else if (seq < base_ && base_ - seq + dense_.size() <= limit) {
    // Grow the front with headroom, so that many ranks a little behind
    // each other do not each move the whole window.
    uint64_t grow = std::max<uint64_t>(base_ - seq, dense_.size());
    grow = std::min<uint64_t>({grow, limit - dense_.size(), base_ - 1});
    dense_.insert(dense_.begin(), size_t(grow), {-1, CollSig{}});
    base_ -= grow;
    e = &dense_[seq - base_];
  } else {
    auto [it, fresh] = far_.emplace(seq, Entry{-1, CollSig{}});
    e = &it->second;
  }
  if (e->first < 0) ++filled_;  // the caller fills an unset entry
  return e;
}

const SigWindow::Entry* SigWindow::Find(uint64_t seq) const {
  if (base_ && seq >= base_ && seq - base_ < dense_.size()) {
    return dense_[seq - base_].first >= 0 ? &dense_[seq - base_] : nullptr;
  }
  auto it = far_.find(seq);
  return it != far_.end() && it->second.first >= 0 ? &it->second : nullptr;
}

bool Job::SigOf(int32_t rank, int32_t comm, uint64_t seq, CollSig* out) const {
  if (!odd_index.empty()) {
    auto it = odd_index.find(OddKey(comm, seq, rank));
    if (it != odd_index.end()) {
      *out = it->second;
      return true;
    }
  }
  const RankView& v = ranks[size_t(rank)];
  if (v.worker >= sig_tables.size()) return false;
  const auto& table = sig_tables[v.worker];
  if (size_t(comm) >= table.size()) return false;
  const SigWindow::Entry* e = table[size_t(comm)].Find(seq);
  if (!e) return false;
  *out = e->second;
  return true;
}

int32_t Job::CommByRank(int32_t comm, int32_t comm_rank) const {
  if (comm < 0 || comm_rank < 0) return -1;
  const GlobalComm& c = comms[size_t(comm)];
  if (c.world) return comm_rank;
  return size_t(comm_rank) < c.members.size() ? c.members[size_t(comm_rank)] : -1;
}

}  // namespace hangtrace
