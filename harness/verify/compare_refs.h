// `lina compare`: two builds measured in alternating rounds through their own `lina run --json`,
// rows matched on op, mode and every shape key, speedups with a bootstrap 95 % interval, and a
// lina.bench/1 document of kind "compare".
#pragma once
#include "harness/util/baseline_error.h"
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lina::harness {

// The one place the `lina run` invocation is spelled (verify, compare and profile use it). Empty modes, shapes,
// backend and no seed leave `lina run`'s defaults.
std::vector<std::string> lina_run_argv(const std::string& lina, const std::vector<std::string>& ops,
                                       const std::vector<std::string>& modes, const std::vector<std::string>& shapes,
                                       const std::string& json, std::optional<std::uint64_t> seed = std::nullopt, int gpus = 1,
                                       bool safe_gate = true, const std::string& backend = "");

// `lina run --gpus N` rows carry the shard (one GPU) that timed them. A cell whose base and head rows name
// different shards (the two builds' plans differ, so their cells were dealt out differently) compares two
// GPUs: the reason, else empty (the same shard, or rows of one-process runs).
std::string shard_mismatch(const nlohmann::json& base_row, const nlohmann::json& head_row);

struct CompareSide {
  std::string name;            // "base" or "head"
  std::string ref, sha;        // sha empty: whatever the binary reports
  std::filesystem::path binary;
};

struct CompareOptions {
  std::vector<std::string> ops, modes, shapes;
  int rounds = 3;
  double threshold_pct = 5.0;
  std::optional<long long> seed;
  int gpus = 1;  // > 1: each side's `lina run --gpus N`
  bool safe_gate = true;  // false: each side's `lina run --safe-gate off` (chunk_kda's cells)
  int bootstrap = 2000;
  std::uint64_t bootstrap_seed = 0x6c696e61;  // fixed: the same data always gives the same interval
  std::string command;                        // the compare command line, recorded in config.command
};

// Pure part: run documents of each side (one per round) -> the compare document. Rows are pooled
// over rounds per cell; cells only in head are `new`, only in base `removed`.
nlohmann::json compare_documents(const std::vector<nlohmann::json>& base_runs, const std::vector<nlohmann::json>& head_runs,
                                 const CompareSide& base, const CompareSide& head, const CompareOptions& opt);

// Thrown when a side cannot be built, run, or proven to be its SHA (CLI exit 3).
struct CompareSideError : BaselineError {
  using BaselineError::BaselineError;
};

// The lina binary of `ref`, built in its own cache tree by harness/verify/baseline; CompareSideError
// when that fails. Warnings (dirty HEAD) go to stderr.
std::filesystem::path build_ref_binary(const std::filesystem::path& repo, const std::string& ref, const std::string& flag);

// Runs both binaries `opt.rounds` times in alternating order (base first in even rounds), writing
// each run's JSON under `workdir`, and returns compare_documents(...).
nlohmann::json run_compare(const CompareSide& base, const CompareSide& head, const CompareOptions& opt,
                           const std::filesystem::path& workdir);

// Cells that regressed (verdict `slower`) in a compare document.
std::vector<std::string> regressions(const nlohmann::json& compare_doc);
std::string render_compare_text(const nlohmann::json& compare_doc, double threshold_pct);

}  // namespace lina::harness
