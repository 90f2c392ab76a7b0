// A CUDA + NCCL program for the GPU wrapper tests, built against the real
// headers and run on the FAKE libraries of tests/fakes (no GPU here).
//
//   gpu_prog launches            kernels through every launch path; exits 0
//   gpu_prog hang-kernel         a kernel that never finishes, then a sync
//   mpirun -np N gpu_prog nccl FAULT RANK
//       NCCL over MPI-exchanged ids: world + split pairs; 5 steps of
//       all-reduce (world), grouped send/recv ring, broadcast (pair), sync.
//       At step 3 rank RANK does FAULT: none, skip (never calls the
//       all-reduce), mismatch (calls broadcast instead), kernel (launches a
//       kernel that never finishes first).
//   gpu_prog rtld-local          NCCL dlopen'ed RTLD_LOCAL, as PyTorch does
#define OMPI_SKIP_MPICXX 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#undef cuGetProcAddress

// What nvcc -default-stream per-thread makes cudaLaunchKernel call.
extern "C" cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);

// The fakes' own extensions (tests/fakes): how a test makes kernels.
extern "C" void fake_cudaRegisterKernel(const void* host_stub, const char* name, int ms);
extern "C" CUfunction fake_cuFunction(const char* name, int ms);
extern "C" unsigned long long fake_cuLastLaunchStream();
extern "C" unsigned long long fake_cuStreamId(CUstream s, int ptsz);

// Host stubs stand for kernels: their exported names are the kernel names.
extern "C" __attribute__((noinline, visibility("default"))) void k_quick() { asm volatile(""); }
extern "C" __attribute__((noinline, visibility("default"))) void k_forever() { asm volatile(""); }

#define CHECK(x)                                                          \
  do {                                                                    \
    long long rc_ = (long long)(x);                                       \
    if (rc_ != 0) {                                                       \
      fprintf(stderr, "%s:%d: %s failed: %lld\n", __FILE__, __LINE__, #x, rc_); \
      exit(2);                                                            \
    }                                                                     \
  } while (0)

#define EXPECT(cond)                                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      exit(3);                                                            \
    }                                                                     \
  } while (0)

static void Register() {
  fake_cudaRegisterKernel((const void*)&k_quick, "k_quick", 1);
  fake_cudaRegisterKernel((const void*)&k_forever, "k_forever", -1);
}

static int Launches() {
  Register();
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  dim3 grid(2, 1, 1), block(128, 1, 1);
  for (int i = 0; i < 3; ++i) CHECK(cudaLaunchKernel((const void*)&k_quick, grid, block, nullptr, 0, s));
  CHECK(cudaStreamSynchronize(s));
  const unsigned long long legacy = fake_cuStreamId(nullptr, 0), mine = fake_cuStreamId(nullptr, 1);
  EXPECT(legacy != mine);
  // The runtime's per-thread variant keeps its stream: the thread's own.
  CHECK(cudaLaunchKernel_ptsz((const void*)&k_quick, grid, block, nullptr, 0, nullptr));
  EXPECT(fake_cuLastLaunchStream() == mine);
  CHECK(cudaLaunchKernel((const void*)&k_quick, grid, block, nullptr, 0, nullptr));
  EXPECT(fake_cuLastLaunchStream() == legacy);
  // The driver, called directly.
  CUfunction f = fake_cuFunction("drv_kernel", 1);
  CHECK(cuLaunchKernel(f, 4, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
  // The driver reached through cuGetProcAddress, found with dlsym on a
  // handle of libcuda.so.1 (the way the runtime and NCCL reach it).
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  EXPECT(h);
  auto get_proc = (decltype(&cuGetProcAddress_v2))dlsym(h, "cuGetProcAddress_v2");
  EXPECT(get_proc);
  void *plain = nullptr, *per_thread = nullptr;
  CUdriverProcAddressQueryResult st;
  CHECK(get_proc("cuLaunchKernel", &plain, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  CHECK(get_proc("cuLaunchKernel", &per_thread, CUDA_VERSION, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  EXPECT(plain != per_thread);
  CUfunction g = fake_cuFunction("proc_kernel", 1);
  CHECK(((decltype(&cuLaunchKernel))plain)(g, 1, 1, 1, 64, 1, 1, 0, nullptr, nullptr, nullptr));
  EXPECT(fake_cuLastLaunchStream() == legacy);
  CHECK(((decltype(&cuLaunchKernel))per_thread)(g, 1, 1, 1, 64, 1, 1, 0, nullptr, nullptr, nullptr));
  EXPECT(fake_cuLastLaunchStream() == mine);
  CHECK(cudaDeviceSynchronize());
  usleep(100 * 1000);  // the poller notes the last completions
  printf("launches ok\n");
  return 0;
}

static int HangKernel() {
  Register();
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaLaunchKernel((const void*)&k_quick, dim3(1), dim3(32), nullptr, 0, s));
  CHECK(cudaLaunchKernel((const void*)&k_forever, dim3(8), dim3(256), nullptr, 0, s));
  printf("launched\n");
  fflush(stdout);
  CHECK(cudaStreamSynchronize(s));  // never returns
  return 1;
}

#ifndef GPU_PROG_NO_NCCL_LINK
static int Nccl(const char* fault, int fault_rank) {
  Register();
  MPI_Init(nullptr, nullptr);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ncclUniqueId id;
  if (rank == 0) CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = "ncclworld";
  ncclComm_t world, pair;
  CHECK(ncclCommInitRankConfig(&world, size, id, rank, &config));
  CHECK(ncclCommSplit(world, rank / 2, rank, &pair, nullptr));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  float *buf, *peer;
  CHECK(cudaMalloc((void**)&buf, 64 * sizeof(float)));
  CHECK(cudaMalloc((void**)&peer, 64 * sizeof(float)));
  const bool me = rank == fault_rank;
  for (int step = 1; step <= 5; ++step) {
    for (int i = 0; i < 64; ++i) buf[i] = float(rank + 1);
    if (step == 3) {  // where a fault strikes: the test ends the job a moment after every rank said this
      printf("step 3 rank %d\n", rank);
      fflush(stdout);
    }
    if (step == 3 && me && !strcmp(fault, "skip")) {
      for (;;) pause();  // this rank never reaches the all-reduce
    }
    if (step == 3 && me && !strcmp(fault, "kernel")) {
      CHECK(cudaLaunchKernel((const void*)&k_forever, dim3(8), dim3(256), nullptr, 0, s));
    }
    if (step == 3 && me && !strcmp(fault, "mismatch")) {
      CHECK(ncclBroadcast(buf, buf, 64, ncclFloat32, 0, world, s));
    } else {
      CHECK(ncclAllReduce(buf, buf, 64, ncclFloat32, ncclSum, world, s));
    }
    CHECK(ncclGroupStart());
    CHECK(ncclSend(buf, 64, ncclFloat32, (rank + 1) % size, world, s));
    CHECK(ncclRecv(peer, 64, ncclFloat32, (rank + size - 1) % size, world, s));
    CHECK(ncclGroupEnd());
    CHECK(ncclBroadcast(buf, buf, 64, ncclFloat32, 0, pair, s));
    CHECK(cudaStreamSynchronize(s));
    EXPECT(buf[0] == float(size * (size + 1) / 2));
  }
  CHECK(ncclCommDestroy(pair));
  CHECK(ncclCommDestroy(world));
  usleep(100 * 1000);
  MPI_Finalize();
  if (rank == 0) printf("nccl ok\n");
  return 0;
}
#endif

// As PyTorch: NCCL loaded RTLD_LOCAL by a library, called through the
// program's own references (here weak ones, bound to the preloaded wrappers).
extern "C" __attribute__((weak)) ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                                            ncclComm_t, cudaStream_t);
static int RtldLocal() {
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  EXPECT(h);
  auto get_id = (decltype(&ncclGetUniqueId))dlsym(h, "ncclGetUniqueId");
  auto init = (decltype(&ncclCommInitRank))dlsym(h, "ncclCommInitRank");
  auto destroy = (decltype(&ncclCommDestroy))dlsym(h, "ncclCommDestroy");
  EXPECT(get_id && init && destroy);
  EXPECT(&ncclAllReduce != nullptr);  // only the preloaded wrapper can define it here
  ncclUniqueId id;
  ncclComm_t comm;
  CHECK(get_id(&id));
  CHECK(init(&comm, 1, id, 0));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  float x[4] = {1, 2, 3, 4};
  CHECK(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(destroy(comm));
  usleep(100 * 1000);
  printf("rtld-local ok\n");
  return 0;
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "launches") return Launches();
  if (mode == "hang-kernel") return HangKernel();
#ifndef GPU_PROG_NO_NCCL_LINK
  if (mode == "nccl" && argc > 3) return Nccl(argv[2], atoi(argv[3]));
#endif
  if (mode == "rtld-local") return RtldLocal();
  fprintf(stderr, "usage: gpu_prog launches|hang-kernel|nccl FAULT RANK|rtld-local\n");
  return 64;
}
