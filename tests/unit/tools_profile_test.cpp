#include <gtest/gtest.h>

#include "harness/tools/profile.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "lina/error.h"
#include "tools_support.h"

namespace lina::harness {
namespace {
using lina::testing::data;

TEST(ToolsProfile, CsvQuotingAndEmbeddedNewlines) {
  auto rows = parse_csv("\"a\",\"b, c\",\"say \"\"hi\"\"\"\r\n\"multi\nline\",,x\n");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"a", "b, c", "say \"hi\""}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"multi\nline", "", "x"}));
}

TEST(ToolsProfile, ParsesNcuRawPagePerKernel) {
  const auto k = parse_ncu_raw_csv(read_text_file(data("ncu_raw.csv")), "ncu_raw.csv");
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].name, "chunk_gla_fwd_intra(lina::GlaParams<128>)");
  EXPECT_EQ(k[0].launches, 3);
  EXPECT_DOUBLE_EQ(k[0].duration_us, 12.48);  // median of 12,480 / 12,360 / 12,900 ns
  EXPECT_NEAR(*k[0].dram_pct, (71.25 + 72.75 + 70.50) / 3, 1e-9);
  EXPECT_NEAR(*k[0].occupancy_pct, (22.5 + 23.5 + 22.0) / 3, 1e-9);
  EXPECT_DOUBLE_EQ(*k[0].registers, 168);
  // per-issue ratios win over PC samples; reasons ranked by size
  ASSERT_EQ(k[0].stalls.size(), 4u);
  EXPECT_EQ(k[0].stalls[0].first, "long_scoreboard");
  EXPECT_NEAR(k[0].stalls[0].second, 3.0, 1e-9);
  EXPECT_EQ(k[0].stalls[1].first, "wait");
  EXPECT_EQ(k[1].name, "chunk_gla_fwd_inter, \"state\" pass");
  EXPECT_EQ(k[1].launches, 2);
  EXPECT_DOUBLE_EQ(k[1].duration_us, 1.5005);
  EXPECT_DOUBLE_EQ(*k[1].dram_pct, 35.0);  // the n/a launch is left out of the mean
  EXPECT_EQ(k[1].stalls[0].first, "barrier");
}

// Columns cut from a real `ncu --import X --csv --page raw` (ncu 2025.3.1, H200, --set full) of a
// probe that launched two kernels three times inside lina:timed:chunk_gla:fwd:B1_T64_H2_D64 and
// one kernel outside it: the NVTX filter kept exactly the six timed launches.
TEST(ToolsProfile, ParsesRealNcu2025Export) {
  const auto k = parse_ncu_raw_csv(read_text_file(data("ncu_raw_h200.csv")), "ncu_raw_h200.csv");
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].name, "intra(float *, int)");
  EXPECT_EQ(k[0].launches, 3);
  EXPECT_EQ(k[1].name, "inter(const float *, float *, int)");
  EXPECT_EQ(k[1].launches, 3);
  ASSERT_TRUE(k[0].dram_pct && k[0].occupancy_pct && k[0].registers);
  EXPECT_GT(*k[0].dram_pct, 10.0);
  EXPECT_LT(*k[0].dram_pct, 100.0);
  EXPECT_DOUBLE_EQ(*k[0].registers, 16);
  EXPECT_GT(k[0].duration_us, 10.0);  // `us` units: ~49 us, not 0.049
  EXPECT_LT(k[0].duration_us, 1000.0);
  ASSERT_FALSE(k[0].stalls.empty());
  EXPECT_EQ(k[0].stalls[0].first, "long_scoreboard");  // a streaming kernel waits on memory
  for (const auto& [reason, v] : k[0].stalls) EXPECT_NE(reason, "selected");
}

TEST(ToolsProfile, UnitsAndSideBySide) {
  const auto head = parse_ncu_raw_csv(read_text_file(data("ncu_raw.csv")), "head");
  const auto base = parse_ncu_raw_csv(read_text_file(data("ncu_raw_base.csv")), "base");
  EXPECT_DOUBLE_EQ(base[0].duration_us, 20.0);  // usecond column
  EXPECT_TRUE(base[0].stalls.empty());
  const std::string t = render_profile_side_by_side(base, head, true);
  EXPECT_NE(t.find("duration change: -37.6%"), std::string::npos) << t;  // 12.48 vs 20 us
  EXPECT_NE(t.find("kernel chunk_gla_fwd_old_output"), std::string::npos);
  EXPECT_NE(t.find("absent"), std::string::npos);  // kernels present on one side only
  EXPECT_NE(t.find("top stalls head: long_scoreboard 3.00, wait 1.00, barrier 0.50"), std::string::npos) << t;
}

TEST(ToolsProfile, RefusesBadCsv) {
  EXPECT_THROW(parse_ncu_raw_csv("no table here\n", "x.csv"), Error);
  EXPECT_THROW(parse_ncu_raw_csv("\"ID\",\"Kernel Name\"\n\"0\",\"k\"\n", "x.csv"), Error);  // no duration column
  EXPECT_THROW(parse_ncu_raw_csv("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"k\"\n", "x.csv"), Error);  // short row
  try {
    parse_ncu_raw_csv("\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"k\",\"fast\"\n", "x.csv");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.csv: row 2: gpu__time_duration.sum `fast`"), std::string::npos) << e.what();
  }
}

TEST(ToolsProfile, NcuCommandFiltersTimedRangesOnly) {
  ProfileSpec s;
  s.op = "chunk_kda";
  s.modes = {"fwd", "bwd"};
  s.shapes = {"B1_T8192_H96_D128"};
  EXPECT_EQ(nvtx_includes(s), (std::vector<std::string>{"lina:timed:chunk_kda:fwd:B1_T8192_H96_D128/",
                                                        "lina:timed:chunk_kda:bwd:B1_T8192_H96_D128/"}));
  s.shapes.clear();
  EXPECT_EQ(nvtx_includes(s), (std::vector<std::string>{"regex:^lina:timed:chunk_kda:.*/"}));
  const auto a = ncu_profile_argv("ncu", s, "profile/x/head", "/b/lina", "profile/x/head.json");
  const std::string joined = [&] { std::string j; for (const auto& w : a) j += w + " "; return j; }();
  for (const char* f : {"--nvtx --nvtx-include regex:^lina:timed:chunk_kda:.*/ ", "--clock-control none", "--set full",
                        "-o profile/x/head ", "/b/lina run --op chunk_kda", "--json profile/x/head.json"}) {
    EXPECT_NE(joined.find(f), std::string::npos) << f << " in " << joined;
  }
  EXPECT_EQ(joined.find("--safe-gate"), std::string::npos) << joined;
  s.safe_gate = false;  // chunk_kda as FLA's KDA layer calls it
  const auto off = ncu_profile_argv("ncu", s, "profile/x/head", "/b/lina", "profile/x/head.json");
  const std::string joined_off = [&] { std::string j; for (const auto& w : off) j += w + " "; return j; }();
  EXPECT_NE(joined_off.find("/b/lina run --op chunk_kda --no-base --modes fwd bwd --safe-gate off --json"), std::string::npos)
      << joined_off;
  EXPECT_EQ(ncu_export_argv("ncu", "r.ncu-rep"), (std::vector<std::string>{"ncu", "--import", "r.ncu-rep", "--csv", "--page", "raw"}));
}

TEST(ToolsProfile, CliSaysWhatIsMissing) {
  const auto lina = lina::testing::lina_binary();
  if (!std::filesystem::exists(lina)) GTEST_SKIP() << "lina binary not built";
  auto r = run_process({"/usr/bin/env", "PATH=/nonexistent", lina.string(), "profile", "--op", "chunk_gla"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not found on PATH"), std::string::npos) << r.err;
  auto bad = run_process({lina.string(), "profile", "--op", "chunk_zzz"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown op"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace lina::harness
