#include "harness/results/summary.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "harness/util/terminal_text.h"
#include "lina/error.h"

namespace lina::harness {
namespace fs = std::filesystem;
using nlohmann::json;

std::vector<SummaryComparison> ranked(const std::vector<SummaryComparison>& cmps) {
  std::vector<SummaryComparison> out = cmps;
  std::stable_sort(out.begin(), out.end(), [](const SummaryComparison& a, const SummaryComparison& b) {
    if (a.change_pct.has_value() != b.change_pct.has_value()) return a.change_pct.has_value();
    if (!a.change_pct) return false;
    return std::fabs(*a.change_pct) > std::fabs(*b.change_pct);
  });
  return out;
}

std::optional<double> geomean_speedup(const std::vector<SummaryComparison>& cmps) {
  double log_sum = 0;
  int n = 0;
  for (const auto& c : cmps) {
    if (c.speedup && *c.speedup > 0 && c.verdict != "new" && c.verdict != "removed") {
      log_sum += std::log(*c.speedup);
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return std::exp(log_sum / n);
}

std::string change_flag(const SummaryComparison& c, double threshold_pct) {
  if (c.verdict == "new") return "new";
  if (c.verdict == "removed") return "removed";
  if (!c.change_pct) return "";
  if (std::fabs(*c.change_pct) < threshold_pct) return "";
  if (c.verdict == "noise") return "within noise";
  return *c.change_pct > 0 ? "REGRESSION" : "IMPROVED";
}

namespace {

std::string num(const std::optional<double>& v, const char* f = "{:.4f}") {
  return v ? fmt::format(fmt::runtime(f), *v) : std::string("-");
}
std::string clocks(const SummaryRow& r) {
  if (!r.clock_before && !r.clock_after) return "-";
  std::string s = num(r.clock_before, "{:.0f}") + "->" + num(r.clock_after, "{:.0f}");
  if (r.throttled) s += " THROTTLED";
  return s;
}
std::string short_sha(const std::string& s) { return s.empty() ? "-" : s; }

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string text() const {
    std::vector<size_t> w(header.size());
    for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
    for (const auto& r : rows)
      for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
    auto line = [&](const std::vector<std::string>& r) {
      std::string s = " ";
      for (size_t i = 0; i < r.size(); ++i) s += " " + r[i] + std::string(w[i] - r[i].size() + 1, ' ');
      while (!s.empty() && s.back() == ' ') s.pop_back();
      return s + "\n";
    };
    std::string out = line(header);
    for (const auto& r : rows) out += line(r);
    return out;
  }
  std::string markdown() const {
    auto cell = [](std::string s) {
      std::string o;
      for (char c : s) o += (c == '|') ? std::string("\\|") : std::string(1, c);
      return o;
    };
    std::string out = "|";
    for (const auto& h : header) { out += ' '; out += cell(h); out += " |"; }
    out += "\n|";
    for (size_t i = 0; i < header.size(); ++i) out += "---|";
    out += "\n";
    for (const auto& r : rows) {
      out += "|";
      for (const auto& c : r) { out += ' '; out += cell(c); out += " |"; }
      out += "\n";
    }
    return out;
  }
};

Table comparison_table(const SummaryFile& f, const SummaryOptions& opt) {
  Table t{{"op", "mode", "shape", "base ms", "head ms", "speedup", "95% CI", "change %", "verdict", "check", "flag"}, {}};
  auto r = ranked(f.comparisons);
  if (opt.top > 0 && static_cast<int>(r.size()) > opt.top) r.resize(opt.top);
  for (const auto& c : r) {
    std::string ci = (c.ci_low && c.ci_high) ? fmt::format("[{:.3f}, {:.3f}]", *c.ci_low, *c.ci_high) : "-";
    t.rows.push_back({c.op, c.mode, c.shape, num(c.base_ms), num(c.head_ms), num(c.speedup, "{:.3f}x"), ci,
                      num(c.change_pct, "{:+.2f}"), c.verdict, check_label(c.check), change_flag(c, opt.threshold_pct)});
  }
  return t;
}

Table stats_table(const std::vector<SummaryRow>& rows) {
  Table t{{"op", "mode", "shape", "median", "mean", "std", "min", "p10", "p90", "n", "frac_hbm", "frac_tc", "sm MHz", "check"}, {}};
  for (const auto& r : rows) {
    const std::string op = row_op_label(r);
    if (!r.not_run.empty()) {
      t.rows.push_back({op, r.mode, r.shape, "not run", "-", "-", "-", "-", "-", "0", "-", "-", "-", "-"});
      continue;
    }
    t.rows.push_back({op, r.mode, r.shape, num(r.median_ms), num(r.mean_ms), num(r.std_ms), num(r.min_ms),
                      num(r.p10_ms), num(r.p90_ms), std::to_string(r.samples), num(r.frac_hbm, "{:.3f}"),
                      num(r.frac_tc, "{:.3f}"), clocks(r), is_reference_row(r) ? "reference" : check_label(r.check)});
  }
  return t;
}

std::vector<std::string> header_lines(const SummaryFile& f) {
  std::vector<std::string> l;
  l.push_back(fmt::format("head sha: {}{}", short_sha(f.head_sha), f.head_dirty ? " (dirty tree)" : ""));
  if (!f.base_sha.empty() || !f.base_ref.empty()) {
    l.push_back(fmt::format("base sha: {}{}", short_sha(f.base_sha), f.base_ref.empty() ? "" : " (ref " + f.base_ref + ")"));
  }
  l.push_back("gpu: " + (f.gpu.empty() ? std::string("-") : f.gpu));
  l.push_back("command: " + (f.command.empty() ? std::string("-") : f.command));
  if (!f.base_command.empty()) l.push_back("base command: " + f.base_command);
  if (f.gate.is_object()) {
    auto g = [&](const char* k) { return f.gate.contains(k) ? f.gate[k].dump() : std::string("-"); };
    l.push_back(fmt::format("gate: {} (selected {}, passed {}, failed {}, skipped {})", g("status"), g("selected"),
                            g("passed"), g("failed"), g("skipped")));
  }
  if (f.verdict.is_object()) {
    std::string reasons;
    if (f.verdict.contains("reasons") && f.verdict["reasons"].is_array())
      for (const auto& r : f.verdict["reasons"]) reasons += (reasons.empty() ? "" : "; ") + (r.is_string() ? r.get<std::string>() : r.dump());
    l.push_back(fmt::format("verdict: promote={} label={}{}", f.verdict.value("promote", json()).dump(),
                            f.verdict.value("label", json()).dump(), reasons.empty() ? "" : " — " + reasons));
  }
  return l;
}

}  // namespace

std::vector<std::string> claim_warnings(const SummaryFile& f) {
  std::vector<std::string> w;
  auto scan = [&](const std::vector<SummaryRow>& rows, const char* side) {
    for (const auto& r : rows) {
      const std::string who = r.impl.empty() ? side : r.impl;
      if (!r.not_run.empty()) {
        w.push_back(fmt::format("NOT RUN: {} {} {} ({}): {}", r.op, r.mode, r.shape, who, r.not_run));
        continue;
      }
      if (is_reference_row(r)) continue;
      if (r.check == CheckState::fail) w.push_back(fmt::format("FAILED check: {} {} {} ({})", r.op, r.mode, r.shape, who));
      if (r.check == CheckState::unverified) w.push_back(fmt::format("UNVERIFIED: {} {} {} ({}): no passing check recorded", r.op, r.mode, r.shape, who));
      if (r.throttled) w.push_back(fmt::format("THROTTLED: {} {} {} ({})", r.op, r.mode, r.shape, who));
    }
  };
  scan(f.rows, "head");
  return w;
}


std::string render_summary_text(const std::vector<SummaryFile>& files, const SummaryOptions& opt) {
  std::string out;
  for (const auto& f : files) {
    out += fmt::format("== {} ({})\n", f.path.string(), f.kind);
    for (const auto& l : header_lines(f)) out += "  " + l + "\n";
    if (!f.comparisons.empty()) {
      const size_t shown = opt.top > 0 ? std::min<size_t>(opt.top, f.comparisons.size()) : f.comparisons.size();
      out += fmt::format("\n  comparisons ranked by |change| (threshold {}%, {} of {}):\n", opt.threshold_pct, shown, f.comparisons.size());
      out += comparison_table(f, opt).text();
      auto g = geomean_speedup(f.comparisons);
      out += "  geomean speedup: " + (g ? fmt::format("{:.3f}x", *g) : std::string("-")) + "\n";
    }
    out += "\n  final-claim stats, head (ms):\n" + stats_table(f.rows).text();
    if (!f.base_rows.empty()) out += "\n  final-claim stats, base (ms):\n" + stats_table(f.base_rows).text();
    auto w = claim_warnings(f);
    if (!w.empty()) {
      out += "\n";
      for (const auto& s : w) out += "  " + s + "\n";
    }
    out += "\n";
  }
  return terminal_safe(out);
}

std::string render_summary_markdown(const std::vector<SummaryFile>& files, const SummaryOptions& opt) {
  std::string out;
  for (const auto& f : files) {
    out += fmt::format("## `{}` ({})\n\n", f.path.string(), f.kind);
    for (const auto& l : header_lines(f)) out += "- " + l + "\n";
    if (!f.comparisons.empty()) {
      out += fmt::format("\n### Comparisons ranked by |change| (threshold {}%)\n\n", opt.threshold_pct);
      out += comparison_table(f, opt).markdown();
      auto g = geomean_speedup(f.comparisons);
      out += "\nGeomean speedup: " + (g ? fmt::format("{:.3f}x", *g) : std::string("-")) + "\n";
    }
    out += "\n### Final-claim stats, head (ms)\n\n" + stats_table(f.rows).markdown();
    if (!f.base_rows.empty()) out += "\n### Final-claim stats, base (ms)\n\n" + stats_table(f.base_rows).markdown();
    auto w = claim_warnings(f);
    if (!w.empty()) {
      out += "\n";
      for (const auto& s : w) out += "- **" + s + "**\n";
    }
    out += "\n";
  }
  return terminal_safe(out);
}

}  // namespace lina::harness
