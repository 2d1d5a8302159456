#include <gtest/gtest.h>

#include <cmath>

#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "harness/results/summary.h"
#include "lina/error.h"
#include "tools_support.h"

namespace lina::harness {
namespace {
using lina::testing::data;

std::string error_of(const std::string& file) {
  try {
    load_summary_file(data(file));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  ADD_FAILURE() << file << " was accepted";
  return {};
}

TEST(ToolsSummary, RunFileRowsAndChecks) {
  auto f = load_summary_file(data("run_ok.json"));
  EXPECT_EQ(f.kind, "run");
  ASSERT_EQ(f.rows.size(), 3u);
  EXPECT_EQ(f.rows[0].check, CheckState::pass);
  EXPECT_EQ(f.rows[1].check, CheckState::unverified);  // check: null
  EXPECT_EQ(f.rows[2].check, CheckState::fail);
  EXPECT_TRUE(f.rows[2].throttled);
  EXPECT_DOUBLE_EQ(f.rows[0].median_ms, 1.25);
  EXPECT_EQ(f.head_sha, std::string(40, 'a'));
  EXPECT_EQ(f.gpu, "NVIDIA H200");
  // Rows with the same shape name but different shape keys are different cells.
  EXPECT_NE(f.rows[0].key(), f.rows[1].key());
}

TEST(ToolsSummary, RankingGeomeanAndFlags) {
  auto f = load_summary_file(data("verify_ok.json"));
  ASSERT_EQ(f.comparisons.size(), 3u);
  EXPECT_EQ(f.base_sha, std::string(40, 'c'));
  EXPECT_EQ(f.base_rows.size(), 3u);
  auto r = ranked(f.comparisons);
  // |-20%| > |+12%| > |+0.67%|
  EXPECT_EQ(r[0].shape, "B1_T8192_H96_D128");
  EXPECT_EQ(r[1].shape, "B2_T16384_H16_D128");
  EXPECT_EQ(change_flag(r[0], 5), "IMPROVED");
  EXPECT_EQ(change_flag(r[1], 5), "REGRESSION");
  EXPECT_EQ(change_flag(r[1], 15), "");  // under the threshold
  EXPECT_EQ(change_flag(r[2], 0.5), "within noise");
  EXPECT_EQ(r[1].check, CheckState::unverified);  // head row's check is null
  const double expect = std::cbrt((2.0 / 1.6) * (1.0 / 1.12) * (1.5 / 1.51));
  ASSERT_TRUE(geomean_speedup(f.comparisons));
  EXPECT_NEAR(*geomean_speedup(f.comparisons), expect, 1e-12);
}

// Older verify files stored (speedup - 1) x 100 under change_pct: the change is taken from
// the medians, so such a file's wins are not flagged REGRESSION.
TEST(ToolsSummary, ChangeComesFromTheMedians) {
  nlohmann::json doc = nlohmann::json::parse(read_text_file(data("verify_ok.json")));
  for (auto& c : doc["comparisons"])
    if (c["speedup"].is_number()) c["change_pct"] = (c["speedup"].get<double>() - 1.0) * 100.0;
  lina::testing::TempDir d;
  const auto path = d.path / "old_verify.json";
  write_text_file(path, doc.dump());
  auto r = ranked(load_summary_file(path).comparisons);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].shape, "B1_T8192_H96_D128");
  EXPECT_NEAR(*r[0].change_pct, -20.0, 1e-9);
  EXPECT_EQ(change_flag(r[0], 5), "IMPROVED");
  EXPECT_EQ(change_flag(r[1], 5), "REGRESSION");
}

// Side-by-side files (bench/fla_side_by_side.py): rows carry `impl`, and a side that could not run carries `skipped` or
// `error` instead of timings (FLA refuses chunk_gdn's backward on the H200's Triton). Such a file is summarized, the
// row shown as not run with its reason; the FLA rows (the reference, never checked) are not UNVERIFIED claims.
TEST(ToolsSummary, SideBySideFileWithARefusedSide) {
  const nlohmann::json keys = {{"B", 1}, {"T", 8192}, {"H", 96}, {"HV", 96}, {"K", 128}, {"V", 128}};
  auto row = [&](const char* mode, const char* impl) {
    return nlohmann::json{{"op", "chunk_gdn"}, {"mode", mode}, {"shape", "B1_T8192_H96_D128"}, {"shape_keys", keys}, {"impl", impl}};
  };
  nlohmann::json lina_fwd = row("fwd", "lina-cuda"), fla_fwd = row("fwd", "fla-triton"), fla_bwd = row("fwdbwd", "fla-triton");
  lina_fwd.update({{"median_ms", 0.6}, {"samples", 40}, {"check", {{"pass", true}, {"err_ratio", 0.3}}}});
  fla_fwd.update({{"median_ms", 1.6}, {"samples", 40}});
  fla_bwd["skipped"] = "FLA refuses chunk_gated_delta_rule backward on Triton 3.6 / Hopper";
  const nlohmann::json doc = {{"schema", "lina.bench/1"}, {"kind", "run"}, {"tool", {{"name", "lina fla_side_by_side.py"}}},
                              {"results", {lina_fwd, fla_fwd, fla_bwd}}};
  const SummaryFile f = parse_summary_file(doc, "side.json");
  ASSERT_EQ(f.rows.size(), 3u);
  EXPECT_NE(f.rows[0].key(), f.rows[1].key());  // the two impls of one cell are two rows
  EXPECT_EQ(f.rows[1].impl, "fla-triton");
  EXPECT_EQ(f.rows[2].not_run, "FLA refuses chunk_gated_delta_rule backward on Triton 3.6 / Hopper");
  const auto w = claim_warnings(f);
  ASSERT_EQ(w.size(), 1u) << ::testing::PrintToString(w);
  EXPECT_EQ(w[0], "NOT RUN: chunk_gdn fwdbwd B1_T8192_H96_D128 (fla-triton): FLA refuses chunk_gated_delta_rule backward on Triton 3.6 / Hopper");
  const std::string text = render_summary_text({f}, SummaryOptions{});
  EXPECT_NE(text.find("chunk_gdn [fla-triton]"), std::string::npos) << text;
  EXPECT_NE(text.find("not run"), std::string::npos) << text;
  EXPECT_NE(text.find("reference"), std::string::npos) << text;  // the FLA row's check column
  EXPECT_EQ(text.find("UNVERIFIED"), std::string::npos) << text;
  // A row with neither timings nor a reason is still refused by name.
  nlohmann::json bad = doc;
  bad["results"][2].erase("skipped");
  try {
    parse_summary_file(bad, "side.json");
    ADD_FAILURE() << "accepted a row without timings or a reason";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("results[2].median_ms"), std::string::npos) << e.what();
  }
}

TEST(ToolsSummary, CompareFileNewAndRemovedRankLast) {
  auto f = load_summary_file(data("compare_ok.json"));
  EXPECT_EQ(f.head_sha, std::string(40, 'd'));
  EXPECT_EQ(f.base_sha, std::string(40, 'e'));
  auto r = ranked(f.comparisons);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(change_flag(r[2], 5) + "," + change_flag(r[3], 5), "removed,new");
  // new/removed rows do not enter the geomean
  EXPECT_NEAR(*geomean_speedup(f.comparisons), std::sqrt((2.0 / 1.6) * (1.0 / 1.12)), 1e-12);
}

TEST(ToolsSummary, TextBlockCarriesClaimFields) {
  std::vector<SummaryFile> files{load_summary_file(data("verify_ok.json")), load_summary_file(data("run_ok.json"))};
  const std::string t = render_summary_text(files, {5.0, 2});
  for (const char* needle : {"geomean speedup: ", "REGRESSION", "IMPROVED", "UNVERIFIED", "FAILED check", "THROTTLED",
                             "1980->1600", "lina verify --op chunk_kda", "cccccccccccccccccccccccccccccccccccccccc",
                             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "NVIDIA H200", "(threshold 5%, 2 of 3)", "p10", "p90"}) {
    EXPECT_NE(t.find(needle), std::string::npos) << needle << "\n" << t;
  }
  // --top 2 keeps the two largest changes only: the noise row is not in the ranked table.
  const auto cmp_end = t.find("geomean speedup");
  EXPECT_EQ(t.substr(0, cmp_end).find("noise"), std::string::npos);
  const std::string md = render_summary_markdown(files, {5.0, 0});
  EXPECT_NE(md.find("| op | mode | shape |"), std::string::npos);
  EXPECT_NE(md.find("noise"), std::string::npos);
}

TEST(ToolsSummary, RefusesWrongSchemaNamingFileAndKey) {
  const auto m = error_of("bad_schema.json");
  EXPECT_NE(m.find("bad_schema.json"), std::string::npos) << m;
  EXPECT_NE(m.find("`schema`"), std::string::npos) << m;
  EXPECT_NE(m.find("lina.bench/2"), std::string::npos) << m;
}

TEST(ToolsSummary, RefusesMalformedFiles) {
  auto m = error_of("bad_median.json");
  EXPECT_NE(m.find("bad_median.json: key `results[1].median_ms`: expected a number, found string"), std::string::npos) << m;
  m = error_of("bad_no_results.json");
  EXPECT_NE(m.find("`results`: missing"), std::string::npos) << m;
  m = error_of("bad_verdict.json");
  EXPECT_NE(m.find("`comparisons[0].verdict`"), std::string::npos) << m;
  m = error_of("malformed.json");
  EXPECT_NE(m.find("malformed.json: not valid JSON"), std::string::npos) << m;
  m = error_of("does_not_exist.json");
  EXPECT_NE(m.find("does_not_exist.json: cannot be read"), std::string::npos) << m;
}

TEST(ToolsSummary, RefusesNonPositiveMedians) {
  for (const double bad : {-1.0, 0.0}) {
    lina::testing::TempDir tmp;
    nlohmann::json d = nlohmann::json::parse(read_text_file(data("run_ok.json")));
    d["results"][1]["median_ms"] = bad;
    const auto path = tmp.path / "neg.json";
    write_text_file(path, d.dump());
    try {
      load_summary_file(path);
      ADD_FAILURE() << "median " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("`results[1].median_ms`"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("expected a positive time"), std::string::npos) << e.what();
    }
  }
}

TEST(ToolsSummary, CliExitCodes) {
  const auto lina = lina::testing::lina_binary();
  if (!std::filesystem::exists(lina)) GTEST_SKIP() << "lina binary not built at " << lina;
  auto ok = run_process({lina.string(), "summarize", data("verify_ok.json").string(), "--top", "1"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("geomean speedup"), std::string::npos);
  auto bad = run_process({lina.string(), "summarize", data("run_ok.json").string(), data("bad_schema.json").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bad_schema.json"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty()) << "nothing is printed when any input is refused";
  auto flag = run_process({lina.string(), "summarize", data("run_ok.json").string(), "--format", "pdf"});
  EXPECT_EQ(flag.exit_code, 2);
}

}  // namespace
}  // namespace lina::harness
