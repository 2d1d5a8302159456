// Frozen-gate hashes: what `lina loop init` records and `lina verify` re-checks before promoting.
#pragma once
#include <filesystem>
#include <map>
#include <string>

namespace lina::harness {

// SHA-256 (hex) of each file that defines correctness for `op`: its gate suite source, the shared
// gate helpers, its fp64 reference and the tolerance table, keyed by path relative to repo_root.
std::map<std::string, std::string> frozen_hashes(const std::filesystem::path& repo_root, const std::string& op);

}  // namespace lina::harness
