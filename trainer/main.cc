// hangtrace-trainer: a real 3D-parallel (TP x PP x DP) trainer over MPI that
// trains on CPU and hangs on demand the ways large jobs hang.
//
// Model: a stack of residual MLP blocks, y = x + W2 relu(W1 x), with
// Megatron tensor parallelism: W1 column-parallel (rows of W1 split over
// TP), W2 row-parallel, one all-reduce over TP in the forward and one in the
// backward of every block. Blocks are split evenly over pipeline stages,
// run with a 1F1B schedule over micro-batches, activations and gradients
// sent between stages. Then a data-parallel gradient all-reduce, the last
// stage's loss averaged over DP and broadcast to its pipeline group (as
// DeepSpeed's _aggregate_total_loss does), and an all-reduce(MAX) of a done
// flag over world (as Megatron's exit check does).
//
// Data is synthetic and deterministic (a fixed linear teacher), so a TP=2,
// PP=2, DP=2 run and a 1-rank run of the same global batch give the same
// loss, step by step. Weights are generated from (seed, layer, row, col), so
// every topology starts from the same model.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "trainer/backend.h"
#include "trainer/faults.h"

namespace trainer {
namespace {

// --- deterministic numbers ----------------------------------------------------
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
float Uniform(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {  // in [-1, 1)
  uint64_t h = Mix(Mix(Mix(Mix(a) ^ b) ^ c) ^ d);
  return float(double(h >> 11) / double(1ull << 53) * 2.0 - 1.0);
}

struct Config {
  Topology topo;
  int steps = 10, layers = 4, hidden = 64, micro = 4, micro_size = 4;
  float lr = 1.0f;
  uint64_t seed = 1234;
  std::vector<Fault> faults;
  std::string truth, save, load, backend = "mpi";
  std::vector<int> skip;  // pairs: [a, b] step ranges to skip
};

// --- the model shard of one rank -----------------------------------------------
struct Layer {
  std::vector<float> w1, w2, g1, g2;  // w1: Fl x H (rows of W1), w2: H x Fl (cols of W2)
};

struct Saved {  // per micro-batch, per local layer: what backward needs
  std::vector<std::vector<float>> x, pre;
};

class Trainer {
 public:
  Trainer(const Config& c, Backend* b) : c_(c), b_(b), t_(c.topo) {
    H_ = c.hidden;
    F_ = 4 * H_;
    Fl_ = F_ / t_.tp;
    per_stage_ = c.layers / t_.pp;
    first_layer_ = t_.P() * per_stage_;
    for (int l = 0; l < per_stage_; ++l) {
      Layer L;
      int global = first_layer_ + l;
      L.w1.resize(size_t(Fl_ * H_));
      L.w2.resize(size_t(H_ * Fl_));
      const float s1 = 1.0f / std::sqrt(float(H_)), s2 = 0.5f / std::sqrt(float(F_));
      for (int r = 0; r < Fl_; ++r) {
        for (int k = 0; k < H_; ++k) L.w1[size_t(r * H_ + k)] = s1 * Uniform(c.seed, global, 1, uint64_t((t_.T() * Fl_ + r) * H_ + k));
      }
      for (int r = 0; r < H_; ++r) {
        for (int k = 0; k < Fl_; ++k) L.w2[size_t(r * Fl_ + k)] = s2 * Uniform(c.seed, global, 2, uint64_t(r * F_ + t_.T() * Fl_ + k));
      }
      L.g1.assign(L.w1.size(), 0);
      L.g2.assign(L.w2.size(), 0);
      layers_.push_back(std::move(L));
    }
  }

  bool FaultHere(FaultKind kind, int step) const {
    for (const Fault& f : c_.faults) {
      if (f.kind == kind && f.rank == t_.rank && f.step == step) return true;
    }
    return false;
  }

  // One training step; returns the loss (on every rank of the last stage's
  // pipeline groups, after the broadcast).
  float Step(int step) {
    const int b = c_.micro_size, M = c_.micro, P = t_.pp, s = t_.P();
    const bool first = s == 0, last = s == P - 1;
    step_ = step;
    tp_calls_ = 0;
    saved_.assign(size_t(M), Saved{});
    std::vector<std::vector<float>> outs(static_cast<size_t>(M));  // last stage: outputs
    float loss_sum = 0;
    const bool deadlock = FaultHere(FaultKind::kP2pDeadlock, step);
    // The next stage's partner of a p2p-deadlock rank sends first too.
    bool deadlock_partner = false;
    for (const Fault& f : c_.faults) {
      Topology faulty = t_;
      faulty.rank = f.rank;
      if (f.kind == FaultKind::kP2pDeadlock && f.step == step && t_.rank == t_.Rank(faulty.T(), faulty.P() + 1, faulty.D())) {
        deadlock_partner = true;
      }
    }
    if (deadlock_partner) {  // both stages send first, synchronously: neither receives
      std::vector<float> g(size_t(b * H_), 0.f);
      b_->Send(g.data(), g.size(), s - 1, 1, Group::kPp, true);
    }

    auto forward = [&](int m) {
      std::vector<float> x(size_t(b * H_));
      if (first) {
        for (int i = 0; i < b; ++i) {
          for (int k = 0; k < H_; ++k) x[size_t(i * H_ + k)] = Uniform(c_.seed, 7, Sample(step, m, i), uint64_t(k));
        }
      } else {
        b_->Recv(x.data(), x.size(), s - 1, 0, Group::kPp);
      }
      for (int l = 0; l < per_stage_; ++l) x = LayerForward(l, m, x);
      if (!last) {
        b_->Send(x.data(), x.size(), s + 1, 0, Group::kPp, deadlock);
      } else {
        outs[size_t(m)] = x;
      }
    };
    auto backward = [&](int m) {
      std::vector<float> dy(size_t(b * H_));
      if (last) {
        // MSE against a fixed linear teacher: target_k = sum_j A_kj x_j.
        const std::vector<float>& y = outs[size_t(m)];
        float l = 0;
        for (int i = 0; i < b; ++i) {
          for (int k = 0; k < H_; ++k) {
            float target = 0;
            for (int j = 0; j < H_; ++j) {
              target += 0.3f * Uniform(c_.seed, 9, uint64_t(k), uint64_t(j)) * Uniform(c_.seed, 7, Sample(step, m, i), uint64_t(j));
            }
            float e = y[size_t(i * H_ + k)] - target;
            l += e * e;
            dy[size_t(i * H_ + k)] = 2 * e / float(b * H_ * M * t_.dp);
          }
        }
        loss_sum += l / float(b * H_);
      } else {
        b_->Recv(dy.data(), dy.size(), s + 1, 1, Group::kPp);
      }
      for (int l = per_stage_ - 1; l >= 0; --l) dy = LayerBackward(l, m, dy);
      if (!first) b_->Send(dy.data(), dy.size(), s - 1, 1, Group::kPp, false);
    };

    // 1F1B: warm-up forwards, steady one-forward-one-backward, cool-down.
    const int warmup = std::min(P - s - 1, M);
    for (int m = 0; m < warmup; ++m) forward(m);
    for (int m = 0; m < M - warmup; ++m) {
      forward(warmup + m);
      if (m == 0 && FaultHere(FaultKind::kCrash, step)) abort();  // mid-step
      backward(m);
    }
    for (int m = M - warmup; m < M; ++m) backward(m);
    if (warmup == M && FaultHere(FaultKind::kCrash, step)) abort();

    // Data-parallel gradient all-reduce (one call for the whole shard).
    std::vector<float> flat;
    for (Layer& L : layers_) {
      flat.insert(flat.end(), L.g1.begin(), L.g1.end());
      flat.insert(flat.end(), L.g2.begin(), L.g2.end());
    }
    b_->AllreduceSum(flat.data(), flat.size(), Group::kDp);
    size_t at = 0;
    for (Layer& L : layers_) {
      for (size_t i = 0; i < L.w1.size(); ++i) L.w1[i] -= c_.lr * flat[at++];
      for (size_t i = 0; i < L.w2.size(); ++i) L.w2[i] -= c_.lr * flat[at++];
      std::fill(L.g1.begin(), L.g1.end(), 0.f);
      std::fill(L.g2.begin(), L.g2.end(), 0.f);
    }

    // The loss: averaged over DP on the last stage, then broadcast from it
    // to its pipeline group. Then the exit check over world.
    float loss = 0;
    if (last) {
      loss = loss_sum;
      b_->AllreduceSum(&loss, 1, Group::kDp);
      loss /= float(M * t_.dp);
    }
    int done = step + 1 == c_.steps ? 1 : 0;
    auto bcast = [&] {
      int root = P - 1;
      if (FaultHere(FaultKind::kRoot, step)) root = 0;  // another root than the others
      if (FaultHere(FaultKind::kSeedHang, step)) return;  // the root never broadcasts
      b_->Bcast(&loss, 1, root, Group::kPp);
    };
    auto exit_check = [&] { b_->AllreduceMax(&done, 1, Group::kWorld); };
    if (FaultHere(FaultKind::kSwap, step)) {
      exit_check();
      bcast();
    } else {
      bcast();
      exit_check();
    }
    return loss;
  }

  bool Save(const std::string& path, int next_step) const {
    std::ofstream out(path + "." + std::to_string(t_.rank), std::ios::binary);
    out.write(reinterpret_cast<const char*>(&next_step), sizeof(next_step));
    for (const Layer& L : layers_) {
      out.write(reinterpret_cast<const char*>(L.w1.data()), std::streamsize(L.w1.size() * sizeof(float)));
      out.write(reinterpret_cast<const char*>(L.w2.data()), std::streamsize(L.w2.size() * sizeof(float)));
    }
    return bool(out);
  }
  bool Load(const std::string& path, int* next_step) {
    std::ifstream in(path + "." + std::to_string(t_.rank), std::ios::binary);
    in.read(reinterpret_cast<char*>(next_step), sizeof(*next_step));
    for (Layer& L : layers_) {
      in.read(reinterpret_cast<char*>(L.w1.data()), std::streamsize(L.w1.size() * sizeof(float)));
      in.read(reinterpret_cast<char*>(L.w2.data()), std::streamsize(L.w2.size() * sizeof(float)));
    }
    return bool(in);
  }

  // Model FLOPs of one iteration of the whole job: forward + backward
  // (3x), two matmuls of 2*H*F multiply-adds per block, per sample.
  double FlopsPerIteration() const { return 3.0 * 2 * 2 * double(H_) * F_ * c_.layers * GlobalBatch(); }
  int GlobalBatch() const { return c_.micro * c_.micro_size * t_.dp; }

 private:
  // Index of row i of micro-batch m of this DP replica in the data stream.
  uint64_t Sample(int step, int m, int i) const {
    return uint64_t(step) * uint64_t(GlobalBatch()) + uint64_t((t_.D() * c_.micro + m) * c_.micro_size + i);
  }

  void TpAllreduce(std::vector<float>& v) {
    const bool first_of_step = tp_calls_++ == 0;
    if (first_of_step && FaultHere(FaultKind::kStop, step_)) {
      fprintf(stderr, "trainer: rank %d stops before a TP all-reduce (fault stop)\n", t_.rank);
      for (;;) pause();  // blocks forever, outside any MPI call
    }
    if (first_of_step && FaultHere(FaultKind::kCount, step_)) {
      b_->AllreduceSum(v.data(), v.size() / 2, Group::kTp);  // half the count of the others
      return;
    }
    if (first_of_step && FaultHere(FaultKind::kDtype, step_)) {
      b_->AllreduceSumAsHalf(v.data(), v.size(), Group::kTp);
      return;
    }
    b_->AllreduceSum(v.data(), v.size(), Group::kTp);
  }

  std::vector<float> LayerForward(int l, int m, const std::vector<float>& x) {
    const int b = c_.micro_size;
    Layer& L = layers_[size_t(l)];
    std::vector<float> pre(size_t(b * Fl_)), y(size_t(b * H_), 0.f);
    for (int i = 0; i < b; ++i) {
      for (int r = 0; r < Fl_; ++r) {
        float a = 0;
        for (int k = 0; k < H_; ++k) a += L.w1[size_t(r * H_ + k)] * x[size_t(i * H_ + k)];
        pre[size_t(i * Fl_ + r)] = a;
      }
      for (int r = 0; r < H_; ++r) {
        float a = 0;
        for (int k = 0; k < Fl_; ++k) a += L.w2[size_t(r * Fl_ + k)] * std::max(0.f, pre[size_t(i * Fl_ + k)]);
        y[size_t(i * H_ + r)] = a;
      }
    }
    TpAllreduce(y);  // row-parallel W2: partial sums over TP
    Straggle();
    for (size_t i = 0; i < y.size(); ++i) y[i] += x[i];
    saved_[size_t(m)].x.push_back(x);
    saved_[size_t(m)].pre.push_back(std::move(pre));
    return y;
  }

  std::vector<float> LayerBackward(int l, int m, const std::vector<float>& dy) {
    const int b = c_.micro_size;
    Layer& L = layers_[size_t(l)];
    const std::vector<float>& x = saved_[size_t(m)].x[size_t(l)];
    const std::vector<float>& pre = saved_[size_t(m)].pre[size_t(l)];
    std::vector<float> dpre(size_t(b * Fl_)), dx(size_t(b * H_), 0.f);
    for (int i = 0; i < b; ++i) {
      for (int k = 0; k < Fl_; ++k) {
        float h = std::max(0.f, pre[size_t(i * Fl_ + k)]), dh = 0;
        for (int r = 0; r < H_; ++r) {
          L.g2[size_t(r * Fl_ + k)] += dy[size_t(i * H_ + r)] * h;
          dh += L.w2[size_t(r * Fl_ + k)] * dy[size_t(i * H_ + r)];
        }
        dpre[size_t(i * Fl_ + k)] = pre[size_t(i * Fl_ + k)] > 0 ? dh : 0;
      }
      for (int r = 0; r < Fl_; ++r) {
        for (int k = 0; k < H_; ++k) {
          L.g1[size_t(r * H_ + k)] += dpre[size_t(i * Fl_ + r)] * x[size_t(i * H_ + k)];
          dx[size_t(i * H_ + k)] += L.w1[size_t(r * H_ + k)] * dpre[size_t(i * Fl_ + r)];
        }
      }
    }
    TpAllreduce(dx);  // column-parallel W1: input gradients summed over TP
    Straggle();
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += dy[i];  // the residual
    return dx;
  }

  void Straggle() {
    for (const Fault& f : c_.faults) {
      if (f.kind == FaultKind::kStraggler && f.rank == t_.rank) {
        std::this_thread::sleep_for(std::chrono::microseconds(int64_t(200 * (f.factor - 1))));
      }
    }
  }

  const Config& c_;
  Backend* b_;
  Topology t_;
  int H_, F_, Fl_, per_stage_, first_layer_;
  int step_ = 0, tp_calls_ = 0;
  std::vector<Layer> layers_;
  std::vector<Saved> saved_;
};

// --- the truth of a fault ----------------------------------------------------------
std::string Label(const char* prefix, int index) { return prefix + std::to_string(index); }

nlohmann::json Truth(const Config& c) {
  using nlohmann::json;
  const Topology& t = c.topo;
  json truth = {{"schema", "hangtrace.truth/1"}, {"fault", "none"}, {"verdict", "no-hang"},
                {"culprits", json::array()}, {"stuck", json::array()}};
  const Shape shape{t.tp, t.pp, t.dp};
  for (const Fault& f : c.faults) {
    // The verdict and the culprits are the catalogue's (faults.h); where the
    // other ranks wait is this trainer's own knowledge of its step.
    const FaultTruth ft = TruthOf(f, shape);
    truth["fault"] = f.name();
    truth["verdict"] = ft.verdict;
    truth["culprits"] = ft.culprits;
    if (f.kind == FaultKind::kStraggler) continue;
    Topology r = t;
    r.rank = f.rank;
    if (f.kind == FaultKind::kSeedHang || f.kind == FaultKind::kSwap) {
      // Its pipeline group waits in the broadcast; every other rank in the
      // done all-reduce, the culprit included.
      std::string pp = Label("pp", r.T() + t.tp * r.D()), in_bcast, in_allreduce;
      for (int q = 0; q < t.World(); ++q) {
        Topology o = t;
        o.rank = q;
        bool member = o.T() == r.T() && o.D() == r.D() && q != f.rank;
        std::string& list = member ? in_bcast : in_allreduce;
        list += (list.empty() ? "" : ",") + std::to_string(q);
      }
      truth["stuck"] = json::array({{{"ranks", in_bcast}, {"op", "bcast"}, {"comm", pp}},
                                    {{"ranks", in_allreduce}, {"op", "allreduce"}, {"comm", "world"}}});
    } else if (f.kind == FaultKind::kStop || f.kind == FaultKind::kCrash) {
      truth["stuck_complete"] = false;  // where the others end up depends on timing
    } else if (f.kind == FaultKind::kCount || f.kind == FaultKind::kDtype || f.kind == FaultKind::kRoot) {
      truth["stuck_complete"] = false;  // MPI's behaviour on mismatched arguments is undefined
    } else if (f.kind == FaultKind::kP2pDeadlock) {
      truth["stuck_complete"] = false;
    }
    break;
  }
  truth["topology"] = {{"tp", t.tp}, {"pp", t.pp}, {"dp", t.dp}, {"world", t.World()}};
  return truth;
}

}  // namespace
}  // namespace trainer

int main(int argc, char** argv) {
  using namespace trainer;
  Config c;
  std::vector<std::string> faults;
  CLI::App app{
      "A TP x PP x DP trainer over MPI that trains for real on CPU and can be made to hang the ways\n"
      "large jobs hang. World = tp*pp*dp ranks, Megatron's rank order (TP fastest, then PP, DP).\n\n"
      "faults (--fault KIND@rank=R,step=S[,factor=F], repeatable):\n" +
          FaultHelp() +
          "\nexample:\n"
      "  mpirun -np 8 hangtrace run -- hangtrace-trainer --tp 2 --pp 2 --dp 2 --steps 20 \\\n"
      "      --fault seed-hang@rank=3,step=5 --truth truth.json\n",
      "hangtrace-trainer"};
  app.add_option("--tp", c.topo.tp, "tensor-parallel size (default 1)");
  app.add_option("--pp", c.topo.pp, "pipeline stages (default 1)");
  app.add_option("--dp", c.topo.dp, "data-parallel size (default 1)");
  app.add_option("--steps", c.steps, "training steps (default 10)");
  app.add_option("--layers", c.layers, "MLP blocks, divisible by --pp (default 4)");
  app.add_option("--hidden", c.hidden, "hidden size; the MLP is 4x wider (default 64)");
  app.add_option("--micro-batches", c.micro, "micro-batches per step (default 4)");
  app.add_option("--micro-batch-size", c.micro_size, "samples per micro-batch (default 4)");
  app.add_option("--lr", c.lr, "SGD learning rate (default 1)");
  app.add_option("--seed", c.seed, "model and data seed (default 1234)");
  app.add_option("--fault", faults, "inject a fault (see above)");
  app.add_option("--truth", c.truth, "write the ground truth of the injected fault to this file (rank 0)");
  app.add_option("--train-range-to-skip", c.skip,
                 "step ranges a b [c d ...] to skip (their batches are drawn and dropped, so the data order "
                 "stays as without skipping)");
  app.add_option("--save", c.save, "write a checkpoint (one file per rank, PATH.<rank>) at the end");
  app.add_option("--load", c.load, "start from the checkpoint PATH.<rank>");
  app.add_option("--backend", c.backend, "mpi (default) or nccl")->check(CLI::IsMember({"mpi", "nccl"}));
  bool list_faults = false;
  app.add_flag("--list-faults", list_faults,
               "print each fault and the ranks of this --tp/--pp/--dp where it can be injected, and exit "
               "(no MPI: scripts/accuracy.sh reads it)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (list_faults) {
    for (const FaultInfo& info : kFaults) {
      std::string ranks;
      for (int r : EligibleRanks(info.kind, Shape{c.topo.tp, c.topo.pp, c.topo.dp})) {
        ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      }
      printf("%s %s %s\n", info.name, info.verdict, ranks.empty() ? "-" : ranks.c_str());
    }
    return 0;
  }
  for (const std::string& s : faults) {
    Fault f;
    std::string err;
    if (!ParseFault(s, &f, &err)) {
      fprintf(stderr, "hangtrace-trainer: %s\n", err.c_str());
      return 2;
    }
    if (f.step < 0) f.step = 0;
    c.faults.push_back(f);
  }
  if (c.skip.size() % 2) {
    fprintf(stderr, "hangtrace-trainer: --train-range-to-skip takes pairs of steps (a b)\n");
    return 2;
  }
#if !HANGTRACE_TRAINER_NCCL
  if (c.backend == "nccl") {
    fprintf(stderr, "hangtrace-trainer: this build has no NCCL backend (CUDA or NCCL were not found when it was "
                    "configured); use --backend mpi\n");
    return 2;
  }
#endif

  MPI_Init(&argc, &argv);
  int world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &c.topo.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  auto fail = [&](const std::string& why) {
    if (c.topo.rank == 0) fprintf(stderr, "hangtrace-trainer: %s\n", why.c_str());
    MPI_Finalize();
    return 2;
  };
  if (world != c.topo.World()) {
    return fail("launched with " + std::to_string(world) + " ranks, but tp*pp*dp = " + std::to_string(c.topo.World()));
  }
  if (c.layers % c.topo.pp || (4 * c.hidden) % c.topo.tp) {
    return fail("--layers must be divisible by --pp, and 4*--hidden by --tp");
  }
  for (const Fault& f : c.faults) {
    std::string why;
    if (!CanInject(f, Shape{c.topo.tp, c.topo.pp, c.topo.dp}, c.steps, &why)) return fail(why);
  }
  if (c.topo.rank == 0 && !c.truth.empty()) std::ofstream(c.truth) << Truth(c).dump(2) << "\n";

  std::unique_ptr<Backend> backend;
#if HANGTRACE_TRAINER_NCCL
  if (c.backend == "nccl") {
    std::string why;
    backend.reset(MakeNcclBackend(c.topo, &why));
    if (!backend) return fail(why);
  }
#endif
  if (!backend) backend.reset(MakeMpiBackend(c.topo));
  Trainer trainer(c, backend.get());
  int start = 0;
  if (!c.load.empty() && !trainer.Load(c.load, &start)) return fail("cannot read checkpoint " + c.load);
  if (c.topo.rank == 0) {
    printf("hangtrace-trainer: %d ranks (tp %d, pp %d, dp %d), %d blocks of hidden %d, global batch %d, backend %s\n",
           world, c.topo.tp, c.topo.pp, c.topo.dp, c.layers, c.hidden, trainer.GlobalBatch(), backend->Name().c_str());
    fflush(stdout);
  }
  for (int step = start; step < c.steps; ++step) {
    bool skipped = false;
    for (size_t i = 0; i + 1 < c.skip.size(); i += 2) skipped |= step >= c.skip[i] && step <= c.skip[i + 1];
    if (skipped) {
      if (c.topo.rank == 0) printf(" iteration %6d/%6d | skipped (--train-range-to-skip)\n", step + 1, c.steps);
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    float loss = trainer.Step(step);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (c.topo.rank == 0) {
      printf(" iteration %6d/%6d | consumed samples: %8d | elapsed time per iteration (ms): %8.2f | lm loss: %.6E | "
             "samples per second: %.1f | TFLOPs: %.4f |\n",
             step + 1, c.steps, (step + 1) * trainer.GlobalBatch(), s * 1e3, double(loss), trainer.GlobalBatch() / s,
             trainer.FlopsPerIteration() / (s * world * 1e12));
      fflush(stdout);
    }
  }
  if (!c.save.empty() && !trainer.Save(c.save, c.steps)) return fail("cannot write checkpoint " + c.save);
  MPI_Finalize();
  return 0;
}
