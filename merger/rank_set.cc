#include "merger/rank_set.h"

#include <algorithm>
#include <cstdlib>

namespace hangtrace {

void RankSet::Add(int32_t rank) {
  if (rank < 0) return;
  size_t w = size_t(rank) / 64;
  if (w >= words_.size()) words_.resize(w + 1, 0);
  words_[w] |= uint64_t(1) << (rank % 64);
}

void RankSet::Remove(int32_t rank) {
  if (rank < 0 || size_t(rank) / 64 >= words_.size()) return;
  words_[size_t(rank) / 64] &= ~(uint64_t(1) << (rank % 64));
}

bool RankSet::Contains(int32_t rank) const {
  if (rank < 0 || size_t(rank) / 64 >= words_.size()) return false;
  return (words_[size_t(rank) / 64] >> (rank % 64)) & 1;
}

void RankSet::Merge(const RankSet& other) {
  if (other.words_.size() > words_.size()) words_.resize(other.words_.size(), 0);
  for (size_t i = 0; i < other.words_.size(); ++i) words_[i] |= other.words_[i];
}

bool RankSet::Intersects(const RankSet& other) const {
  for (size_t i = 0; i < std::min(words_.size(), other.words_.size()); ++i) {
    if (words_[i] & other.words_[i]) return true;
  }
  return false;
}

// POPCNT where the CPU has it (every x86-64 since 2008), chosen once at
// load: libgcc's portable __popcountdi2 was 3.6% of `analyze` at 131,072
// ranks, where sets of 2,048 words are counted.
#if defined(__x86_64__)
__attribute__((target_clones("popcnt", "default")))
#endif
size_t RankSet::Count() const {
  size_t n = 0;
  for (uint64_t w : words_) n += size_t(__builtin_popcountll(w));
  return n;
}

int32_t RankSet::First() const {
  for (size_t i = 0; i < words_.size(); ++i) {
    if (words_[i]) return int32_t(i * 64 + size_t(__builtin_ctzll(words_[i])));
  }
  return -1;
}

std::vector<int32_t> RankSet::Ranks() const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < words_.size(); ++i) {
    for (uint64_t w = words_[i]; w; w &= w - 1) out.push_back(int32_t(i * 64 + size_t(__builtin_ctzll(w))));
  }
  return out;
}

std::string RankSet::ToString() const {
  std::string out;
  int64_t start = -1, prev = -2;
  auto flush = [&] {
    if (start < 0) return;
    if (!out.empty()) out += ',';
    out += std::to_string(start);
    if (prev > start) out += '-' + std::to_string(prev);
  };
  for (int32_t r : Ranks()) {
    if (r != prev + 1) {
      flush();
      start = r;
    }
    prev = r;
  }
  flush();
  return out;
}

std::string RankSet::Named(size_t max_chars) const {
  return (Count() == 1 ? "rank " : "ranks ") + Brief(max_chars);
}

std::string RankSet::Brief(size_t max_chars) const {
  std::string full = ToString();
  if (full.size() <= max_chars) return full;
  std::string head = full.substr(0, max_chars / 2);
  head = head.substr(0, head.rfind(','));
  std::string tail = full.substr(full.rfind(',') + 1);
  return head + ",...," + tail + " (" + std::to_string(Count()) + " in all)";
}

bool RankSet::Parse(const std::string& text, RankSet* out) {
  *out = RankSet();
  size_t i = 0;
  while (i < text.size()) {
    char* end = nullptr;
    long a = strtol(text.c_str() + i, &end, 10);
    if (end == text.c_str() + i || a < 0) return false;
    i = size_t(end - text.c_str());
    long b = a;
    if (i < text.size() && text[i] == '-') {
      b = strtol(text.c_str() + i + 1, &end, 10);
      if (end == text.c_str() + i + 1 || b < a) return false;
      i = size_t(end - text.c_str());
    }
    for (long r = a; r <= b; ++r) out->Add(int32_t(r));
    if (i < text.size()) {
      if (text[i] != ',') return false;
      ++i;
    }
  }
  return true;
}

}  // namespace hangtrace
