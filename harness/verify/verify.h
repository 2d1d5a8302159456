// `lina verify`: the frozen gate first, then candidate (this build's `lina run`) against a baseline
// git ref's own `lina run`, in alternating rounds on the same machine, then the promotion verdict.
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results/schema.h"

#include "harness/verify/compare.h"
#include "harness/verify/gate.h"

namespace lina::harness {

// Documented exit codes (docs/architecture.md section 4), as verify reports them.
inline constexpr int kVerifyOk = 0, kVerifyGateFailed = 1, kVerifyUsage = 2, kVerifyBaselineFailed = 3,
                     kVerifyGateEmpty = 4, kVerifyRegression = 5;

struct VerifyOptions {
  std::string op;                          // a registered op (chunk_gla, ..., fused_recurrent_gdn)
  std::optional<std::string> base;         // git ref; absent: candidate only
  std::vector<std::string> modes, shapes;  // passed through to `lina run` (empty: its defaults)
  std::string backend;                     // passed through (empty: its default)
  std::string gate_k;                      // keyword filter for the gate; empty: full gate
  bool no_gate = false;                    // time anyway, everything labelled UNVERIFIED
  int rounds = 3;
  int gpus = 1;                            // > 1: each side's `lina run --gpus N` (cells dealt out by plan index)
  bool safe_gate = true;                   // false: each side's `lina run --safe-gate off` (chunk_kda's cells)
  std::uint64_t seed = 42;
  double threshold_pct = kDefaultThresholdPct;
  bool fail_on_regression = false;         // exit 5 when a cell is slower
  std::optional<std::filesystem::path> json;

  std::filesystem::path repo;              // source checkout: baseline refs, frozen hashes, profile/
  std::filesystem::path candidate_exe;     // this build's `lina` (default /proc/self/exe)
  std::optional<std::filesystem::path> gate_exe;  // default: find_gate_executable()
  std::vector<std::string> baseline_cmake_args;
  // A ready-made baseline `lina` (no build): its results must report the SHA of `base`, which is
  // `baseline_sha` when set (tests), else `base` resolved in `repo`, or `base` itself when it is a
  // full 40-hex SHA and `repo` holds no git history (a copy of the tree on another machine).
  std::optional<std::filesystem::path> baseline_exe;
  std::string baseline_sha;
  std::map<std::string, std::string> gate_env;  // extra environment of the gate process
};

// Datacenter Hopper-or-newer (sm_90+): the hardware a promotion may rest on.
bool is_promotion_gpu(const std::string& gpu_name, const std::string& compute_capability);

struct VerifyOutcome {
  int exit_code = kVerifyOk;
  nlohmann::json json;  // the lina.bench/1 "verify" document (also written to opts.json)
};

// Runs everything, printing progress, tables and the verdict to `out`. Baseline problems surface
// as exit 3 (never as exceptions); bad options as lina::Error.
VerifyOutcome verify(const VerifyOptions& opts, std::ostream& out);

}  // namespace lina::harness
