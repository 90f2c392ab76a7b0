// The trainer's fault catalogue, in one table: each fault's name on the
// command line, what it does, and the verdict it must lead to. Header-only,
// and free of hangtrace: the trainer (an ordinary MPI program that knows
// nothing of hangtrace) and hangtrace's simulator both include it, so the
// two can never describe or parse a fault differently.
//
//   --fault KIND@rank=R[,step=S][,factor=F]
#pragma once

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

namespace trainer {

enum class FaultKind { kSeedHang, kStop, kCrash, kSwap, kCount, kDtype, kRoot, kP2pDeadlock, kStraggler };

struct FaultInfo {
  FaultKind kind;
  const char* name;     // on the command line
  const char* verdict;  // what a diagnosis of it must say (hangtrace.truth/1)
  const char* what;     // one line for --help
};

inline constexpr FaultInfo kFaults[] = {
    {FaultKind::kSeedHang, "seed-hang", "hang",
     "a last-stage rank never broadcasts the loss to its pipeline group (the seed's hang)"},
    {FaultKind::kStop, "stop", "hang", "the rank blocks forever before the step's first TP all-reduce"},
    {FaultKind::kCrash, "crash", "crash", "the rank aborts mid-step (SIGABRT)"},
    {FaultKind::kSwap, "swap", "hang", "the rank does the done all-reduce before the loss broadcast"},
    {FaultKind::kCount, "count", "mismatch", "the rank passes half the count to a TP all-reduce"},
    {FaultKind::kDtype, "dtype", "mismatch", "the rank passes another datatype to a TP all-reduce"},
    {FaultKind::kRoot, "root", "mismatch", "the rank passes another root to the loss broadcast"},
    {FaultKind::kP2pDeadlock, "p2p-deadlock", "deadlock",
     "the rank and its next pipeline stage both send first (MPI_Ssend)"},
    {FaultKind::kStraggler, "straggler", "no-hang", "the rank is F times slower (factor=F) but finishes"},
};

inline const FaultInfo& Info(FaultKind k) {
  for (const FaultInfo& f : kFaults) {
    if (f.kind == k) return f;
  }
  return kFaults[0];
}

struct Fault {
  FaultKind kind = FaultKind::kSeedHang;
  int rank = -1;
  int step = -1;  // -1: not given (the trainer strikes at step 0, the simulator at its last)
  double factor = 4;
  const char* name() const { return Info(kind).name; }
};

// The faults and what they do, one per line, for --help.
inline std::string FaultHelp() {
  std::string out;
  for (const FaultInfo& f : kFaults) {
    std::string name = f.name;
    out += "  " + name + std::string(name.size() < 14 ? 14 - name.size() : 1, ' ') + f.what + "\n";
  }
  return out;
}

// Parses "KIND@rank=R,step=S,factor=F". False with a sentence in `error` on
// anything else (never throws).
inline bool ParseFault(const std::string& text, Fault* out, std::string* error) {
  *out = Fault{};
  const size_t at = text.find('@');
  const std::string kind = text.substr(0, at);
  bool known = false;
  std::string names;
  for (const FaultInfo& f : kFaults) {
    names += std::string(names.empty() ? "" : ", ") + f.name;
    if (kind == f.name) {
      out->kind = f.kind;
      known = true;
    }
  }
  if (!known) {
    *error = "unknown fault '" + kind + "' (one of " + names + ")";
    return false;
  }
  if (at == std::string::npos) {
    *error = "fault '" + text + "' needs @rank=R (e.g. " + kind + "@rank=3,step=2)";
    return false;
  }
  const std::string rest = text.substr(at + 1);
  for (size_t pos = 0; pos <= rest.size();) {
    const size_t comma = rest.find(',', pos);
    const std::string kv = rest.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) {
      *error = "expected key=value in fault '" + text + "', got '" + kv + "'";
      return false;
    }
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    const double v = strtod(value.c_str(), &end);
    const bool integer = key != "factor";
    if (value.empty() || end == value.c_str() || *end || errno || (integer && (v != double(long(v)) || v < 0 || v > 1e9))) {
      *error = "'" + value + "' is not " + (integer ? "a whole number >= 0" : "a number") + " in fault '" + text + "'";
      return false;
    }
    if (key == "rank") {
      out->rank = int(v);
    } else if (key == "step") {
      out->step = int(v);
    } else if (key == "factor") {
      if (v <= 0) {
        *error = "factor must be above 0 in fault '" + text + "'";
        return false;
      }
      out->factor = v;
    } else {
      *error = "unknown key '" + key + "' in fault '" + text + "' (rank, step, factor)";
      return false;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out->rank < 0) {
    *error = "fault '" + text + "' needs rank=R";
    return false;
  }
  return true;
}

// --- where a fault can strike, and what it must lead to ------------------------------
// One decision for the trainer, the simulator, the tests and the accuracy
// matrix: they all ask these, never decide it themselves. Ranks are
// Megatron's order (TP fastest, then PP, then DP).

struct Shape {
  int tp = 1, pp = 1, dp = 1;
  int World() const { return tp * pp * dp; }
  int Stage(int rank) const { return (rank / tp) % pp; }
  int Rank(int t, int p, int d) const { return t + tp * (p + pp * d); }
  // The rank of the next pipeline stage after `rank` (same TP and DP index).
  int Next(int rank) const { return Rank(rank % tp, Stage(rank) + 1, rank / (tp * pp)); }
};

// Whether `f` can be injected where it says in a job of this shape running
// `steps` steps (f.step -1: not given, any); false with the reason.
inline bool CanInject(const Fault& f, const Shape& s, int steps, std::string* why) {
  const std::string name = f.name();
  if (f.rank < 0 || f.rank >= s.World()) {
    *why = name + ": rank " + std::to_string(f.rank) + " is outside the job (" + std::to_string(s.World()) + " ranks)";
    return false;
  }
  if (f.step >= steps) {
    *why = name + ": step " + std::to_string(f.step) + " is past the last step (" + std::to_string(steps - 1) + ")";
    return false;
  }
  const bool last = s.Stage(f.rank) == s.pp - 1;
  switch (f.kind) {
    case FaultKind::kSeedHang:
    case FaultKind::kSwap:
      // The loss broadcast's root is a last-stage rank. A receiver that
      // swaps the broadcast with the done all-reduce may or may not hang:
      // an eager root sends and goes on, a broadcast tree may route through
      // the receiver; the MPI library decides, so there is no truth to give.
      if (!last) {
        *why = name + ": rank " + std::to_string(f.rank) + " is not a last pipeline stage (the loss broadcast's root, " +
               "e.g. rank " + std::to_string(s.Rank(f.rank % s.tp, s.pp - 1, f.rank / (s.tp * s.pp))) + ")" +
               (f.kind == FaultKind::kSwap ? "; a receiver's swap hangs or not as the MPI library's broadcast decides"
                                           : "");
        return false;
      }
      return true;
    case FaultKind::kRoot:
      if (s.pp < 2) {
        *why = name + " needs a pipeline (pp >= 2): the mismatch is at the loss broadcast";
        return false;
      }
      return true;
    case FaultKind::kP2pDeadlock:
      if (s.pp < 2 || last) {
        *why = name + ": rank " + std::to_string(f.rank) + " has no next pipeline stage to deadlock with";
        return false;
      }
      return true;
    case FaultKind::kCount:
    case FaultKind::kDtype:
      if (s.tp < 2) {
        *why = name + " needs tensor parallelism (tp >= 2): the mismatch is at a TP all-reduce";
        return false;
      }
      return true;
    default: return true;
  }
}

// The ranks of a job of this shape where `kind` can be injected.
inline std::vector<int> EligibleRanks(FaultKind kind, const Shape& s) {
  std::vector<int> out;
  std::string why;
  for (int r = 0; r < s.World(); ++r) {
    Fault f;
    f.kind = kind;
    f.rank = r;
    if (CanInject(f, s, 1, &why)) out.push_back(r);
  }
  return out;
}

// What a diagnosis of `f` must say: the verdict and the culprits.
struct FaultTruth {
  const char* verdict;
  std::vector<int> culprits;  // world ranks, ascending
};
inline FaultTruth TruthOf(const Fault& f, const Shape& s) {
  FaultTruth t{Info(f.kind).verdict, {}};
  if (f.kind == FaultKind::kStraggler) return t;  // slow, not hung: nobody to blame
  t.culprits.push_back(f.rank);
  // Both stages send first: each waits for the other.
  if (f.kind == FaultKind::kP2pDeadlock) t.culprits.push_back(s.Next(f.rank));
  return t;
}

}  // namespace trainer
