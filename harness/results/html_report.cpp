#include "harness/results/html_report.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include <fmt/format.h>

namespace lina::harness {

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

namespace {

constexpr const char* kCss = R"(body{font-family:sans-serif;margin:24px;color:#1b1f23;background:#fff}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccd}h3{font-size:15px}
table{border-collapse:collapse;font-size:12px;margin:8px 0}td,th{border:1px solid #ccd;padding:3px 6px;text-align:right}
td:nth-child(-n+3),th{text-align:left}th{background:#eef}.bad{background:#fdd;color:#900;font-weight:bold}
.good{background:#dfd;color:#060}.warn{background:#ffe8b0}.meta{font-size:13px;line-height:1.5}
.meta code{background:#f3f3f6;padding:1px 4px}svg{background:#fafafe;border:1px solid #dde;margin:6px 0}
svg text{font-size:11px;fill:#333}.legend{font-size:12px})";

std::string cell_label(const std::string& op, const std::string& mode, const std::string& shape) {
  return op + " " + mode + " " + shape;
}

// Horizontal bar chart of change % per cell (negative = faster, green; positive = slower, red).
std::string change_chart(const std::vector<SummaryComparison>& cmps, double threshold) {
  std::vector<const SummaryComparison*> rows;
  for (const auto& c : cmps) if (c.change_pct) rows.push_back(&c);
  if (rows.empty()) return "<p>No paired comparison rows: no change chart.</p>";
  double lim = threshold;
  for (auto* c : rows) lim = std::max(lim, std::fabs(*c->change_pct));
  lim *= 1.1;
  const int label_w = 330, plot_w = 560, row_h = 22, top = 24;
  const int h = top + row_h * static_cast<int>(rows.size()) + 24;
  const int w = label_w + plot_w + 80;
  const double x0 = label_w + plot_w / 2.0, scale = (plot_w / 2.0) / lim;
  std::string s = fmt::format(R"(<svg width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="change per cell">)", w, h, w, h);
  s += fmt::format(R"(<text x="{}" y="16">change % (head vs base; left = faster)</text>)", label_w);
  for (double t : {-threshold, threshold}) {
    s += fmt::format(R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" stroke="#c90" stroke-dasharray="4 3"/>)", x0 + t * scale, top - 4, h - 20);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& c = *rows[i];
    const double v = *c.change_pct, y = top + row_h * static_cast<double>(i);
    const double bx = v < 0 ? x0 + v * scale : x0, bw = std::max(1.0, std::fabs(v) * scale);
    const char* color = c.verdict == "noise" ? "#9aa" : (v < 0 ? "#2a8a3a" : "#c0392b");
    s += fmt::format(R"(<text x="4" y="{:.1f}">{}</text>)", y + 15, html_escape(cell_label(c.op, c.mode, c.shape)));
    s += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{}" fill="{}"/>)", bx, y + 4, bw, row_h - 8, color);
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{:+.1f}%</text>)", x0 + plot_w / 2.0 + 6, y + 15, v);
  }
  s += fmt::format(R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" stroke="#333"/>)", x0, top - 4, h - 20);
  return s + "</svg>";
}

// Grouped bars: base and head median latency per cell.
std::string latency_chart(const std::vector<SummaryComparison>& cmps) {
  std::vector<const SummaryComparison*> rows;
  for (const auto& c : cmps) if (c.base_ms || c.head_ms) rows.push_back(&c);
  if (rows.empty()) return "<p>No comparison rows: no latency chart.</p>";
  double mx = 0;
  for (auto* c : rows) mx = std::max({mx, c->base_ms.value_or(0), c->head_ms.value_or(0)});
  if (mx <= 0) mx = 1;
  const int label_w = 330, plot_w = 560, row_h = 30, top = 24;
  const int h = top + row_h * static_cast<int>(rows.size()) + 20, w = label_w + plot_w + 110;
  std::string s = fmt::format(R"(<svg width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="latency base vs head">)", w, h, w, h);
  s += fmt::format(R"(<text x="{}" y="16">median latency, ms</text><rect x="{}" y="6" width="10" height="10" fill="#7f8fa6"/><text x="{}" y="16">base</text><rect x="{}" y="6" width="10" height="10" fill="#2e86de"/><text x="{}" y="16">head</text>)",
                   label_w, label_w + 140, label_w + 154, label_w + 200, label_w + 214);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& c = *rows[i];
    const double y = top + row_h * static_cast<double>(i);
    s += fmt::format(R"(<text x="4" y="{:.1f}">{}</text>)", y + 18, html_escape(cell_label(c.op, c.mode, c.shape)));
    int k = 0;
    for (auto [v, color] : {std::pair{c.base_ms, "#7f8fa6"}, std::pair{c.head_ms, "#2e86de"}}) {
      const double by = y + 3 + 12 * k++;
      if (!v) continue;
      const double bw = std::max(1.0, *v / mx * plot_w);
      s += fmt::format(R"(<rect x="{}" y="{:.1f}" width="{:.1f}" height="11" fill="{}"/>)", label_w, by, bw, color);
      s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{:.4f}</text>)", label_w + bw + 4, by + 10, *v);
    }
  }
  return s + "</svg>";
}

// Side-by-side files: the implementations in order of first appearance, each with its colour.
struct ImplColours {
  std::vector<std::string> impls;
  const char* of(const std::string& impl) const {
    static const char* palette[] = {"#2e86de", "#7f8fa6", "#e67e22", "#8e44ad", "#16a085", "#c0392b"};
    const auto it = std::find(impls.begin(), impls.end(), impl);
    return palette[static_cast<size_t>(it - impls.begin()) % std::size(palette)];
  }
  std::string legend(int x, int y) const {
    std::string s;
    for (const auto& impl : impls) {
      s += fmt::format(R"(<rect x="{}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}">{}</text>)", x, y - 10,
                       of(impl), x + 14, y, html_escape(impl));
      x += 24 + 7 * static_cast<int>(impl.size());
    }
    return s;
  }
};

ImplColours impl_colours(const std::vector<SummaryRow>& rows) {
  ImplColours c;
  for (const auto& r : rows)
    if (!r.impl.empty() && std::find(c.impls.begin(), c.impls.end(), r.impl) == c.impls.end()) c.impls.push_back(r.impl);
  return c;
}

// Side-by-side files: one bar per implementation and cell (median latency), the implementation named in the
// legend, by colour, and in each bar's label.
std::string impl_latency_chart(const std::vector<SummaryRow>& rows_in, const ImplColours& colours) {
  std::vector<std::string> cells;  // op mode shape, in order of first appearance
  std::vector<std::vector<const SummaryRow*>> bars;
  double mx = 0;
  for (const auto& r : rows_in) {
    if (r.impl.empty() || !r.not_run.empty()) continue;
    const std::string label = cell_label(r.op, r.mode, r.shape);
    auto it = std::find(cells.begin(), cells.end(), label);
    if (it == cells.end()) {
      cells.push_back(label);
      bars.emplace_back();
      it = cells.end() - 1;
    }
    bars[static_cast<size_t>(it - cells.begin())].push_back(&r);
    mx = std::max(mx, r.median_ms);
  }
  if (cells.empty()) return "<p>No timed side-by-side rows: no latency chart.</p>";
  const int label_w = 330, plot_w = 520, bar_h = 12, top = 28;
  int h = top + 12;
  for (const auto& b : bars) h += bar_h * static_cast<int>(b.size()) + 10;
  const int w = label_w + plot_w + 200;
  std::string s = fmt::format(R"(<svg width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="median latency per implementation">)", w, h, w, h);
  s += fmt::format(R"(<text x="{}" y="16">median latency, ms</text>)", label_w) + colours.legend(label_w + 140, 16);
  double y = top;
  for (size_t i = 0; i < cells.size(); ++i) {
    s += fmt::format(R"(<text x="4" y="{:.1f}">{}</text>)", y + 10, html_escape(cells[i]));
    for (const SummaryRow* r : bars[i]) {
      const double bw = std::max(1.0, r->median_ms / mx * plot_w);
      s += fmt::format(R"(<rect x="{}" y="{:.1f}" width="{:.1f}" height="{}" fill="{}"><title>{}</title></rect>)", label_w, y, bw,
                       bar_h - 1, colours.of(r->impl), html_escape(r->impl));
      s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{} {:.4f}</text>)", label_w + bw + 4, y + 10, html_escape(r->impl), r->median_ms);
      y += bar_h;
    }
    y += 10;
  }
  return s + "</svg>";
}

// Side-by-side files: each implementation's speedup over the baseline per cell (baseline median / its median),
// a whisker over the p10 / p90 band, and the baseline at 1.
std::string impl_speedup_chart(const std::vector<ImplSpeedup>& speedups, const ImplColours& colours) {
  if (speedups.empty()) return "<p>No cell has both a baseline and another implementation timed: no speedup chart.</p>";
  double mx = 1.0;
  for (const auto& sp : speedups) mx = std::max({mx, sp.speedup, sp.high.value_or(0)});
  mx *= 1.1;
  const int label_w = 330, plot_w = 520, row_h = 20, top = 28;
  const int h = top + row_h * static_cast<int>(speedups.size()) + 20, w = label_w + plot_w + 260;
  const double scale = plot_w / mx, one = label_w + scale;
  std::string s = fmt::format(R"(<svg width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="speedup per cell">)", w, h, w, h);
  s += fmt::format(R"(<text x="{}" y="16">speedup over {} (baseline median / median; whisker: p10-p90 band)</text>)", label_w,
                   html_escape(speedups.front().baseline));
  s += fmt::format(R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" stroke="#c90" stroke-dasharray="4 3"/>)", one, top - 4, h - 16);
  for (size_t i = 0; i < speedups.size(); ++i) {
    const auto& sp = speedups[i];
    const double y = top + row_h * static_cast<double>(i), bw = std::max(1.0, sp.speedup * scale);
    s += fmt::format(R"(<text x="4" y="{:.1f}">{}</text>)", y + 13, html_escape(cell_label(sp.op, sp.mode, sp.shape)));
    s += fmt::format(R"(<rect x="{}" y="{:.1f}" width="{:.1f}" height="{}" fill="{}"><title>{}</title></rect>)", label_w, y + 3, bw,
                     row_h - 6, colours.of(sp.impl), html_escape(sp.impl));
    std::string band;
    if (sp.low && sp.high) {
      const double yl = y + row_h / 2.0;
      s += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#222"/>)", label_w + *sp.low * scale, yl,
                       label_w + *sp.high * scale, yl);
      band = fmt::format(" [{:.2f}, {:.2f}]", *sp.low, *sp.high);
    }
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{} {:.2f}x{}</text>)", label_w + std::max(bw, sp.high.value_or(0) * scale) + 4,
                     y + 13, html_escape(sp.impl), sp.speedup, band);
  }
  return s + "</svg>";
}

// Grouped bars: fraction of the HBM and tensor-core ceilings per cell.
std::string roofline_chart(const std::vector<SummaryRow>& rows_in) {
  std::vector<const SummaryRow*> rows;
  for (const auto& r : rows_in) if (r.frac_hbm || r.frac_tc) rows.push_back(&r);
  if (rows.empty()) return "<p>No frac_hbm / frac_tc values: no roofline chart.</p>";
  const int label_w = 400, plot_w = 560, row_h = 30, top = 24;  // labels carry the implementation: "op [impl] mode shape"
  const int h = top + row_h * static_cast<int>(rows.size()) + 20, w = label_w + plot_w + 110;
  std::string s = fmt::format(R"(<svg width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="fraction of roofline">)", w, h, w, h);
  s += fmt::format(R"(<text x="{}" y="16">fraction of ceiling (1.0 = roofline)</text><rect x="{}" y="6" width="10" height="10" fill="#e67e22"/><text x="{}" y="16">frac_hbm</text><rect x="{}" y="6" width="10" height="10" fill="#8e44ad"/><text x="{}" y="16">frac_tc</text>)",
                   label_w, label_w + 240, label_w + 254, label_w + 330, label_w + 344);
  s += fmt::format(R"(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#c00" stroke-dasharray="4 3"/>)", label_w + plot_w, top - 4, h - 16);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = *rows[i];
    const double y = top + row_h * static_cast<double>(i);
    s += fmt::format(R"(<text x="4" y="{:.1f}">{}</text>)", y + 18, html_escape(cell_label(row_op_label(r), r.mode, r.shape)));
    int k = 0;
    for (auto [v, color] : {std::pair{r.frac_hbm, "#e67e22"}, std::pair{r.frac_tc, "#8e44ad"}}) {
      const double by = y + 3 + 12 * k++;
      if (!v) continue;
      const double bw = std::max(1.0, std::min(*v, 1.2) * plot_w);
      s += fmt::format(R"(<rect x="{}" y="{:.1f}" width="{:.1f}" height="11" fill="{}"/>)", label_w, by, bw, color);
      s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{:.3f}</text>)", label_w + bw + 4, by + 10, *v);
    }
  }
  return s + "</svg>";
}

std::string opt_num(const std::optional<double>& v, const char* f = "{:.4f}") {
  return v ? fmt::format(fmt::runtime(f), *v) : std::string("-");
}

std::string check_td(CheckState c) {
  const char* cls = c == CheckState::pass ? "good" : "bad";
  return fmt::format(R"(<td class="{}">{}</td>)", cls, check_label(c));
}

// speedup: a side-by-side file's speedup per row key (its baseline's rows "baseline"); empty: no such column.
std::string stats_html(const std::vector<SummaryRow>& rows, const std::map<std::string, std::string>& speedup = {},
                       const std::string& baseline = "") {
  const bool with_speedup = !baseline.empty();
  std::string s = "<table><tr><th>op</th><th>mode</th><th>shape</th><th>median</th><th>mean</th><th>std</th><th>min</th><th>p10</th><th>p90</th><th>n</th><th>frac_hbm</th><th>frac_tc</th><th>SM MHz before/after</th><th>check</th>";
  s += with_speedup ? "<th>speedup vs " + html_escape(baseline) + "</th></tr>" : "</tr>";
  for (const auto& r : rows) {
    if (!r.not_run.empty()) {
      s += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td colspan=\"{}\">not run: {}</td></tr>", html_escape(row_op_label(r)),
                       html_escape(r.mode), html_escape(r.shape), with_speedup ? 12 : 11, html_escape(r.not_run));
      continue;
    }
    std::string sp_td;
    if (with_speedup) {
      const auto it = speedup.find(r.key());
      sp_td = "<td>" + html_escape(it == speedup.end() ? "-" : it->second) + "</td>";
    }
    std::string clk = (r.clock_before || r.clock_after) ? opt_num(r.clock_before, "{:.0f}") + " / " + opt_num(r.clock_after, "{:.0f}") : "-";
    s += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td{}>{}</td>{}</tr>",
                     html_escape(row_op_label(r)), html_escape(r.mode), html_escape(r.shape), opt_num(r.median_ms), opt_num(r.mean_ms),
                     opt_num(r.std_ms), opt_num(r.min_ms), opt_num(r.p10_ms), opt_num(r.p90_ms), r.samples,
                     opt_num(r.frac_hbm, "{:.3f}"), opt_num(r.frac_tc, "{:.3f}"), r.throttled ? R"( class="warn")" : "",
                     html_escape(clk + (r.throttled ? " throttled" : "")),
                     (is_reference_row(r) ? std::string("<td>reference</td>") : check_td(r.check)) + sp_td);
  }
  return s + "</table>";
}

}  // namespace

std::string render_summary_html(const std::vector<SummaryFile>& files, const SummaryOptions& opt) {
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>lina summary</title><style>";
  s += kCss;
  s += "</style></head><body><h1>lina benchmark summary</h1>";
  for (const auto& f : files) {
    s += fmt::format("<h2>{} <small>({})</small></h2><div class=\"meta\">", html_escape(f.path.string()), html_escape(f.kind));
    s += fmt::format("head sha <code>{}</code>{}<br>", html_escape(f.head_sha.empty() ? "-" : f.head_sha), f.head_dirty ? " <b class=\"bad\">dirty tree</b>" : "");
    if (!f.base_sha.empty() || !f.base_ref.empty())
      s += fmt::format("base sha <code>{}</code> (ref <code>{}</code>)<br>", html_escape(f.base_sha), html_escape(f.base_ref));
    s += fmt::format("gpu {}<br>command <code>{}</code><br>", html_escape(f.gpu.empty() ? "-" : f.gpu), html_escape(f.command.empty() ? "-" : f.command));
    if (!f.base_command.empty()) s += fmt::format("base command <code>{}</code><br>", html_escape(f.base_command));
    if (f.gate.is_object()) s += fmt::format("gate <code>{}</code><br>", html_escape(f.gate.dump()));
    if (f.verdict.is_object()) s += fmt::format("verdict <code>{}</code><br>", html_escape(f.verdict.dump()));
    s += "</div>";
    if (!f.comparisons.empty()) {
      auto g = geomean_speedup(f.comparisons);
      s += fmt::format("<h3>Change per cell</h3>{}<p>Geomean speedup: <b>{}</b></p>", change_chart(f.comparisons, opt.threshold_pct),
                       g ? fmt::format("{:.3f}x", *g) : std::string("-"));
      s += "<h3>Latency, base vs head</h3>" + latency_chart(f.comparisons);
      s += fmt::format("<h3>Comparisons ranked by |change| (threshold {}%)</h3>", opt.threshold_pct);
      s += "<table><tr><th>op</th><th>mode</th><th>shape</th><th>base ms</th><th>head ms</th><th>speedup</th><th>95% CI</th><th>change %</th><th>verdict</th><th>check</th><th>flag</th></tr>";
      auto r = ranked(f.comparisons);
      if (opt.top > 0 && static_cast<int>(r.size()) > opt.top) r.resize(opt.top);
      for (const auto& c : r) {
        const std::string flag = change_flag(c, opt.threshold_pct);
        const char* cls = flag == "REGRESSION" ? " class=\"bad\"" : flag == "IMPROVED" ? " class=\"good\"" : "";
        std::string ci = (c.ci_low && c.ci_high) ? fmt::format("[{:.3f}, {:.3f}]", *c.ci_low, *c.ci_high) : "-";
        s += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}<td{}>{}</td></tr>",
                         html_escape(c.op), html_escape(c.mode), html_escape(c.shape), opt_num(c.base_ms), opt_num(c.head_ms),
                         opt_num(c.speedup, "{:.3f}x"), ci, opt_num(c.change_pct, "{:+.2f}"), html_escape(c.verdict),
                         check_td(c.check), cls, html_escape(flag));
      }
      s += "</table>";
    }
    const auto warnings = claim_warnings(f);
    if (!warnings.empty()) {
      s += "<ul>";
      for (const auto& w : warnings) s += "<li class=\"bad\">" + html_escape(w) + "</li>";
      s += "</ul>";
    }
    const std::string baseline = side_by_side_baseline(f, opt);
    const auto speedup_cells = side_by_side_speedup_labels(f, opt);
    if (!baseline.empty()) {
      const ImplColours colours = impl_colours(f.rows);
      const auto speedups = side_by_side_speedups(f, opt);
      s += "<h3>Median latency per implementation</h3>" + impl_latency_chart(f.rows, colours);
      s += "<h3>Speedup over " + html_escape(baseline) + " per shape</h3>" + impl_speedup_chart(speedups, colours);
      const auto geomeans = side_by_side_geomeans(speedups);
      if (!geomeans.empty()) {
        s += "<ul>";
        for (const auto& g : geomeans)
          s += fmt::format("<li>geomean speedup of {} over {}, {} {}: <b>{:.3f}x</b> ({} cells)</li>", html_escape(g.impl),
                           html_escape(g.baseline), html_escape(g.op), html_escape(g.mode), g.geomean, g.cells);
        s += "</ul>";
      }
    }
    s += "<h3>Fraction of roofline (head)</h3>" + roofline_chart(f.rows);
    s += "<h3>Final-claim stats, head (ms)</h3>" + stats_html(f.rows, speedup_cells, baseline);
    if (!f.base_rows.empty()) s += "<h3>Final-claim stats, base (ms)</h3>" + stats_html(f.base_rows);
  }
  return s + "</body></html>\n";
}

}  // namespace lina::harness
