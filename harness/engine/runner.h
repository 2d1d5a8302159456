// The run engine behind `lina run` (and later `lina verify`): plans cells (op x mode x workload),
// generates each workload's inputs once, times each cell, checks it against the reference once,
// and returns result rows plus the JSON document.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/engine/registry.h"
#include "harness/results/results.h"
#include "harness/engine/timing.h"

namespace lina::harness {

// The most CPU backend threads a run may ask for (--threads).
inline constexpr int kMaxThreads = 1024;

struct RunConfig {
  std::vector<std::string> ops;                  // names or "all"
  std::vector<std::string> modes;                // empty -> each op's default modes (OpSpec::default_modes)
  std::vector<std::string> shapes;               // set (of each op) or shape names; empty -> the backend's default set
  std::string custom_shapes;                     // JSON text or @file
  std::vector<std::string> varlen;               // DIST:T=...
  std::string backend;                           // "cuda" | "cpu" | "" (cuda when a GPU is present)
  std::uint64_t seed = 42;
  bool l2_flush = true;
  bool graphs = false;
  bool check = true;
  bool final_state = false;                      // output_final_state: also write and check ht (state-pool ops always do)
  bool safe_gate = true;                         // chunk_kda: safe_gate=True, lower_bound -5 (FLA's registry); false: neither
  int threads = 0;                               // CPU backend threads (0 = all)
  TimingPolicy policy;
  std::string json_path;
  std::string command;                           // shell-quoted argv
};

struct Cell {
  const OpSpec* op = nullptr;
  Mode mode = Mode::fwd;
  Workload workload;
};

struct Plan {
  Backend backend = Backend::cpu;
  std::vector<Cell> cells;  // grouped by op and workload so inputs are generated once per group
};

// Resolves and validates everything before any op runs. Bad flags and shapes an op or backend
// refuses throw lina::Error(invalid_argument) naming the flag, what was seen and what is expected.
Backend resolve_backend(const std::string& name);
Plan make_plan(const RunConfig& cfg);

struct CellFailure {
  std::string op, mode, shape, error;
  bool runtime = false;  // CUDA / system failure (exit 1) rather than unsupported input (exit 2)
};

struct RunOutput {
  std::vector<ResultRow> rows;
  std::vector<CellFailure> failures;
  nlohmann::json document;
  int exit_code = 0;  // 0 ok; 1 a check failed or a cell hit a runtime error; 2 a cell was refused
};

using ProgressFn = std::function<void(std::size_t index, std::size_t total, const Cell& cell, const std::string& state)>;

RunOutput run_plan(const RunConfig& cfg, const Plan& plan, const ProgressFn& progress = {});
nlohmann::json config_json(const RunConfig& cfg, Backend backend);


}  // namespace lina::harness
