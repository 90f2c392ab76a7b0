// Which MPI ABI the process speaks, decided at its first MPI call, and the
// exported MPI symbols pointed at that ABI's wrappers (mpi_abi.h).
#include "interpose/mpi_abi.h"

#include <dlfcn.h>
#include <pthread.h>

#include <cstring>
#include <string>

#include "interpose/dlsym.h"
#include "interpose/mpi_support.h"  // Open MPI's build: FindReal
#include "tracer/internal.h"        // WriteStderrLine

namespace hangtrace::mpi_abi {
namespace {

// kPassThrough: the process's MPI cannot be traced (a stub such as MUMPS's
// libseq or PETSc's mpiuni defines MPI_* but no PMPI_*): every call goes
// straight to the program's own MPI_* function, as untraced.
enum Abi : int { kUndecided = 0, kOpenMpi = 1, kMpich = 2, kPassThrough = 3 };
int g_abi = kUndecided;
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

// Open MPI's handles are data symbols of its library; MPICH's family has
// MPICH's internals (MPIR_*), or says so in its version string (Intel MPI's
// names neither). Anything else goes to the Open MPI build, which says
// that it is not an MPI hangtrace was built for and passes its calls on.
Abi Detect() {
  std::string path;
  void* library = mpi::OpenMpiLibrary(&path);
  if (path.empty()) {
    // No PMPI_Init anywhere: an MPI the wrappers cannot call through, when
    // something else defines MPI_Init; else no MPI is loaded yet.
    return RealDlsym(RTLD_NEXT, "MPI_Init") ? kPassThrough : kUndecided;
  }
  auto has = [&](const char* symbol) { return mpi::MpiData(symbol, library) != nullptr; };
  Abi abi = kOpenMpi;
  if (has("ompi_mpi_comm_world")) {
    abi = kOpenMpi;
  } else if (has("MPIR_Err_return_comm") || has("MPIR_Process")) {
    abi = kMpich;
  } else if (auto version = reinterpret_cast<int (*)(char*, int*)>(mpi::FindReal("PMPI_Get_library_version"))) {
    static char text[8192];  // MPICH's MPI_MAX_LIBRARY_VERSION_STRING
    int len = 0;
    if (version(text, &len) == 0) {
      text[sizeof(text) - 1] = '\0';
      for (const char* family : {"MPICH", "Intel(R) MPI", "MVAPICH"}) {
        if (strstr(text, family)) abi = kMpich;
      }
    }
  }
  if (library) dlclose(library);
  return abi;
}

void PointTable(Abi abi) {
  if (abi == kPassThrough) {
    Dl_info where{};
    dladdr(RealDlsym(RTLD_NEXT, "MPI_Init"), &where);
    std::string line = "hangtrace: ";
    line += where.dli_fname ? where.dli_fname : "the program's MPI";
    line += " defines MPI_* but no PMPI_* (an MPI stub, such as MUMPS's libseq or PETSc's mpiuni?): its calls run "
            "untraced";
    WriteStderrLine(line.c_str());
  }
  for (unsigned i = 0; i < kNumEntries; ++i) {
    const Entry& e = kEntries[i];
    void* target = e.ompi;
    if (abi == kPassThrough) {
      // The program's own function (the next definition after this
      // library's); one it lacks is one its callers could not have linked.
      target = RealDlsym(RTLD_NEXT, e.name);
      if (!target) target = reinterpret_cast<void*>(&mpi::NoSuchMpiFunction);
    } else if (abi == kMpich) {
      target = e.mpich ? e.mpich : RealDlsym(RTLD_NEXT, e.name);
      if (!target) target = e.ompi;  // no such function in this MPI: a caller would have failed to link
    }
    __atomic_store_n(&hangtrace_mpi_targets[i], target, __ATOMIC_RELEASE);
  }
}

}  // namespace
}  // namespace hangtrace::mpi_abi

using namespace hangtrace::mpi_abi;

// The first call of each symbol (its entry still points at its resolver):
// decides the ABI once, and returns where call `index` goes.
extern "C" __attribute__((visibility("hidden"), used)) void* hangtrace_mpi_choose(unsigned index) {
  int abi = __atomic_load_n(&g_abi, __ATOMIC_ACQUIRE);
  if (abi == kUndecided) {
    pthread_mutex_lock(&g_lock);
    abi = __atomic_load_n(&g_abi, __ATOMIC_ACQUIRE);
    if (abi == kUndecided) {
      abi = Detect();
      if (abi != kUndecided) {
        PointTable(Abi(abi));
        __atomic_store_n(&g_abi, abi, __ATOMIC_RELEASE);
      }
    }
    pthread_mutex_unlock(&g_lock);
  }
  // No MPI library loaded yet: the Open MPI build's wrapper, which passes
  // the call on as it would untraced; the next call looks again.
  if (abi == kUndecided) return kEntries[index].ompi;
  return __atomic_load_n(&hangtrace_mpi_targets[index], __ATOMIC_ACQUIRE);
}

// x86-64 System V: the arguments (registers %rdi..%r9, %rax for varargs,
// and the stack) are kept across hangtrace_mpi_choose and handed on
// untouched; %r11 (scratch at a call) holds the entry's index.
asm(R"(
  .text
  .globl hangtrace_mpi_resolve
  .hidden hangtrace_mpi_resolve
  .type hangtrace_mpi_resolve, @function
  .p2align 4
hangtrace_mpi_resolve:
  .cfi_startproc
  pushq %rdi
  .cfi_adjust_cfa_offset 8
  pushq %rsi
  .cfi_adjust_cfa_offset 8
  pushq %rdx
  .cfi_adjust_cfa_offset 8
  pushq %rcx
  .cfi_adjust_cfa_offset 8
  pushq %r8
  .cfi_adjust_cfa_offset 8
  pushq %r9
  .cfi_adjust_cfa_offset 8
  pushq %rax
  .cfi_adjust_cfa_offset 8
  movl %r11d, %edi
  call hangtrace_mpi_choose
  movq %rax, %r10
  popq %rax
  .cfi_adjust_cfa_offset -8
  popq %r9
  .cfi_adjust_cfa_offset -8
  popq %r8
  .cfi_adjust_cfa_offset -8
  popq %rcx
  .cfi_adjust_cfa_offset -8
  popq %rdx
  .cfi_adjust_cfa_offset -8
  popq %rsi
  .cfi_adjust_cfa_offset -8
  popq %rdi
  .cfi_adjust_cfa_offset -8
  jmp *%r10
  .cfi_endproc
  .size hangtrace_mpi_resolve, .-hangtrace_mpi_resolve
)");
