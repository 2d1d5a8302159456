// `lina check`: one op on .npy inputs (FLA-style argument files), compared with the fp64
// reference at the gate's metric and tolerances; lina's outputs written back as .npy.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>

namespace lina::harness {

struct CheckOptions {
  std::string op;                       // chunk_gla | chunk_kda | chunk_gdn
  std::filesystem::path inputs;         // q.npy k.npy v.npy g.npy [beta.npy] [initial_state.npy] ...
  std::string backend;                  // cpu | cuda; empty: cuda when a GPU is visible, else cpu
  std::optional<std::filesystem::path> out;  // where o.npy, ht.npy, dq.npy ... go
};

// Returns 0 when every tensor passes, 1 when any fails. Bad inputs (missing / malformed /
// mis-shaped file, bad kwargs.json) -> lina::Error (invalid_argument) naming the file.
int run_check(const CheckOptions& opts, std::ostream& out);

}  // namespace lina::harness
