#include "harness/results/report.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "harness/engine/registry.h"

namespace lina::harness {

std::string check_word(const CheckResult& c) {
  if (c.reference == "none") return "off";
  if (!c.pass) return "n/a";
  return *c.pass ? "pass" : "FAIL";
}

std::string format_table(const std::vector<ResultRow>& rows_in) {
  std::vector<const ResultRow*> rows;
  std::map<std::string, std::size_t> shape_order;
  for (const auto& r : rows_in) {
    rows.push_back(&r);
    shape_order.emplace(r.shape, shape_order.size());
  }
  const auto mode_rank = [](const std::string& m) {
    const auto& all = all_modes();
    for (std::size_t i = 0; i < all.size(); ++i)
      if (mode_name(all[i]) == m) return i;
    return all.size();
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const ResultRow* a, const ResultRow* b) {
    if (mode_rank(a->mode) != mode_rank(b->mode)) return mode_rank(a->mode) < mode_rank(b->mode);
    if (shape_order[a->shape] != shape_order[b->shape]) return shape_order[a->shape] < shape_order[b->shape];
    return a->op < b->op;
  });

  const std::vector<std::string> header{"op", "mode", "shape", "median ms", "p10-p90 ms", "ns/th", "GB/s", "%HBM", "TFLOP/s", "check"};
  const std::vector<bool> right{false, false, false, true, true, true, true, true, true, false};
  std::vector<std::vector<std::string>> cells;
  for (const auto* r : rows) {
    std::string check = check_word(r->check);
    if (r->check.err_ratio) check += fmt::format(" {:.1e}", *r->check.err_ratio);
    // FLA's metric passes any tensor within 1e-6 absolute whatever its ratio: say so rather than
    // print a ratio above the tolerance next to "pass".
    if (r->check.pass.value_or(false) && r->check.err_ratio && r->check.tolerance && *r->check.err_ratio >= *r->check.tolerance)
      check += " (abs<=1e-6)";
    if (r->throttled) check += " (throttled)";
    cells.push_back({r->op, r->mode, r->shape, fmt::format("{:.4f}", r->stats.median),
                     fmt::format("{:.4f}-{:.4f}", r->stats.p10, r->stats.p90), fmt::format("{:.3f}", r->ns_per_token_head),
                     fmt::format("{:.1f}", r->gbps), fmt::format("{:.1f}", 100 * r->frac_hbm), fmt::format("{:.2f}", r->tflops),
                     check});
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  const auto line = [&](const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t c = 0; c < v.size(); ++c) {
      if (c) s += "  ";
      s += right[c] ? fmt::format("{:>{}}", v[c], width[c]) : fmt::format("{:<{}}", v[c], width[c]);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(header);
  std::string rule;
  for (std::size_t c = 0; c < header.size(); ++c) rule += (c ? "  " : "") + std::string(width[c], '-');
  out += rule + "\n";
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (i > 0 && rows[i]->mode != rows[i - 1]->mode) out += "\n";
    out += line(cells[i]);
  }
  return out;
}

std::string progress_line(std::size_t index, std::size_t total, const std::string& op, const std::string& mode,
                          const std::string& shape, const std::string& state) {
  return fmt::format("[{}/{}] {} {} {} {}", index, total, op, mode, shape, state);
}

}  // namespace lina::harness
