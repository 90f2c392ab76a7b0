// A fixed-size open-addressing map from an API handle (MPI_Comm,
// ncclComm_t, turned into a 64-bit key >= 2) to its index in the trace
// file's communicator table. Readers take no lock: a key is published last,
// with release, after its index. Writers (Map, Unmap) hold the caller's lock.
// A removed key leaves a tombstone, reused by later insertions, so a freed
// handle that comes back for a new communicator maps to the new one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tracer/hash.h"

namespace hangtrace {

template <size_t kSize>
class HandleMap {
  static_assert((kSize & (kSize - 1)) == 0, "a power of two");

 public:
  static constexpr uint64_t kEmpty = 0, kTomb = 1;  // keys are never these

  // The index of `key`, or -1.
  int Find(uint64_t key) const {
    for (size_t i = Bucket<Log2(kSize)>(key), n = 0; n < kSize; i = (i + 1) & (kSize - 1), ++n) {
      uint64_t k = __atomic_load_n(&slots_[i].key, __ATOMIC_ACQUIRE);
      if (k == key) return slots_[i].index;
      if (k == kEmpty) return -1;
    }
    return -1;
  }

  // Writer lock held.
  void Map(uint64_t key, uint16_t index) {
    size_t tomb = SIZE_MAX;
    for (size_t i = Bucket<Log2(kSize)>(key), n = 0; n < kSize; i = (i + 1) & (kSize - 1), ++n) {
      uint64_t k = slots_[i].key;
      if (k == key) {
        slots_[i].index = index;
        return;
      }
      if (k == kTomb && tomb == SIZE_MAX) tomb = i;
      if (k == kEmpty) {
        Publish(tomb != SIZE_MAX ? tomb : i, key, index);
        return;
      }
    }
    if (tomb != SIZE_MAX) Publish(tomb, key, index);  // full of live keys and tombstones
  }

  // Writer lock held.
  void Unmap(uint64_t key) {
    for (size_t i = Bucket<Log2(kSize)>(key), n = 0; n < kSize; i = (i + 1) & (kSize - 1), ++n) {
      uint64_t k = slots_[i].key;
      if (k == key) {
        __atomic_store_n(&slots_[i].key, kTomb, __ATOMIC_RELEASE);
        return;
      }
      if (k == kEmpty) return;
    }
  }

 private:
  void Publish(size_t at, uint64_t key, uint16_t index) {
    slots_[at].index = index;
    __atomic_store_n(&slots_[at].key, key, __ATOMIC_RELEASE);
  }

  struct Slot {
    uint64_t key;
    uint16_t index;
  };
  Slot slots_[kSize];
};

}  // namespace hangtrace
