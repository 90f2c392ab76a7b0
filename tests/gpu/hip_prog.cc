// A HIP program for the HIP wrapper tests, built against Debian's HIP
// headers and run on the FAKE libamdhip64.so.5 of tests/fakes.
//   hip_prog launches: hipLaunchKernel, its _spt variant through
//   hipGetProcAddress, hipModuleLaunchKernel; then syncs and exits 0.
#include <hip/hip_runtime_api.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

extern "C" void fake_hipRegisterKernel(const void* host_stub, const char* name, int ms);
extern "C" hipFunction_t fake_hipFunction(const char* name, int ms);
extern "C" unsigned long long fake_hipLastLaunchStream();
extern "C" unsigned long long fake_hipStreamId(hipStream_t s, int spt);
// HIP 6.2's lookup, not in the 5.2 headers.
extern "C" hipError_t hipGetProcAddress(const char* symbol, void** pfn, int hipVersion, uint64_t flags, int* status);

extern "C" __attribute__((noinline, visibility("default"))) void hip_quick() { asm volatile(""); }

#define CHECK(x)                                                              \
  do {                                                                        \
    if ((x) != hipSuccess) {                                                  \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x);          \
      exit(2);                                                                \
    }                                                                         \
  } while (0)

int main() {
  fake_hipRegisterKernel((const void*)&hip_quick, "hip_quick", 1);
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  CHECK(hipLaunchKernel((const void*)&hip_quick, dim3(3), dim3(64), nullptr, 0, s));
  void* spt = nullptr;
  int status = 0;
  CHECK(hipGetProcAddress("hipLaunchKernel", &spt, 60200000, 2, &status));
  auto launch_spt = (decltype(&hipLaunchKernel))spt;
  CHECK(launch_spt((const void*)&hip_quick, dim3(1), dim3(32), nullptr, 0, nullptr));
  if (fake_hipLastLaunchStream() != fake_hipStreamId(nullptr, 1)) {
    fprintf(stderr, "the _spt launch did not run on the thread's stream\n");
    return 3;
  }
  CHECK(hipModuleLaunchKernel(fake_hipFunction("module_kernel", 1), 2, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr));
  CHECK(hipStreamSynchronize(s));
  CHECK(hipDeviceSynchronize());
  usleep(100 * 1000);
  printf("hip ok\n");
  return 0;
}
