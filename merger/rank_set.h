// Sets of ranks as bitsets, printed as ascending ranges ("0-4,6-7"), as in
// LLNL STAT: merging is OR-ing words, printing is one pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hangtrace {

class RankSet {
 public:
  void Add(int32_t rank);
  void Remove(int32_t rank);
  bool Contains(int32_t rank) const;
  void Merge(const RankSet& other);
  bool Intersects(const RankSet& other) const;
  size_t Count() const;
  bool Empty() const { return Count() == 0; }
  int32_t First() const;  // -1 when empty
  std::vector<int32_t> Ranks() const;
  // "0-4,6-7"; "" when empty.
  std::string ToString() const;
  // The same, or for a long one "112,240,368,...,131056 (1023 in all)":
  // the first few, the last and a count, for reports read by people.
  std::string Brief(size_t max_chars = 48) const;
  // "rank 3" or "ranks 0,2-5": Brief() with the word a sentence needs.
  std::string Named(size_t max_chars = 48) const;
  // Parses the same syntax; false on anything else.
  static bool Parse(const std::string& text, RankSet* out);

 private:
  std::vector<uint64_t> words_;
};

}  // namespace hangtrace
