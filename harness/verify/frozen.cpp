// Frozen-gate hashes: the files whose contents define correctness for an op.
#include "harness/verify/frozen.h"

#include <algorithm>
#include <vector>

#include "harness/engine/registry.h"
#include "harness/util/sha256.h"
#include "lina/error.h"

namespace lina::harness {

std::map<std::string, std::string> frozen_hashes(const std::filesystem::path& repo_root, const std::string& op) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  const std::string gate = "tests/gate/" + op + "_gate.cpp";
  if (!fs::is_regular_file(repo_root / gate))
    throw Error(ErrorCode::invalid_argument, "op", "no gate suite " + (repo_root / gate).string() + " for op '" + op + "'");
  files.push_back(gate);
  auto add_dir = [&](const std::string& dir, const std::string& prefix) {
    std::error_code ec;
    if (!fs::is_directory(repo_root / dir, ec)) return;
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(repo_root / dir)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && name.rfind(prefix, 0) == 0) found.push_back(dir + "/" + name);
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  };
  add_dir("tests/gate/common", "");
  const OpSpec* spec = lookup_op(op);
  if (!spec) throw Error(ErrorCode::invalid_argument, "op", "unknown op '" + op + "' (" + op_name_list() + ")");
  add_dir(spec->source_dir, spec->reference_prefix);
  files.push_back("harness/verify/tolerances.cpp");
  files.push_back("harness/verify/accuracy.cpp");
  std::map<std::string, std::string> out;
  for (const auto& f : files) {
    const fs::path p = repo_root / f;
    out[f] = fs::is_regular_file(p) ? sha256_file(p) : std::string("missing");
  }
  return out;
}

}  // namespace lina::harness
