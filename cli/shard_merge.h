// Merging the result files of one run's shards (`lina run --shard I/N` on several GPUs or hosts) back
// into the file one process would have written: rows and failures in the one-process cell order,
// one machine record per shard (docs/multi-gpu.md).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lina::cli {

struct ShardFile {
  std::string path;      // for messages
  nlohmann::json doc;    // a validated lina.bench/1 run document written with --shard
};

// The merged run document; `command` becomes its config.command. Refuses (lina::Error,
// invalid_argument, naming the file and the key) a file that is not a shard's, two files of one shard
// or one cell, a missing shard, and files from different builds (tool) or of different runs (config
// other than command and shard): such a merge would present a partial or mixed run as one.
nlohmann::json merge_shards(const std::vector<ShardFile>& files, const std::string& command);

}  // namespace lina::cli
