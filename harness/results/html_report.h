// One self-contained HTML page for `lina summarize --format html`: inline CSS and inline SVG
// charts, no scripts, no fonts or files fetched from anywhere.
#pragma once
#include <string>
#include <vector>

#include "harness/results/summary.h"

namespace lina::harness {

std::string html_escape(const std::string& s);
std::string render_summary_html(const std::vector<SummaryFile>& files, const SummaryOptions& opt);

}  // namespace lina::harness
