#include "merger/simulate.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>

#include "merger/rank_set.h"
#include "merger/trace_writer.h"

namespace hangtrace {

using trainer::FaultKind;

namespace {

// The MPI call table as the wrappers register it, generated from
// interpose/mpi.spec: the simulator's files describe their calls exactly as
// real ones do.
struct SpecCall {
  const char* name;
  fmt::Op op;
  uint8_t flags;
};
constexpr SpecCall kMpiSpec[] = {
#include "interpose/mpi_calls.gen.inc"
};

// The calls a simulated rank makes: index = CallInfo index in each file.
enum SimCall : uint16_t { kInit, kAllreduce, kBcast, kSend, kRecv, kSsend, kFinalize, kNumCalls };
const SpecCall& Spec(const char* name) {
  for (const SpecCall& c : kMpiSpec) {
    if (strcmp(c.name, name) == 0) return c;
  }
  abort();  // a call the spec lost: a build error in spirit
}
const SpecCall kCalls[kNumCalls] = {Spec("MPI_Init"), Spec("MPI_Allreduce"), Spec("MPI_Bcast"), Spec("MPI_Send"),
                                    Spec("MPI_Recv"), Spec("MPI_Ssend"), Spec("MPI_Finalize")};

enum Kind : uint8_t { kWorld, kTp, kPp, kDp };
enum Phase : uint8_t { kForward, kBackward, kOptimizer, kEndOfStep };
const char* const kPhaseFrames[] = {"forward_step", "backward_step", "optimizer_step", "train_step"};

struct Op {
  uint16_t call;
  Kind kind;
  Phase phase;
  int32_t peer;    // comm rank: root of bcast, peer of send/recv
  int32_t tag;
  uint64_t count;
  fmt::Dtype dtype;
  fmt::Redop redop;
};

struct Topo {
  int tp, pp, dp, world;
  int T(int r) const { return r % tp; }
  int P(int r) const { return (r / tp) % pp; }
  int D(int r) const { return r / (tp * pp); }
  int Rank(int t, int p, int d) const { return t + tp * (p + pp * d); }
  // Which group of its kind rank r is in: the K of tpK, ppK, dpK (the
  // trainer's labels).
  int Group(Kind k, int r) const {
    switch (k) {
      case kWorld: return 0;
      case kTp: return P(r) + pp * D(r);
      case kPp: return T(r) + tp * D(r);
      case kDp: return T(r) + tp * P(r);
    }
    return 0;
  }
  std::string Label(Kind k, int r) const {
    static const char* const prefix[4] = {"world", "tp", "pp", "dp"};
    return k == kWorld ? "world" : prefix[k] + std::to_string(Group(k, r));
  }
  // Global comm index (0 world, then the tp, pp and dp groups).
  int Comm(Kind k, int r) const {
    const int base[4] = {0, 1, 1 + pp * dp, 1 + pp * dp + tp * dp};
    return base[k] + Group(k, r);
  }
  int CommRank(Kind k, int r) const { return k == kWorld ? r : k == kTp ? T(r) : k == kPp ? P(r) : D(r); }
  int CommSize(Kind k) const { return k == kWorld ? world : k == kTp ? tp : k == kPp ? pp : dp; }
  int WorldOf(Kind k, int r, int comm_rank) const {
    switch (k) {
      case kWorld: return comm_rank;
      case kTp: return Rank(comm_rank, P(r), D(r));
      case kPp: return Rank(T(r), comm_rank, D(r));
      case kDp: return Rank(T(r), P(r), comm_rank);
    }
    return -1;
  }
};

constexpr uint64_t kHidden = 4096, kGrad = 1 << 20;
constexpr int64_t kOpNs = 1000000;  // each simulated op takes 1 ms

std::vector<Op> StepProgram(const SimConfig& c, int stage) {
  std::vector<Op> ops;
  auto coll = [&](uint16_t call, Kind k, Phase ph, int32_t root, uint64_t n, fmt::Redop op) {
    ops.push_back({call, k, ph, root, 0, n, fmt::Dtype::kFloat32, op});
  };
  auto p2p = [&](uint16_t call, Phase ph, int32_t peer, int32_t tag) {
    ops.push_back({call, kPp, ph, peer, tag, kHidden, fmt::Dtype::kFloat32, fmt::Redop::kNone});
  };
  for (int m = 0; m < c.micro; ++m) {
    if (stage > 0) p2p(kRecv, kForward, stage - 1, 0);
    for (int l = 0; l < c.layers; ++l) coll(kAllreduce, kTp, kForward, -1, kHidden, fmt::Redop::kSum);
    if (stage < c.pp - 1) p2p(kSend, kForward, stage + 1, 0);
  }
  for (int m = 0; m < c.micro; ++m) {
    if (stage < c.pp - 1) p2p(kRecv, kBackward, stage + 1, 1);
    for (int l = 0; l < c.layers; ++l) coll(kAllreduce, kTp, kBackward, -1, kHidden, fmt::Redop::kSum);
    if (stage > 0) p2p(kSend, kBackward, stage - 1, 1);
  }
  coll(kAllreduce, kDp, kOptimizer, -1, kGrad, fmt::Redop::kSum);
  coll(kBcast, kPp, kEndOfStep, c.pp - 1, 1, fmt::Redop::kNone);  // the loss, from the last stage
  coll(kAllreduce, kWorld, kEndOfStep, -1, 1, fmt::Redop::kMax);  // the done flag
  return ops;
}

size_t FirstOf(const std::vector<Op>& ops, Kind k, uint16_t call) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == k && ops[i].call == call) return i;
  }
  return ops.size();
}

uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Sequence counters of one rank: collectives per comm kind, p2p per
// (direction, peer, tag).
struct Counters {
  uint64_t coll[4] = {};
  std::map<std::tuple<int, int, int>, uint64_t> p2p;
  uint64_t Next(const Op& op) {
    if (op.call == kSend || op.call == kSsend) return ++p2p[{1, op.peer, op.tag}];
    if (op.call == kRecv) return ++p2p[{0, op.peer, op.tag}];
    return ++coll[op.kind];
  }
};

// One simulation, in its steps: Plan (programs, steps, faults checked),
// InjectFaults (the faulty ranks' own programs), RunEngine (where every
// rank ends up), WriteFiles (one trace file per rank, in parallel) and
// Truth (what a diagnosis must say).
class Simulation {
 public:
  explicit Simulation(const SimConfig& config) : c(config), topo{c.tp, c.pp, c.dp, c.tp * c.pp * c.dp} {}

  bool Plan(std::string* error) {
    if (c.tp < 1 || c.pp < 1 || c.dp < 1 || c.micro < 1 || c.layers < 1) {
      *error = "tp, pp, dp, micro-batches and layers must be at least 1";
      return false;
    }
    // Programs: one template step per pipeline stage (middle stages both
    // receive and send, so stages differ in length).
    for (int p = 0; p < c.pp; ++p) templates.push_back(StepProgram(c, p));
    if (c.records) {
      // Two records (BEGIN, END) per op, plus MPI_Init.
      size_t most = 0;
      for (const auto& t : templates) most = std::max(most, t.size());
      c.steps = std::max<int>(1, int((c.records + 2 * most - 1) / (2 * most)));
    }
    // Faults: checked by the catalogue, and the step where they strike.
    fault_step = c.steps;  // no fault: every step completes
    for (trainer::Fault& f : c.faults) {
      if (f.step < 0) f.step = c.steps - 1;
      if (!trainer::CanInject(f, trainer::Shape{c.tp, c.pp, c.dp}, c.steps, error)) return false;
      if (f.kind != FaultKind::kStraggler) fault_step = std::min(fault_step, f.step);
    }
    tail_steps = c.steps - fault_step;
    halt.assign(size_t(topo.world), -1);
    crashed.assign(size_t(topo.world), false);
    return true;
  }

  // Faulty ranks get their own copy of the steps from the faulty one on.
  void InjectFaults() {
    for (const trainer::Fault& f : c.faults) {
      if (f.kind == FaultKind::kStraggler) continue;
      std::vector<Op>& t = tail_of(f.rank);
      const size_t base = size_t(f.step - fault_step) * step_size(f.rank);
      std::vector<Op> step(t.begin() + long(base), t.begin() + long(base + step_size(f.rank)));
      if (f.kind == FaultKind::kSeedHang) {
        step.erase(step.begin() + long(FirstOf(step, kPp, kBcast)));
      } else if (f.kind == FaultKind::kStop) {
        halt[size_t(f.rank)] = int64_t(base + FirstOf(step, kTp, kAllreduce));
      } else if (f.kind == FaultKind::kCrash) {
        size_t mid = 0;
        while (mid < step.size() && step[mid].phase == kForward) ++mid;
        halt[size_t(f.rank)] = int64_t(base + mid);
        crashed[size_t(f.rank)] = true;
      } else if (f.kind == FaultKind::kSwap) {
        std::swap(step[step.size() - 2], step[step.size() - 1]);  // the loss bcast and the done all-reduce
      } else if (f.kind == FaultKind::kCount) {
        step[FirstOf(step, kTp, kAllreduce)].count = kHidden / 2;
      } else if (f.kind == FaultKind::kDtype) {
        step[FirstOf(step, kTp, kAllreduce)].dtype = fmt::Dtype::kFloat16;
      } else if (f.kind == FaultKind::kRoot) {
        step[FirstOf(step, kPp, kBcast)].peer = 0;
      } else if (f.kind == FaultKind::kP2pDeadlock) {
        // This stage and the next both send first, synchronously.
        int next = topo.Rank(topo.T(f.rank), topo.P(f.rank) + 1, topo.D(f.rank));
        std::vector<Op>& tn = tail_of(next);
        tn.insert(tn.begin() + long(size_t(f.step - fault_step) * step_size(next)), Op{kSsend, kPp, kForward, topo.P(f.rank), 1, kHidden, fmt::Dtype::kFloat32, fmt::Redop::kNone});
        step[FirstOf(step, kPp, kSend)].call = kSsend;
      }
      t.erase(t.begin() + long(base), t.begin() + long(base + step_size(f.rank)));
      t.insert(t.begin() + long(base), step.begin(), step.end());
    }
  }

  // Runs the steps from the faulty one on: a collective completes when
  // every member arrived with the same arguments; a send and its receive
  // complete together. Where each rank stops is where a real job would.
  void RunEngine() {
    // Counters at the start of the tail: every rank did `fault_step` whole
    // steps. A job that ran `seq_base` collectives on every communicator
    // before the steps simulated (its rings hold only the newest).
    for (uint64_t& n : before.coll) n = c.seq_base;
    std::vector<Counters> start(size_t(c.pp), before);
    for (int p = 0; p < c.pp; ++p) {
      for (int s = 0; s < fault_step; ++s) {
        for (const Op& op : templates[size_t(p)]) start[size_t(p)].Next(op);
      }
    }
    pc.assign(size_t(topo.world), 0);
    ctr.resize(size_t(topo.world));
    for (int r = 0; r < topo.world; ++r) ctr[size_t(r)] = start[size_t(topo.P(r))];
    std::vector<uint64_t> cur_seq(size_t(topo.world), 0);
    struct Arrival {
      std::vector<int32_t> ranks;
      Op sig;
      bool mismatch = false;
    };
    std::unordered_map<uint64_t, Arrival> arrivals;
    struct Pair {
      int32_t sender = -1, receiver = -1;
    };
    std::unordered_map<uint64_t, Pair> pairs;
    std::vector<int32_t> work;
    for (int r = topo.world - 1; r >= 0; --r) work.push_back(r);
    std::vector<bool> posted(size_t(topo.world), false);  // current op already posted
    auto advance = [&](int32_t r) {
      for (;;) {
        size_t i = pc[size_t(r)];
        if (i >= tail_size(r) || halt[size_t(r)] == int64_t(i)) return;
        const Op& op = tail_op(r, i);
        if (!posted[size_t(r)]) {
          cur_seq[size_t(r)] = ctr[size_t(r)].Next(op);
          posted[size_t(r)] = true;
          bool done = false;
          if (op.call == kAllreduce || op.call == kBcast) {
            uint64_t key = Mix(uint64_t(topo.Comm(op.kind, r)) << 40 ^ cur_seq[size_t(r)]);
            Arrival& a = arrivals[key];
            if (a.ranks.empty()) a.sig = op;
            else if (a.sig.call != op.call || a.sig.count != op.count || a.sig.dtype != op.dtype || a.sig.peer != op.peer) a.mismatch = true;
            a.ranks.push_back(r);
            if (int(a.ranks.size()) == topo.CommSize(op.kind) && !a.mismatch) {
              for (int32_t m : a.ranks) {
                ++pc[size_t(m)];
                posted[size_t(m)] = false;
                if (m != r) work.push_back(m);
              }
              arrivals.erase(key);
              done = true;
            }
          } else {
            bool send = op.call != kRecv;
            int peer = topo.WorldOf(kPp, r, op.peer);
            int src = send ? r : peer, dst = send ? peer : r;
            uint64_t key = Mix(Mix(uint64_t(src) << 32 | uint32_t(dst)) ^ (uint64_t(op.tag) << 48) ^ cur_seq[size_t(r)]);
            Pair& p = pairs[key];
            (send ? p.sender : p.receiver) = r;
            if (p.sender >= 0 && p.receiver >= 0) {
              int other = send ? p.receiver : p.sender;
              ++pc[size_t(r)];
              ++pc[size_t(other)];
              posted[size_t(r)] = posted[size_t(other)] = false;
              work.push_back(other);
              pairs.erase(key);
              done = true;
            }
          }
          if (!done) return;  // blocked in op i
        } else {
          return;
        }
      }
    };
    while (!work.empty()) {
      int32_t r = work.back();
      work.pop_back();
      advance(r);
    }
  }

  bool WriteFiles(std::string* error) {
    const std::string dir = c.out + "/" + c.job;
    mkdir(c.out.c_str(), 0700);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      *error = "cannot create " + dir + ": " + strerror(errno);
      return false;
    }
    const int64_t base_real = 1795000000000000000;  // 2026-11-18, for stable output
    int64_t last_ns = 0;
    for (int r = 0; r < topo.world; ++r) {
      last_ns = std::max(last_ns, int64_t(size_t(fault_step) * step_size(r) + pc[size_t(r)] + 1) * kOpNs);
    }
    const bool hung = [&] {
      for (int r = 0; r < topo.world; ++r) {
        if (pc[size_t(r)] < tail_size(r)) return true;
      }
      return false;
    }();
    const int64_t now_ns = last_ns + (hung ? int64_t(c.stuck_s * 1e9) : 0);
    std::atomic<int> next{0};
    std::string first_error;
    std::mutex err_mu;
    auto write_rank = [&](int r) {
      std::string err;
      if (!WriteRank(r, dir, now_ns, base_real, &err)) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (first_error.empty()) first_error = err;
      }
    };
    int nthreads = c.threads > 0 ? c.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    auto worker = [&] {
      for (int r; (r = next.fetch_add(1)) < topo.world;) write_rank(r);
    };
    for (int t = 1; t < nthreads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
    if (!first_error.empty()) {
      *error = first_error;
      return false;
    }
    return true;
  }

  nlohmann::json Truth() const {
    // The verdict and culprits are the catalogue's (trainer/faults.h: one
    // decision with the trainer); where the ranks wait is the engine's.
    std::string verdict = "no-hang";
    std::string fault = "none";
    std::vector<int> culprit_list;
    for (const trainer::Fault& f : c.faults) {
      const trainer::FaultTruth t = trainer::TruthOf(f, trainer::Shape{c.tp, c.pp, c.dp});
      fault = f.name();
      verdict = t.verdict;
      culprit_list = t.culprits;
      if (f.kind != FaultKind::kStraggler) break;
    }
    std::map<std::pair<std::string, std::string>, RankSet> stuck;
    for (int r = 0; r < topo.world; ++r) {
      size_t i = pc[size_t(r)];
      if (i >= tail_size(r) || halt[size_t(r)] == int64_t(i)) continue;
      const Op& op = tail_op(r, i);
      stuck[{fmt::OpName(kCalls[op.call].op), topo.Label(op.kind, r)}].Add(r);
    }
    nlohmann::json truth = {{"schema", "hangtrace.truth/1"}, {"fault", fault}, {"verdict", verdict}};
    truth["culprits"] = culprit_list;
    truth["stuck"] = nlohmann::json::array();
    for (const auto& [key, ranks] : stuck) {
      truth["stuck"].push_back({{"ranks", ranks.ToString()}, {"op", key.first}, {"comm", key.second}});
    }
    truth["topology"] = {{"tp", c.tp}, {"pp", c.pp}, {"dp", c.dp}, {"world", topo.world}};
    truth["steps"] = c.steps;
    return truth;
  }

  size_t World() const { return size_t(topo.world); }
  uint64_t Records() const { return records; }
  int Steps() const { return c.steps; }

 private:
  size_t step_size(int r) const { return templates[size_t(topo.P(r))].size(); }
  std::vector<Op>& tail_of(int r) {
    auto it = own.find(r);
    if (it == own.end()) {
      std::vector<Op> t;
      for (int s = 0; s < tail_steps; ++s) t.insert(t.end(), templates[size_t(topo.P(r))].begin(), templates[size_t(topo.P(r))].end());
      it = own.emplace(r, std::move(t)).first;
    }
    return it->second;
  }
  const std::vector<Op>* program(int r) const {
    auto it = own.find(r);
    return it == own.end() ? nullptr : &it->second;
  }
  // Op i of rank r's tail (templates repeat per step).
  const Op& tail_op(int r, size_t i) const {
    if (const auto* p = program(r)) return (*p)[i];
    return templates[size_t(topo.P(r))][i % step_size(r)];
  }
  size_t tail_size(int r) const {
    if (const auto* p = program(r)) return p->size();
    return size_t(tail_steps) * step_size(r);
  }

  // Rank r's trace file: the whole steps before the fault, then its tail
  // as far as the engine let it go.
  bool WriteRank(int r, const std::string& dir, int64_t now_ns, int64_t base_real, std::string* error) {

    FileSpec spec;
    fmt::ProcessInfo& p = spec.process;
    p.pid = 10000 + r;
    p.ppid = 9999;
    p.rank = r;
    p.world_size = topo.world;
    p.rank_source = uint8_t(fmt::RankSource::kMpi);
    p.exit_code = -1;
    snprintf(p.host, sizeof(p.host), "node%04d", r / 8);
    snprintf(p.job, sizeof(p.job), "%s", c.job.c_str());
    snprintf(p.exe, sizeof(p.exe), "/opt/train/pretrain_gpt");
    snprintf(p.cmdline, sizeof(p.cmdline), "pretrain_gpt --tp %d --pp %d --dp %d", c.tp, c.pp, c.dp);
    p.clock.kind = uint32_t(fmt::ClockKind::kMonotonicNs);
    p.clock.ticks_hz = 1000000000;
    p.clock.ref_real_ns = base_real;
    p.clock.version = 2;
    for (const auto& call : kCalls) {
      fmt::CallInfo ci{};
      strncpy(ci.name, call.name, sizeof(ci.name) - 1);
      ci.api = uint8_t(fmt::Api::kMpi);
      ci.op = uint8_t(call.op);
      ci.flags = call.flags;
      spec.calls.push_back(ci);
    }
    // Its four communicators, in file order world, tp, pp, dp.
    const Kind kinds[4] = {kWorld, kTp, kPp, kDp};
    const Counters& final_ctr = ctr[size_t(r)];
    for (int k = 0; k < 4; ++k) {
      FileSpec::Comm cm;
      std::string label = topo.Label(kinds[k], r);
      cm.entry.id = k == 0 ? fmt::kWorldCommId : Mix(std::hash<std::string>{}(label));
      cm.entry.kind = uint8_t(fmt::CommKind::kMpi);
      cm.entry.size = topo.CommSize(kinds[k]);
      cm.entry.my_index = topo.CommRank(kinds[k], r);
      cm.entry.color = cm.entry.key = -1;
      cm.entry.device = -1;
      cm.entry.coll_seq = final_ctr.coll[k];
      strncpy(cm.entry.label, label.c_str(), sizeof(cm.entry.label) - 1);
      if (k == 0) cm.entry.flags |= fmt::kCommWorld;
      else
        for (int i = 0; i < cm.entry.size; ++i) cm.members.push_back(topo.WorldOf(kinds[k], r, i));
      spec.comms.push_back(cm);
    }
    FileSpec::Thread th;
    th.tid = uint32_t(p.pid);
    const double factor = [&] {
      for (const trainer::Fault& f : c.faults) {
        if (f.kind == FaultKind::kStraggler && f.rank == r) return f.factor;
      }
      return 1.0;
    }();
    auto record = [&](const Op& op, uint64_t seq, int64_t t, fmt::EventKind kind) {
      fmt::Record rec{};
      rec.ticks = uint64_t(t);
      rec.seq = seq;
      rec.count = op.count;
      rec.tid = th.tid;
      rec.call = op.call;
      rec.comm = uint16_t(op.kind);
      rec.peer = (op.call == kAllreduce) ? fmt::kNoPeer : op.peer;
      rec.tag = op.tag;
      rec.kind = uint8_t(kind);
      rec.dtype = uint8_t(op.dtype);
      rec.redop = uint8_t(op.redop);
      return rec;
    };
    Op init{kInit, kWorld, kEndOfStep, -1, 0, 0, fmt::Dtype::kNone, fmt::Redop::kNone};
    fmt::Record b = record(init, 0, 0, fmt::EventKind::kBegin);
    b.comm = fmt::kNoComm;
    th.records.push_back(b);
    b.kind = uint8_t(fmt::EventKind::kEnd);
    b.ticks = kOpNs / 2;
    th.records.push_back(b);
    th.has_last = true;
    th.last = b;
    Counters cnt = before;
    int64_t g = 1;  // global op index, for time
    auto emit = [&](const Op& op, bool complete) {
      uint64_t seq = cnt.Next(op);
      int64_t t = int64_t(double(g * kOpNs) * factor);
      fmt::Record rb = record(op, seq, t, fmt::EventKind::kBegin);
      th.records.push_back(rb);
      if (complete) {
        fmt::Record re = record(op, seq, t + kOpNs * 8 / 10, fmt::EventKind::kEnd);
        th.records.push_back(re);
        th.last = re;
      } else {
        th.in_call = true;
        th.current = rb;
        th.watchdog = true;
        th.stack = {"ompi_request_default_wait", std::string("P") + kCalls[op.call].name, kCalls[op.call].name,
                    kPhaseFrames[op.phase], "train", "main"};
      }
      ++g;
    };
    for (int s = 0; s < fault_step; ++s) {
      for (const Op& op : templates[size_t(topo.P(r))]) emit(op, true);
    }
    const size_t done = pc[size_t(r)];
    for (size_t i = 0; i < done; ++i) emit(tail_op(r, i), true);
    const bool finished = done >= tail_size(r);
    p.state = uint32_t(fmt::ProcState::kRunning);
    if (finished) {
      p.state = uint32_t(fmt::ProcState::kExited);
      p.exit_code = 0;
      p.end_ticks = uint64_t(double(g * kOpNs) * factor);
    } else if (crashed[size_t(r)]) {
      p.state = uint32_t(fmt::ProcState::kCrashed);
      p.signal = 6;  // SIGABRT
      p.signal_tid = int32_t(th.tid);
      p.end_ticks = uint64_t(g * kOpNs);
      th.stack = {"abort", "raise", kPhaseFrames[tail_op(r, done).phase], "train", "main"};
    } else if (halt[size_t(r)] == int64_t(done)) {
      th.stack = {"nanosleep", kPhaseFrames[tail_op(r, done).phase], "train", "main"};  // blocked outside MPI
    } else {
      emit(tail_op(r, done), false);
    }
    if (c.torn_down && p.state == uint32_t(fmt::ProcState::kRunning)) {
      p.state = uint32_t(fmt::ProcState::kExited);
      p.exit_code = -61;  // Open MPI's ORTE_ERR_... when the daemon is lost
      p.end_ticks = uint64_t(now_ns);
    }
    p.heartbeat_mono_ns = uint64_t(now_ns);
    p.heartbeat_real_ns = base_real + now_ns;
    p.heartbeat_count = uint64_t(now_ns / 500000000);
    p.watchdog_timeout_ms = 60000;
    records += th.records.size();
    spec.threads.push_back(std::move(th));
    char name[128];
    snprintf(name, sizeof(name), "/%s.%d.htrace", p.host, p.pid);
    return WriteTraceFile(dir + name, spec, error);
  }

  SimConfig c;
  const Topo topo;
  std::vector<std::vector<Op>> templates;
  int fault_step = 0, tail_steps = 0;
  std::unordered_map<int, std::vector<Op>> own;  // rank -> its tail program
  std::vector<int64_t> halt;                     // op index where a rank stops outside any call
  std::vector<bool> crashed;
  Counters before;
  std::vector<size_t> pc;                        // each rank's position in its tail
  std::vector<Counters> ctr;
  std::atomic<uint64_t> records{0};
};

}  // namespace

bool Simulate(const SimConfig& config, SimResult* result, std::string* error) {
  Simulation sim(config);
  if (!sim.Plan(error)) return false;
  sim.InjectFaults();
  sim.RunEngine();
  if (!sim.WriteFiles(error)) return false;
  result->truth = sim.Truth();
  result->files = sim.World();
  result->records = sim.Records();
  result->steps = sim.Steps();
  return true;
}

}  // namespace hangtrace
