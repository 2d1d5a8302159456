// `lina summarize`: lina.bench/1 files (read by harness/results/schema) ranked by change, with the
// final-claim warnings and statistics, as text or markdown.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results/schema.h"

namespace lina::harness {

struct SummaryOptions {
  double threshold_pct = 5.0;
  int top = 0;  // 0: every comparison
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

std::string render_summary_text(const std::vector<SummaryFile>& files, const SummaryOptions& opt);
std::string render_summary_markdown(const std::vector<SummaryFile>& files, const SummaryOptions& opt);

}  // namespace lina::harness
