#include "cli/shard_merge.h"

#include <algorithm>
#include <map>

#include "lina/error.h"

namespace lina::cli {

using nlohmann::json;

namespace {
// A non-negative integer, whichever of nlohmann's integer types the parser chose.
bool is_index(const json& v) { return v.is_number_integer() && v.get<long long>() >= 0; }

[[noreturn]] void refuse(const std::string& file, const std::string& key, const std::string& problem) {
  throw Error(ErrorCode::invalid_argument, key, "file '" + file + "': key `" + key + "`: " + problem);
}

// config without the keys that differ between the shards of one run by design.
json run_identity(json config) {
  config.erase("command");
  config.erase("shard");
  return config;
}

void require_same(const ShardFile& f, const ShardFile& first, const std::string& key, const json& seen, const json& expected,
                  const std::string& why) {
  if (seen != expected)
    refuse(f.path, key, "seen " + seen.dump() + ", expected " + expected.dump() + " as in file '" + first.path + "' (" + why + ")");
}

// Rows or failures of every file, by their `cell`; two entries of one cell are refused.
json by_cell(const std::vector<const ShardFile*>& files, const std::string& list, int count) {
  std::map<long long, std::pair<json, const ShardFile*>> cells;
  for (const ShardFile* f : files) {
    const json& entries = f->doc.contains(list) ? f->doc.at(list) : json::array();
    const int index = f->doc.at("config").at("shard").at("index").get<int>();
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const std::string key = list + "[" + std::to_string(i) + "].cell";
      const json& e = entries[i];
      if (!e.contains("cell") || !is_index(e["cell"])) refuse(f->path, key, "missing or not a cell index");
      const long long cell = e["cell"].get<long long>();
      if (cell % count != index) refuse(f->path, key, "cell " + std::to_string(cell) + " is not one of shard " + std::to_string(index) + "/" + std::to_string(count) + "'s");
      const auto [it, added] = cells.emplace(cell, std::make_pair(e, f));
      if (!added) refuse(f->path, key, "cell " + std::to_string(cell) + " is also in file '" + it->second.second->path + "'");
    }
  }
  json merged = json::array();
  for (auto& [cell, entry] : cells) merged.push_back(std::move(entry.first));
  return merged;
}
}  // namespace

json merge_shards(const std::vector<ShardFile>& files, const std::string& command) {
  if (files.empty()) throw Error(ErrorCode::invalid_argument, "files", "no shard files given");
  // Each file's shard, then every shard exactly once.
  std::map<int, const ShardFile*> shards;
  int count = 0;
  for (const ShardFile& f : files) {
    if (f.doc.at("kind") != "run") refuse(f.path, "kind", "seen " + f.doc.at("kind").dump() + ", expected \"run\" (shards are `lina run` files)");
    const json& config = f.doc.at("config");
    if (!config.contains("shard") || !config["shard"].is_object())
      refuse(f.path, "config.shard", "missing (expected the file of a `lina run --shard I/N`)");
    const json& s = config["shard"];
    if (!s.contains("index") || !is_index(s["index"]) || !s.contains("count") || !is_index(s["count"]) ||
        s["index"].get<long long>() >= s["count"].get<long long>())
      refuse(f.path, "config.shard", "seen " + s.dump() + ", expected {index: I, count: N} with I < N");
    if (!f.doc.contains("shards") || !f.doc["shards"].is_array() || f.doc["shards"].size() != 1)
      refuse(f.path, "shards", "missing (expected the one record of the shard's machine)");
    const int index = s["index"].get<int>();
    const int n = s["count"].get<int>();
    if (count == 0) count = n;
    if (n != count) refuse(f.path, "config.shard.count", "seen " + std::to_string(n) + ", expected " + std::to_string(count) + " as in file '" + files.front().path + "'");
    const auto [it, added] = shards.emplace(index, &f);
    if (!added) refuse(f.path, "config.shard", "shard " + std::to_string(index) + "/" + std::to_string(count) + " is also file '" + it->second->path + "'");
  }
  for (int i = 0; i < count; ++i)
    if (!shards.count(i))
      throw Error(ErrorCode::invalid_argument, "files",
                  "shard " + std::to_string(i) + "/" + std::to_string(count) + " is missing: give the files of all " + std::to_string(count) + " shards");
  std::vector<const ShardFile*> ordered;
  for (const auto& [i, f] : shards) ordered.push_back(f);

  const ShardFile& first = *ordered.front();
  for (const ShardFile* f : ordered) {
    for (const char* k : {"name", "version", "git_sha", "git_dirty"})
      require_same(*f, first, std::string("tool.") + k, f->doc.at("tool").value(k, json(nullptr)), first.doc.at("tool").value(k, json(nullptr)),
                   "every shard must come from one build");
    const json mine = run_identity(f->doc.at("config")), theirs = run_identity(first.doc.at("config"));
    for (const auto& [k, v] : theirs.items())
      require_same(*f, first, "config." + k, mine.value(k, json(nullptr)), v, "every shard must be of one run");
    for (const auto& [k, v] : mine.items())
      if (!theirs.contains(k)) require_same(*f, first, "config." + k, v, json(nullptr), "every shard must be of one run");
  }

  json merged = first.doc;
  merged["results"] = by_cell(ordered, "results", count);
  merged["failures"] = by_cell(ordered, "failures", count);
  merged["config"].erase("shard");
  merged["config"]["shards"] = count;
  merged["config"]["command"] = command;
  merged["shards"] = json::array();
  for (const ShardFile* f : ordered) merged["shards"].push_back(f->doc.at("shards").at(0));
  // Readers of one machine (summarize, compare) see shard 0's; `shards` holds every one.
  merged["machine"] = first.doc.at("machine");
  return merged;
}

}  // namespace lina::cli
