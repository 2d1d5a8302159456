// `lina profile`: Nsight Compute on the timed launches only, then a side-by-side of the kernels'
// duration, DRAM throughput, achieved occupancy, registers and top stall reasons.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lina::harness {

struct ProfileSpec {
  std::string op;
  std::vector<std::string> modes{"fwd"}, shapes;
  std::string set = "full";  // full | source
  int launch_count = 64;     // kernels profiled per side (0: every timed launch)
  bool safe_gate = true;     // false: `lina run --safe-gate off` (chunk_kda's cells as FLA's KDA layer calls them)
};

// NVTX filters for the ranges `lina run` pushes around timed samples: "lina:timed:<op>:<mode>:<shape>".
// Exact push/pop range names when modes and shapes are given, else one regex over the op's ranges.
std::vector<std::string> nvtx_includes(const ProfileSpec& spec);

// ncu ... -o <report_base> <lina> run --op ... --json <json>
std::vector<std::string> ncu_profile_argv(const std::string& ncu, const ProfileSpec& spec,
                                          const std::filesystem::path& report_base, const std::string& lina,
                                          const std::filesystem::path& json);
// ncu --import <rep> --csv --page raw: every collected metric, one row per profiled kernel.
std::vector<std::string> ncu_export_argv(const std::string& ncu, const std::filesystem::path& rep);

struct KernelProfile {
  std::string name;
  int launches = 0;
  double duration_us = 0;                    // median over launches
  std::optional<double> dram_pct, occupancy_pct, registers;  // means over launches
  std::vector<std::pair<std::string, double>> stalls;  // reason -> mean value, largest first
};

// Parses `ncu --csv --page raw` output (header row, optional units row, one row per launch) and
// aggregates per kernel name, in order of first appearance. lina::Error names `source` on bad input.
std::vector<KernelProfile> parse_ncu_raw_csv(const std::string& csv, const std::string& source);

// RFC 4180 rows (quoted fields, "" escapes, newlines inside quotes).
std::vector<std::vector<std::string>> parse_csv(const std::string& text);

std::string render_profile_side_by_side(const std::vector<KernelProfile>& base, const std::vector<KernelProfile>& head,
                                        bool have_base, int top_stalls = 3);

}  // namespace lina::harness
