#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include <algorithm>

#include "harness/results/report.h"
#include "harness/results/results.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

ResultRow sample_row(const std::string& op, const std::string& mode, const std::string& shape, double base_ms) {
  ResultRow r;
  r.op = op;
  r.mode = mode;
  r.shape = shape;
  r.keys = ShapeKeys{1, 256, 2, 2, 64, 64, std::nullopt, 1};
  r.backend = "cpu";
  r.timer = "cpu-steady-clock";
  r.kernels = {"stage_a", "stage_b"};
  r.times_ms = {base_ms, base_ms * 1.1, base_ms * 0.9, base_ms * 1.05};
  r.bytes = 1e6;
  r.flops = 2e9;
  r.bytes_model = "minimal-fused-io/1";
  r.flops_model = "anchors-chunk64/1";
  r.check.reference = "fp64-host";
  r.check.pass = true;
  r.check.tolerance = 0.005;
  r.check.err_ratio = 0.001;
  r.check.max_abs = 0.01;
  r.check.tensors = {{"o", 0.001, 0.01, 0.005, false, true}};
  derive(r, 100.0, 10.0, 512.0);
  return r;
}

nlohmann::json sample_doc() {
  const nlohmann::json tool{{"name", "lina"}, {"version", "0.1.0"}, {"git_sha", std::string(40, 'a')}, {"git_dirty", false}};
  const nlohmann::json machine{{"gpu", nullptr}, {"sm_count", nullptr}, {"compute_capability", nullptr}, {"driver", nullptr},
                               {"cuda_runtime", nullptr}, {"compiler", "gcc"}, {"host", "h"}, {"cpu", "c"},
                               {"ceilings", {{"hbm_gbps", 100.0}, {"bf16_tflops", 10.0}, {"source", "nominal-cpu"}}}};
  const nlohmann::json config{{"seed", 42}, {"backend", "cpu"}, {"l2_flush", true}, {"graphs", false}, {"min_samples", 10},
                              {"max_noise", 0.005}, {"time_budget_s", 2.0}, {"command", "lina run --op chunk_gla"}};
  return make_run_document(tool, machine, config, {sample_row("chunk_gla", "fwd", "B1_T256_H2_D64", 2.0)});
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lina_harness_test_" + name + ".json")).string();
}

TEST(HarnessResults, DerivedRates) {
  const ResultRow r = sample_row("chunk_gla", "fwd", "s", 2.0);
  EXPECT_NEAR(r.stats.median, 2.0 * (1.0 + 1.05) / 2, 1e-12);
  EXPECT_NEAR(r.gbps, 1e6 / (r.stats.median * 1e-3) / 1e9, 1e-9);
  EXPECT_NEAR(r.tflops, 2e9 / (r.stats.median * 1e-3) / 1e12, 1e-9);
  EXPECT_NEAR(r.frac_hbm, r.gbps / 100.0, 1e-12);
  EXPECT_NEAR(r.frac_tc, r.tflops / 10.0, 1e-12);
  EXPECT_NEAR(r.ns_per_token_head, r.stats.median * 1e6 / 512.0, 1e-9);
}

TEST(HarnessResults, RoundTripThroughAFile) {
  const auto doc = sample_doc();
  const std::string path = temp_path("roundtrip");
  write_json_file(path, doc);
  const auto back = read_results_file(path);
  EXPECT_EQ(back["schema"], "lina.bench/1");
  EXPECT_EQ(back["kind"], "run");
  ASSERT_EQ(back["results"].size(), 1u);
  for (const auto& k : required_row_keys()) EXPECT_TRUE(back["results"][0].contains(k)) << k;
  const ResultRow r = row_from_json(back["results"][0]);
  const ResultRow orig = sample_row("chunk_gla", "fwd", "B1_T256_H2_D64", 2.0);
  EXPECT_EQ(r.op, orig.op);
  EXPECT_EQ(r.times_ms, orig.times_ms);
  EXPECT_DOUBLE_EQ(r.stats.p90, orig.stats.p90);
  EXPECT_EQ(r.kernels, orig.kernels);
  EXPECT_EQ(r.check.pass, std::optional<bool>(true));
  EXPECT_EQ(r.check.tensors.at(0).name, "o");
  EXPECT_FALSE(r.peak_mem_bytes.has_value());
  EXPECT_FALSE(r.keys.varlen.has_value());
  EXPECT_EQ(to_json(r), to_json(orig));
  std::filesystem::remove(path);
}

std::string validation_error(const nlohmann::json& doc) {
  try {
    validate_document(doc, "f.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HarnessResults, ReaderNamesFileAndKey) {
  auto doc = sample_doc();
  EXPECT_EQ(validation_error(doc), "(no error)");
  auto bad_schema = doc;
  bad_schema["schema"] = "lina.bench/0";
  EXPECT_NE(validation_error(bad_schema).find("file 'f.json': key `schema`"), std::string::npos);
  auto no_median = doc;
  no_median["results"][0].erase("median_ms");
  EXPECT_NE(validation_error(no_median).find("key `results[0].median_ms`: missing"), std::string::npos);
  auto bad_kind = doc;
  bad_kind["kind"] = "walk";
  EXPECT_NE(validation_error(bad_kind).find("key `kind`"), std::string::npos);
  auto no_ceiling = doc;
  no_ceiling["machine"]["ceilings"].erase("hbm_gbps");
  EXPECT_NE(validation_error(no_ceiling).find("machine.ceilings.hbm_gbps"), std::string::npos);
  auto bad_pass = doc;
  bad_pass["results"][0]["check"]["pass"] = "yes";
  EXPECT_NE(validation_error(bad_pass).find("results[0].check.pass"), std::string::npos);
  auto string_time = doc;
  string_time["results"][0]["times_ms"][1] = "fast";
  EXPECT_NE(validation_error(string_time).find("results[0].times_ms"), std::string::npos);

  const std::string path = temp_path("garbage");
  std::ofstream(path) << "{not json";
  try {
    read_results_file(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  std::filesystem::remove(path);
  EXPECT_THROW(read_results_file(temp_path("does_not_exist")), Error);
}

TEST(HarnessReport, TableIsAlignedAndGrouped) {
  std::vector<ResultRow> rows{sample_row("chunk_kda", "bwd", "B1_T256_H2_D64", 12.5),
                              sample_row("chunk_gla", "fwd", "B2_T512_H4_D64", 0.25),
                              sample_row("chunk_gla", "bwd", "B1_T256_H2_D64", 3.0),
                              sample_row("chunk_gla", "fwd", "B1_T256_H2_D64", 1.0)};
  rows[0].check.pass = false;
  rows[1].check = CheckResult{"fp32-gpu", std::nullopt, std::nullopt, std::nullopt, std::nullopt, "not built", {}};
  const std::string t = format_table(rows);
  std::vector<std::string> lines;
  for (std::size_t a = 0, b; a < t.size(); a = b + 1) {
    b = t.find('\n', a);
    lines.push_back(t.substr(a, b - a));
  }
  ASSERT_GE(lines.size(), 7u);  // header, rule, 2 fwd, blank, 2 bwd
  const std::string& header = lines[0];
  const std::size_t median_end = header.find("median ms") + std::string("median ms").size();
  const std::size_t check_col = header.find("check");
  std::vector<std::string> data;
  for (std::size_t i = 2; i < lines.size(); ++i)
    if (!lines[i].empty()) data.push_back(lines[i]);
  ASSERT_EQ(data.size(), 4u);
  const std::vector<const ResultRow*> order{&rows[3], &rows[1], &rows[2], &rows[0]};  // fwd by shape, then bwd
  for (std::size_t i = 0; i < data.size(); ++i) {
    const auto& r = *order[i];
    EXPECT_EQ(data[i].rfind(r.op, 0), 0u) << data[i];
    EXPECT_NE(data[i].find(r.shape), std::string::npos);
    const std::string med = fmt::format("{:.4f}", r.stats.median);
    EXPECT_EQ(data[i].substr(median_end - med.size(), med.size()), med) << data[i];  // right-aligned under header
    EXPECT_GT(data[i].size(), check_col);
  }
  EXPECT_EQ(data[0].substr(check_col, 4), "pass");
  EXPECT_EQ(data[1].substr(check_col, 3), "n/a");
  EXPECT_EQ(data[3].substr(check_col, 4), "FAIL");
  // A blank line separates the fwd group from the bwd group.
  EXPECT_TRUE(std::find(lines.begin(), lines.end(), std::string()) != lines.end());
  EXPECT_EQ(lines[1].find_first_not_of("- "), std::string::npos);
}

TEST(HarnessReport, AbsoluteFloorPassesAreLabelled) {
  std::vector<ResultRow> rows{sample_row("chunk_gla", "fwdbwd", "B1_T1_H1_D64", 0.02)};
  rows[0].check = CheckResult{"fp64-host", true, 0.005, 2.3, 1.2e-7, "", {}};
  EXPECT_NE(format_table(rows).find("pass 2.3e+00 (abs<=1e-6)"), std::string::npos) << format_table(rows);
  rows[0].check.err_ratio = 1e-3;
  EXPECT_EQ(format_table(rows).find("abs<="), std::string::npos);
}

TEST(HarnessReport, ProgressLine) {
  EXPECT_EQ(progress_line(3, 12, "chunk_gla", "fwd", "B1_T256_H2_D64", "timing"), "[3/12] chunk_gla fwd B1_T256_H2_D64 timing");
}

}  // namespace
}  // namespace lina::harness
