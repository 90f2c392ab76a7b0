// The dlsym that libhangtrace.so exports.
//
// Why wrap dlsym at all: since CUDA 11.3 the runtime, NCCL and framework
// libraries reach the driver through cuGetProcAddress, which they find with
// dlsym on a handle of libcuda.so.1, and Python's ctypes reaches every
// function with dlsym. Wrapping it hands out our wrapper for every call of
// gpu.spec (gpu::WrapLookup). And a program that probes for MPI with
// dlsym(RTLD_DEFAULT, "MPI_Init") must see what it sees untraced: our
// exported MPI wrappers stand in for MPI only when an MPI library is there.
//
// dlsym(RTLD_NEXT) must answer for its caller: "the objects after the one
// that asks". glibc finds the caller from its own return address, so the
// RTLD_NEXT path is a jump (not a call) into glibc's dlsym: the return
// address it sees is our caller's, its answer is exactly glibc's, and it
// allocates nothing and costs what glibc's does (a malloc interposer that
// resolves malloc with dlsym(RTLD_NEXT) from inside malloc must not recurse).
#include "interpose/dlsym.h"

#include <dlfcn.h>

#include <cstring>

#include "interpose/mpi_support.h"
#if HANGTRACE_HAVE_GPU
#include "interpose/gpu_support.h"
#endif

namespace {

using DlsymFn = void* (*)(void*, const char*);

DlsymFn FindRealDlsym() {
  // dlvsym is not wrapped, so it reaches glibc's own; 2.34 moved dlsym from
  // libdl into libc under a new version.
  DlsymFn f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (!f) f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  return f;
}

}  // namespace

// Read by the trampoline below; filled before main (and on first use).
extern "C" {
__attribute__((visibility("hidden"))) DlsymFn hangtrace_real_dlsym = nullptr;
}

// Called by the trampoline when dlsym(RTLD_NEXT) comes before our
// constructors ran (a library initialized before us: a malloc interposer's
// first malloc, from libstdc++'s own start-up).
extern "C" __attribute__((visibility("hidden"))) DlsymFn hangtrace_resolve_dlsym() {
  if (!hangtrace_real_dlsym) hangtrace_real_dlsym = FindRealDlsym();
  return hangtrace_real_dlsym;
}

namespace hangtrace {

void* RealDlsym(void* handle, const char* name) {
  if (!hangtrace_real_dlsym) hangtrace_real_dlsym = FindRealDlsym();
  return hangtrace_real_dlsym ? hangtrace_real_dlsym(handle, name) : nullptr;
}

}  // namespace hangtrace

// Every handle but RTLD_NEXT: glibc's answer, adjusted for our wrappers.
extern "C" __attribute__((visibility("hidden"))) void* hangtrace_dlsym_other(void* handle, const char* name) {
  void* p = hangtrace::RealDlsym(handle, name);
  if (!p || !name) return p;
  // One of our MPI wrappers (the global scope finds them first) where no MPI
  // library that can be traced is loaded: what the program would find
  // untraced, the next definition after this library's (an MPI stub's
  // own, as MUMPS's libseq defines MPI_* but no PMPI_*), or none. (An MPI
  // library defines PMPI_<name>; this library never does.)
  if (strncmp(name, "MPI_", 4) == 0) {
    Dl_info mine, found;
    if (dladdr(reinterpret_cast<void*>(&hangtrace_dlsym_other), &mine) && dladdr(p, &found) &&
        mine.dli_fbase == found.dli_fbase) {
      char pmpi[128] = "P";
      strncat(pmpi, name, sizeof(pmpi) - 2);
      if (!hangtrace::mpi::FindReal(pmpi)) return hangtrace::RealDlsym(RTLD_NEXT, name);
    }
  }
#if HANGTRACE_HAVE_GPU
  p = hangtrace::gpu::WrapLookup(name, p);
#endif
  return p;
}

// dlsym(handle, name): RTLD_NEXT ((void*)-1) jumps straight into glibc's
// dlsym with the caller's return address on the stack (finding glibc's
// dlsym first if it is not known yet); everything else goes to
// hangtrace_dlsym_other. x86-64 System V: handle in %rdi, name in %rsi.
#if defined(__x86_64__)
asm(R"(
  .text
  .globl dlsym
  .type dlsym, @function
  .p2align 4
dlsym:
  .cfi_startproc
  cmpq $-1, %rdi
  jne 1f
  movq hangtrace_real_dlsym(%rip), %rax
  testq %rax, %rax
  jnz 2f
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  call hangtrace_resolve_dlsym
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  testq %rax, %rax
  jz 1f
2:
  jmp *%rax
1:
  jmp hangtrace_dlsym_other
  .cfi_endproc
  .size dlsym, .-dlsym
)");
#else
#error "the dlsym trampoline is written for x86-64"
#endif
