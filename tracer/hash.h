// The hashes behind communicator ids and the lock-free tables of the
// wrappers. Ids must agree on every rank, so these never change.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hangtrace {

inline uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// The bucket of a handle (an address) in a table of 2^kBits slots, for the
// in-memory tables only (never part of an id): one multiply, the product's
// high bits, where every bit of the key counts (Fibonacci hashing).
template <unsigned kBits>
inline size_t Bucket(uint64_t key) {
  static_assert(kBits > 0 && kBits < 64, "a table of 2^kBits slots");
  return size_t((key * 0x9e3779b97f4a7c15ull) >> (64 - kBits));
}
inline constexpr unsigned Log2(size_t n) { return n <= 1 ? 0 : 1 + Log2(n >> 1); }

inline uint64_t Combine(uint64_t h, uint64_t v) { return Mix(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))); }

inline uint64_t HashBytes(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {  // FNV-1a
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

inline uint64_t HashString(const char* s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s) h = (h ^ uint8_t(*s)) * 0x100000001b3ull;
  return h;
}

}  // namespace hangtrace
