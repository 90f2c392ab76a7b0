// The event lane: the writer side of the ring, and its protocol.
//
// Each thread that records owns one ThreadSlot and the lane of the same
// index (a power-of-two array of 64-byte fmt::Record). It is the only
// writer of both, so writing needs no read-modify-write atomics.
//
// Writer, for the record with lane index i (i counts from 0, never resets):
//   1. slot = lane[i & mask]
//   2. store slot.commit = 0                  (relaxed)
//   3. release fence                          (orders 2 before 4)
//   4. copy the 60 payload bytes into slot    (plain stores)
//   5. store slot.commit = ticket(i)          (release: 4 before 5)
//   6. store thread.head = i + 1              (release: 5 before 6)
// where ticket(i) = uint32_t(i) | 1 (fmt::Ticket: never 0, and another for
// each lap of a slot, whose indexes differ by the lane's size).
//
// Reader, for a lane whose head it loaded (acquire) as h: the readable
// indexes are [max(0, h - lane_slots), h). For each i:
//   a. c1 = load slot.commit (acquire)
//   b. copy the 64 bytes
//   c. acquire fence; c2 = load slot.commit (relaxed)
//   d. accept only if c1 == c2 == ticket(i)
// A record being rewritten shows commit 0 or another lap's ticket at (a) or
// (c), so a torn copy is never accepted (this is a seqlock whose version is
// the ticket). A process killed between 2 and 5 leaves commit 0: that one
// record is rejected, the rest of the lane stays readable. The head may lag
// the last commit by one record (death between 5 and 6); a reader may probe
// index h and accept it by the same rule.
#pragma once

#include <cstring>

#include "tracer/format.h"

namespace hangtrace {

// Writes `r` as the lane's next record; returns its lane index.
__attribute__((always_inline)) inline uint64_t LaneWrite(fmt::Record* lane, uint64_t mask, uint64_t* head,
                                                         const fmt::Record& r) {
  uint64_t i = *head;  // only this thread writes it
  fmt::Record* slot = &lane[i & mask];
  __atomic_store_n(&slot->commit, 0u, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  memcpy(static_cast<void*>(slot), &r, offsetof(fmt::Record, commit));
  __atomic_store_n(&slot->commit, fmt::Ticket(i), __ATOMIC_RELEASE);
  __atomic_store_n(head, i + 1, __ATOMIC_RELEASE);
  return i;
}

// Seqlock helpers for ThreadSlot/StackSlot/CommEntry/ClockInfo: the owner
// brackets its writes with SeqBegin/SeqEnd; `version` is odd in between.
inline void SeqBegin(uint32_t* version) {
  __atomic_store_n(version, *version + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
}
inline void SeqEnd(uint32_t* version) {
  __atomic_store_n(version, *version + 1, __ATOMIC_RELEASE);
}

}  // namespace hangtrace
