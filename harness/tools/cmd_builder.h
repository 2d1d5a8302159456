// `lina cmd`: build one verify / run / profile command line from validated pieces, refs resolved
// to SHAs, without running anything.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lina::harness {

// Validates op names (against the registry), modes and shape names (the grammar
// B{b}_T{t}_H{h}_D{d}[_HV{hv}] or varlen_<dist>_T{t}_H{h}_D{d}[_HV{hv}]); throws lina::Error naming
// the flag and the bad value.
void check_cell_selection(const std::vector<std::string>& ops, const std::vector<std::string>& modes,
                          const std::vector<std::string>& shapes);

// Parsed shape name; nullopt when `name` does not follow the grammar.
struct ShapeName {
  bool varlen = false;
  std::string dist;  // varlen distribution name
  long long B = 1, T = 0, H = 0, D = 0, HV = 0;  // HV = 0: not given
};
std::optional<ShapeName> parse_shape_name(const std::string& name);

struct CmdRequest {
  std::string action;  // verify | run | profile
  std::vector<std::string> ops, modes, shapes;
  std::optional<std::string> base;  // git ref, resolved to a SHA in the output
  bool no_base = false;
  std::optional<long long> seed, rounds;
  std::optional<std::string> gate_k, json, backend, set, out;
};

// argv of the command (argv[0] = `lina_exe`). Refs are resolved in `repo`.
std::vector<std::string> build_command_argv(const CmdRequest& req, const std::string& lina_exe,
                                            const std::filesystem::path& repo);

}  // namespace lina::harness
