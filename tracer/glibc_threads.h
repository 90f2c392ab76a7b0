// The pthread_t of each thread of a process running glibc, found the way
// debuggers find it, without stopping any thread: glibc describes its
// thread list for libthread_db in exported descriptors (_thread_db_*, each
// {size in bits, count, offset}), and the list heads (_dl_stack_used,
// _dl_stack_user) live in ld.so's _rtld_global. CPython names its threads
// by pthread_t, and a thread read while blocked (tracer/stacks.cc inside
// the process, dump/native_stacks.cc from outside) cannot be asked for it.
//
// Every word is read through the caller's reader, which must never fault
// (the list may change under it: a wrong word ends the walk). glibc 2.34 or
// newer (the lists moved into ld.so then); elsewhere nothing is found and
// the Python frames of blocked threads go unmatched, as the report says.
#pragma once

#include <cstdint>

namespace hangtrace::glibc_threads {

// `address_of(name)`: where the symbol `name` is in the process (0 when
// absent); `read(addr, &word)`: one word of it, false where unreadable;
// `found(tid, pthread)` for each thread, until it returns false.
template <class AddressOf, class Read, class Found>
void Walk(const AddressOf& address_of, const Read& read, const Found& found) {
  struct Desc {
    uint32_t bits = 0, count = 0, offset = 0;
  };
  auto desc = [&](const char* name, Desc* out) {
    const uint64_t at = address_of(name);
    uint64_t w0 = 0, w1 = 0;  // its 12 bytes, as the words at 0 and at 4
    if (!at || !read(at, &w0) || !read(at + 4, &w1)) return false;
    out->bits = uint32_t(w0);
    out->count = uint32_t(w0 >> 32);
    out->offset = uint32_t(w1 >> 32);
    return true;
  };
  Desc tid, list, next, used, user;
  const uint64_t rtld_global = address_of("_rtld_global");
  if (!rtld_global || !desc("_thread_db_pthread_tid", &tid) || !desc("_thread_db_pthread_list", &list) ||
      !desc("_thread_db_list_t_next", &next) || !desc("_thread_db_rtld_global__dl_stack_used", &used) ||
      !desc("_thread_db_rtld_global__dl_stack_user", &user) || tid.bits != 32 || next.bits != 64) {
    return;
  }
  for (const Desc* head_desc : {&used, &user}) {
    const uint64_t head = rtld_global + head_desc->offset;
    uint64_t node = head;
    for (int hops = 0; hops < 65536; ++hops) {
      if (!read(node + next.offset, &node) || node == head || node == 0) break;
      const uint64_t thread = node - list.offset;
      uint64_t word = 0;
      if (!read(thread + tid.offset, &word)) break;
      if (!found(int(uint32_t(word)), thread)) return;  // little-endian: the int is the word's low half
    }
  }
}

}  // namespace hangtrace::glibc_threads
