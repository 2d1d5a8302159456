// `--shard I/N`: one process's part of a run's cells (cells j with j % N == I, in the plan's order),
// and the keys a shard's result file carries so that `lina merge` can rebuild the one-process file.
#pragma once
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/engine/runner.h"

namespace lina::cli {

// Most shards one run may have (`--shard`, `--gpus`): the harness waits on at most 64 children at once.
inline constexpr int kMaxShards = 64;

struct Shard {
  int index = 0;  // I, in [0, count)
  int count = 1;  // N, in [1, kMaxShards]
  std::string label() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// "I/N" -> Shard; nullopt with `why` set ("got 'x', expected ...") when it is not one.
std::optional<Shard> parse_shard(const std::string& text, std::string& why);
// CLI11 check of `--shard` (exit 2, naming the option, what was seen and what is expected).
extern const CLI::Validator kShardSpec;

// `--gpus N` (an integer in [1, kMaxShards]) of run, verify and compare, checked while parsing.
CLI::Option* add_gpus_option(CLI::App& sub, int& gpus, const std::string& description);

// The plan restricted to `shard`'s cells; `cell_index[k]` is the k-th kept cell's index in the full plan.
harness::Plan select_shard(const harness::Plan& plan, const Shard& shard, std::vector<std::size_t>& cell_index);

// Marks a shard's run document: config.shard, every result row and failure with its `cell` (index in
// the full plan) and `shard`, and `shards`: this process's record (index, count, CUDA_VISIBLE_DEVICES,
// command, machine). Rows and failures come in the shard's cell order, one per cell.
void mark_shard_document(nlohmann::json& doc, const Shard& shard, const harness::Plan& shard_plan,
                         const std::vector<std::size_t>& cell_index);

}  // namespace lina::cli
