#include "cli/shard.h"

#include <cstdlib>

#include "lina/error.h"

namespace lina::cli {

using nlohmann::json;

namespace {
// A decimal count without sign, exponent or leading zeros (std::stoi takes " 1", "+1" and "1abc").
std::optional<int> parse_count(const std::string& text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  if (text.size() > 1 && text[0] == '0') return std::nullopt;
  return std::stoi(text);
}
}  // namespace

std::optional<Shard> parse_shard(const std::string& text, std::string& why) {
  const std::string expected = "expected I/N with 0 <= I < N <= " + std::to_string(kMaxShards) + ", e.g. 0/4";
  const std::size_t slash = text.find('/');
  const std::optional<int> index = slash == std::string::npos ? std::nullopt : parse_count(text.substr(0, slash));
  const std::optional<int> count = slash == std::string::npos ? std::nullopt : parse_count(text.substr(slash + 1));
  if (!index || !count || *count < 1 || *count > kMaxShards || *index >= *count) {
    why = "got '" + text + "', " + expected;
    return std::nullopt;
  }
  return Shard{*index, *count};
}

const CLI::Validator kShardSpec(
    [](std::string& text) -> std::string {
      std::string why;
      return parse_shard(text, why) ? std::string() : why;
    },
    "I/N");

CLI::Option* add_gpus_option(CLI::App& sub, int& gpus, const std::string& description) {
  return sub.add_option("--gpus", gpus, description)
      ->check(kPositiveInt & CLI::Validator(
                                 [](std::string& text) -> std::string {
                                   const std::optional<double> v = parse_number(text);
                                   if (v && *v > kMaxShards) return "got " + text + ", expected an integer in [1, " + std::to_string(kMaxShards) + "]";
                                   return {};
                                 },
                                 "N"));
}

harness::Plan select_shard(const harness::Plan& plan, const Shard& shard, std::vector<std::size_t>& cell_index) {
  harness::Plan part;
  part.backend = plan.backend;
  cell_index.clear();
  for (std::size_t j = 0; j < plan.cells.size(); ++j)
    if (j % static_cast<std::size_t>(shard.count) == static_cast<std::size_t>(shard.index)) {
      part.cells.push_back(plan.cells[j]);
      cell_index.push_back(j);
    }
  return part;
}

void mark_shard_document(json& doc, const Shard& shard, const harness::Plan& shard_plan, const std::vector<std::size_t>& cell_index) {
  json& rows = doc["results"];
  json& failures = doc["failures"];
  // Each cell left exactly one row or one failure, in cell order: walk both lists beside the cells.
  std::size_t r = 0, f = 0;
  const auto is = [](const json& entry, const harness::Cell& c) {
    return entry.at("op") == c.op->name && entry.at("mode") == harness::mode_name(c.mode) && entry.at("shape") == c.workload.name;
  };
  for (std::size_t k = 0; k < shard_plan.cells.size(); ++k) {
    const harness::Cell& c = shard_plan.cells[k];
    json* entry = r < rows.size() && is(rows[r], c) ? &rows[r++] : f < failures.size() && is(failures[f], c) ? &failures[f++] : nullptr;
    if (!entry)
      throw Error(ErrorCode::runtime, "--shard", "cell " + std::to_string(cell_index[k]) + " (" + c.op->name + " " +
                                                     harness::mode_name(c.mode) + " " + c.workload.name + ") left neither a row nor a failure");
    (*entry)["cell"] = cell_index[k];
    (*entry)["shard"] = shard.index;
  }
  doc["config"]["shard"] = {{"index", shard.index}, {"count", shard.count}};
  const char* devices = std::getenv("CUDA_VISIBLE_DEVICES");
  doc["shards"] = json::array({{{"index", shard.index},
                                {"count", shard.count},
                                {"cuda_visible_devices", devices ? json(devices) : json(nullptr)},
                                {"command", doc["config"]["command"]},
                                {"machine", doc["machine"]}}});
}

}  // namespace lina::cli
