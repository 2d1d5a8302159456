// `lina summarize` on side-by-side files (python -m lina.bench): each implementation's speedup over the baseline
// implementation per cell, its p10 / p90 band, the geomean per implementation, op and mode, and the HTML page's
// charts naming the implementation of every bar.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness/results/html_report.h"
#include "harness/results/summary.h"

namespace lina::harness {
namespace {

using nlohmann::json;

json row(const std::string& impl, const std::string& shape, double median, double p10, double p90) {
  return {{"op", "chunk_kda"}, {"mode", "fwd"}, {"shape", shape}, {"shape_keys", {{"B", 1}, {"T", 8192}}},
          {"impl", impl}, {"median_ms", median}, {"p10_ms", p10}, {"p90_ms", p90}, {"samples", 20}, {"frac_hbm", 0.5},
          {"check", {{"pass", true}, {"err_ratio", 0.001}}}};
}

// lina at 0.5 and 0.25 ms where FLA takes 1.0 ms (speedups 2 and 4, geomean sqrt(8)); FLA's GDN-style refused row.
SummaryFile two_impl_file() {
  json skipped = row("fla-triton", "B4_T2048_H16_D128", 1, 1, 1);
  skipped.erase("median_ms");
  skipped["skipped"] = "FLA refuses this cell";
  const json doc = {{"schema", "lina.bench/1"}, {"kind", "run"}, {"tool", {{"name", "lina python -m lina.bench"}}},
                    {"results", {row("lina-cuda", "B1_T8192_H96_D128", 0.5, 0.45, 0.55),
                                 row("fla-triton", "B1_T8192_H96_D128", 1.0, 0.9, 1.1),
                                 row("lina-cuda", "B2_T16384_H16_D128", 0.25, 0.2, 0.3),
                                 row("fla-triton", "B2_T16384_H16_D128", 1.0, 0.95, 1.05),
                                 row("lina-cuda", "B4_T2048_H16_D128", 0.1, 0.1, 0.1), skipped}}};
  return parse_summary_file(doc, "side.json");
}

TEST(SummarySideBySide, SpeedupPerCellWithItsBandAndGeomean) {
  const SummaryFile f = two_impl_file();
  EXPECT_EQ(side_by_side_baseline(f, SummaryOptions{}), "fla-triton");
  const auto sp = side_by_side_speedups(f, SummaryOptions{});
  ASSERT_EQ(sp.size(), 2u);  // the third cell has no timed baseline
  EXPECT_EQ(sp[0].impl, "lina-cuda");
  EXPECT_EQ(sp[0].shape, "B1_T8192_H96_D128");
  EXPECT_DOUBLE_EQ(sp[0].speedup, 2.0);
  ASSERT_TRUE(sp[0].low && sp[0].high);
  EXPECT_DOUBLE_EQ(*sp[0].low, 0.9 / 0.55);   // baseline p10 / lina p90
  EXPECT_DOUBLE_EQ(*sp[0].high, 1.1 / 0.45);  // baseline p90 / lina p10
  EXPECT_DOUBLE_EQ(sp[1].speedup, 4.0);
  const auto g = side_by_side_geomeans(sp);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].cells, 2);
  EXPECT_NEAR(g[0].geomean, std::sqrt(8.0), 1e-12);
}

TEST(SummarySideBySide, TextSummaryHasTheSpeedupColumnAndTheGeomeanLine) {
  const std::string t = render_summary_text({two_impl_file()}, SummaryOptions{});
  EXPECT_NE(t.find("speedup vs fla-triton"), std::string::npos) << t;
  EXPECT_NE(t.find("2.000x"), std::string::npos) << t;
  EXPECT_NE(t.find("4.000x"), std::string::npos) << t;
  EXPECT_NE(t.find("baseline"), std::string::npos) << t;  // FLA's own rows
  EXPECT_NE(t.find("geomean speedup of lina-cuda over fla-triton, chunk_kda fwd: 2.828x (2 cells)"), std::string::npos) << t;
  const std::string md = render_summary_markdown({two_impl_file()}, SummaryOptions{});
  EXPECT_NE(md.find("| speedup vs fla-triton |"), std::string::npos) << md;
  EXPECT_NE(md.find("- geomean speedup of lina-cuda over fla-triton, chunk_kda fwd: 2.828x"), std::string::npos) << md;
}

TEST(SummarySideBySide, HtmlNamesEachBarsImplementationAndChartsTheSpeedup) {
  const std::string h = render_summary_html({two_impl_file()}, SummaryOptions{});
  EXPECT_NE(h.find("aria-label=\"median latency per implementation\""), std::string::npos);
  // the legend and each bar's label name the implementation
  EXPECT_NE(h.find(">lina-cuda</text>"), std::string::npos);
  EXPECT_NE(h.find(">fla-triton</text>"), std::string::npos);
  EXPECT_NE(h.find(">lina-cuda 0.5000</text>"), std::string::npos);
  EXPECT_NE(h.find(">fla-triton 1.0000</text>"), std::string::npos);
  // the speedup chart, with the band of the first cell
  EXPECT_NE(h.find("Speedup over fla-triton per shape"), std::string::npos);
  EXPECT_NE(h.find("aria-label=\"speedup per cell\""), std::string::npos);
  EXPECT_NE(h.find(">lina-cuda 2.00x [1.64, 2.44]</text>"), std::string::npos) << h;
  EXPECT_NE(h.find("<b>2.828x</b>"), std::string::npos);
  EXPECT_NE(h.find("<th>speedup vs fla-triton</th>"), std::string::npos);
  // the roofline chart's rows name the implementation too
  EXPECT_NE(h.find(">chunk_kda [lina-cuda] fwd B1_T8192_H96_D128</text>"), std::string::npos);
}

TEST(SummarySideBySide, BaselineIsTheOptionsImplementationElseTheFirstReference) {
  const json doc = {{"schema", "lina.bench/1"}, {"kind", "run"},
                    {"results", {row("lina-cuda", "B1_T8192_H96_D128", 0.5, 0.5, 0.5),
                                 row("flashkda-cuda", "B1_T8192_H96_D128", 0.8, 0.8, 0.8),
                                 row("fla-triton", "B1_T8192_H96_D128", 1.0, 1.0, 1.0)}}};
  const SummaryFile f = parse_summary_file(doc, "side.json");
  EXPECT_EQ(side_by_side_baseline(f, SummaryOptions{}), "fla-triton");
  SummaryOptions vs_kda;
  vs_kda.baseline_impl = "flashkda-cuda";
  const auto sp = side_by_side_speedups(f, vs_kda);
  ASSERT_EQ(sp.size(), 2u);
  EXPECT_DOUBLE_EQ(sp[0].speedup, 0.8 / 0.5);
  EXPECT_EQ(sp[1].impl, "fla-triton");
  EXPECT_DOUBLE_EQ(sp[1].speedup, 0.8);
  SummaryOptions absent;
  absent.baseline_impl = "flashinfer";
  EXPECT_EQ(side_by_side_baseline(f, absent), "flashkda-cuda");  // the first timed reference row's
}

TEST(SummarySideBySide, RunFilesWithoutImplementationsHaveNoSpeedupColumn) {
  json plain = row("", "B1_T8192_H96_D128", 0.5, 0.5, 0.5);
  plain.erase("impl");
  const SummaryFile f = parse_summary_file({{"schema", "lina.bench/1"}, {"kind", "run"}, {"results", {plain}}}, "run.json");
  EXPECT_EQ(side_by_side_baseline(f, SummaryOptions{}), "");
  EXPECT_EQ(render_summary_text({f}, SummaryOptions{}).find("speedup vs"), std::string::npos);
  const std::string h = render_summary_html({f}, SummaryOptions{});
  EXPECT_EQ(h.find("speedup per cell"), std::string::npos);
  EXPECT_EQ(h.find("speedup vs"), std::string::npos);
}

}  // namespace
}  // namespace lina::harness
