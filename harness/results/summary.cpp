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

std::string cell_of(const SummaryRow& r) { return r.op + "|" + r.mode + "|" + r.shape + "|" + r.shape_keys.dump(); }
bool timed(const SummaryRow& r) { return r.not_run.empty() && r.median_ms > 0; }

}  // namespace

std::string side_by_side_baseline(const SummaryFile& f, const SummaryOptions& opt) {
  std::string first_reference;
  for (const auto& r : f.rows) {
    if (r.impl.empty() || !timed(r)) continue;
    if (r.impl == opt.baseline_impl) return r.impl;
    if (first_reference.empty() && is_reference_row(r)) first_reference = r.impl;
  }
  return first_reference;
}

std::vector<ImplSpeedup> side_by_side_speedups(const SummaryFile& f, const SummaryOptions& opt) {
  const std::string base = side_by_side_baseline(f, opt);
  if (base.empty()) return {};
  std::map<std::string, const SummaryRow*> base_rows;
  for (const auto& r : f.rows)
    if (r.impl == base && timed(r)) base_rows.emplace(cell_of(r), &r);
  std::vector<ImplSpeedup> out;
  for (const auto& r : f.rows) {
    if (r.impl.empty() || r.impl == base || !timed(r)) continue;
    const auto it = base_rows.find(cell_of(r));
    if (it == base_rows.end()) continue;
    const SummaryRow& b = *it->second;
    ImplSpeedup s{r.key(), r.op, r.mode, r.shape, r.impl, base, b.median_ms, r.median_ms, b.median_ms / r.median_ms, {}, {}};
    if (b.p10_ms && b.p90_ms && r.p10_ms && r.p90_ms && *r.p10_ms > 0 && *r.p90_ms > 0) {
      s.low = *b.p10_ms / *r.p90_ms;
      s.high = *b.p90_ms / *r.p10_ms;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::map<std::string, std::string> side_by_side_speedup_labels(const SummaryFile& f, const SummaryOptions& opt) {
  std::map<std::string, std::string> labels;
  const std::string base = side_by_side_baseline(f, opt);
  for (const auto& r : f.rows)
    if (!base.empty() && r.impl == base && timed(r)) labels[r.key()] = "baseline";
  for (const auto& s : side_by_side_speedups(f, opt)) labels[s.key] = fmt::format("{:.3f}x", s.speedup);
  return labels;
}

std::vector<ImplGeomean> side_by_side_geomeans(const std::vector<ImplSpeedup>& speedups) {
  std::vector<ImplGeomean> out;
  std::map<std::string, std::pair<size_t, double>> at;  // impl|op|mode -> (index in out, sum of logs)
  for (const auto& s : speedups) {
    const std::string k = s.impl + "|" + s.op + "|" + s.mode;
    auto it = at.find(k);
    if (it == at.end()) {
      it = at.emplace(k, std::pair<size_t, double>{out.size(), 0.0}).first;
      out.push_back({s.impl, s.baseline, s.op, s.mode, 0, 0});
    }
    it->second.second += std::log(s.speedup);
    ++out[it->second.first].cells;
  }
  for (const auto& [k, v] : at) out[v.first].geomean = std::exp(v.second / out[v.first].cells);
  return out;
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

// A side-by-side file's speedup column: row key -> "1.234x", "baseline" for the baseline's own rows.
struct SpeedupColumn {
  std::string baseline;
  std::map<std::string, std::string> cells;
};

SpeedupColumn speedup_column(const SummaryFile& f, const SummaryOptions& opt) {
  return {side_by_side_baseline(f, opt), side_by_side_speedup_labels(f, opt)};
}

Table stats_table(const std::vector<SummaryRow>& rows, const SpeedupColumn* speedup = nullptr) {
  Table t{{"op", "mode", "shape", "median", "mean", "std", "min", "p10", "p90", "n", "frac_hbm", "frac_tc", "sm MHz", "check"}, {}};
  const bool with_speedup = speedup && !speedup->baseline.empty();
  if (with_speedup) t.header.push_back("speedup vs " + speedup->baseline);
  for (const auto& r : rows) {
    const std::string op = row_op_label(r);
    if (!r.not_run.empty()) {
      t.rows.push_back({op, r.mode, r.shape, "not run", "-", "-", "-", "-", "-", "0", "-", "-", "-", "-"});
    } else {
      t.rows.push_back({op, r.mode, r.shape, num(r.median_ms), num(r.mean_ms), num(r.std_ms), num(r.min_ms),
                        num(r.p10_ms), num(r.p90_ms), std::to_string(r.samples), num(r.frac_hbm, "{:.3f}"),
                        num(r.frac_tc, "{:.3f}"), clocks(r), is_reference_row(r) ? "reference" : check_label(r.check)});
    }
    if (with_speedup) {
      const auto it = speedup->cells.find(r.key());
      t.rows.back().push_back(it == speedup->cells.end() ? "-" : it->second);
    }
  }
  return t;
}

// "geomean speedup of IMPL over BASE, OP MODE: 1.234x (N cells)", one line per implementation, op and mode.
std::vector<std::string> geomean_lines(const SummaryFile& f, const SummaryOptions& opt) {
  std::vector<std::string> l;
  for (const auto& g : side_by_side_geomeans(side_by_side_speedups(f, opt)))
    l.push_back(fmt::format("geomean speedup of {} over {}, {} {}: {:.3f}x ({} cell{})", g.impl, g.baseline, g.op, g.mode,
                            g.geomean, g.cells, g.cells == 1 ? "" : "s"));
  return l;
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
    const SpeedupColumn speedup = speedup_column(f, opt);
    out += "\n  final-claim stats, head (ms):\n" + stats_table(f.rows, &speedup).text();
    for (const auto& l : geomean_lines(f, opt)) out += "  " + l + "\n";
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
    const SpeedupColumn speedup = speedup_column(f, opt);
    out += "\n### Final-claim stats, head (ms)\n\n" + stats_table(f.rows, &speedup).markdown();
    const auto geomeans = geomean_lines(f, opt);
    if (!geomeans.empty()) out += "\n";
    for (const auto& l : geomeans) out += "- " + l + "\n";
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
