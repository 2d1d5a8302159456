// `lina summarize`: lina.bench/1 files (read by harness/results/schema) ranked by change, with the
// final-claim warnings and statistics, as text or markdown.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results/schema.h"

namespace lina::harness {

struct SummaryOptions {
  double threshold_pct = 5.0;
  int top = 0;  // 0: every comparison
  std::string baseline_impl = "fla-triton";  // side-by-side files: the speedups are against this implementation
};

// Comparisons ranked by |change_pct|, largest first; new/removed rows last.
std::vector<SummaryComparison> ranked(const std::vector<SummaryComparison>& cmps);
// Geometric mean of speedups over the cells that have one; nullopt when none.
std::optional<double> geomean_speedup(const std::vector<SummaryComparison>& cmps);
// REGRESSION / IMPROVED / within noise / new / removed / "" (below threshold).
std::string change_flag(const SummaryComparison& c, double threshold_pct);

// FAILED check / UNVERIFIED / THROTTLED / NOT RUN lines for the head cells of `f` (a side-by-side file's FLA rows are the
// reference, not claims: only NOT RUN applies to them).
std::vector<std::string> claim_warnings(const SummaryFile& f);

// Side-by-side files (rows with `impl`): one implementation's speedup over the baseline implementation at one
// cell, baseline median / its median, with the band the two rows' p10 / p90 give (baseline p10 / its p90 up to
// baseline p90 / its p10; absent without those quantiles).
struct ImplSpeedup {
  std::string key;  // the implementation's row's SummaryRow::key()
  std::string op, mode, shape, impl, baseline;
  double base_ms = 0, impl_ms = 0, speedup = 0;
  std::optional<double> low, high;
};
struct ImplGeomean {
  std::string impl, baseline, op, mode;
  double geomean = 0;
  int cells = 0;
};
// The baseline of a side-by-side file: opt.baseline_impl when a timed row has it, else the first timed reference
// row's impl (not lina's), else ""; "" also for a file without impl rows.
std::string side_by_side_baseline(const SummaryFile& f, const SummaryOptions& opt);
// Every timed row of another implementation whose cell has a timed baseline row, in file order.
std::vector<ImplSpeedup> side_by_side_speedups(const SummaryFile& f, const SummaryOptions& opt);
// Row key -> "1.234x" for each row of side_by_side_speedups, "baseline" for the baseline's timed rows.
std::map<std::string, std::string> side_by_side_speedup_labels(const SummaryFile& f, const SummaryOptions& opt);
// Geometric mean of the speedups per (implementation, op, mode), in order of first appearance.
std::vector<ImplGeomean> side_by_side_geomeans(const std::vector<ImplSpeedup>& speedups);

std::string render_summary_text(const std::vector<SummaryFile>& files, const SummaryOptions& opt);
std::string render_summary_markdown(const std::vector<SummaryFile>& files, const SummaryOptions& opt);

}  // namespace lina::harness
