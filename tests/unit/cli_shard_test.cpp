// `lina run --shard I/N`, `lina run --gpus N` and `lina merge` on the CPU backend (docs/multi-gpu.md):
// the shards cover every cell once, the merged file is the one-process run cell for cell, and bad
// values, mixed files and failed children are refused by name with the documented exit codes.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results/schema.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "lina/lina.h"
#include "tools_support.h"

namespace lina::harness {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// Eight tiny cells (2 ops x 2 shapes x 2 modes), one sample each: the test is of the mechanism.
const std::vector<std::string> kCells = {"--op", "chunk_gla,chunk_gdn", "--backend", "cpu", "--shapes", "B1_T64_H1_D64,B1_T128_H2_D64",
                                         "--modes", "fwd,fwdbwd", "--min-samples", "1", "--max-samples", "1", "--time-budget", "0",
                                         "--warmup", "0"};

ProcessResult lina(std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), LINA_TEST_LINA_EXE);
  ProcessOptions o;
  o.timeout = std::chrono::seconds(120);
  o.env = env;
  return run_process(args, o);
}

std::vector<std::string> run_args(const std::vector<std::string>& extra) {
  std::vector<std::string> a{"run"};
  a.insert(a.end(), kCells.begin(), kCells.end());
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

json run_to(const fs::path& file, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a = extra;
  a.insert(a.end(), {"--json", file.string()});
  const ProcessResult r = lina(run_args(a));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return read_results_file(file.string());
}

// What must not depend on how the cells were spread: which cell, its shape and its check.
json cell_identity(const json& row) { return {row["op"], row["mode"], row["shape"], row["shape_keys"], row["backend"], row["check"]}; }

void expect_same_cells(const json& merged, const json& one) {
  ASSERT_EQ(merged["results"].size(), one["results"].size());
  for (std::size_t i = 0; i < one["results"].size(); ++i)
    EXPECT_EQ(cell_identity(merged["results"][i]), cell_identity(one["results"][i])) << "cell " << i;
  EXPECT_EQ(merged["failures"], one["failures"]);
}

void expect_exit(const ProcessResult& r, int code, const std::string& needle) {
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, code) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find(needle), std::string::npos) << r.out << r.err;
}

TEST(CliShard, ShardsCoverEveryCellOnceInTheRunsOrder) {
  lina::testing::TempDir tmp;
  const json one = run_to(tmp.path / "one.json");
  ASSERT_EQ(one["results"].size(), 8u);
  std::set<std::size_t> seen;
  for (int i = 0; i < 3; ++i) {
    const json part = run_to(tmp.path / (std::string("s") + std::to_string(i) + ".json"), {"--shard", std::to_string(i) + "/3"});
    EXPECT_EQ(part["config"]["shard"], json({{"index", i}, {"count", 3}}));
    ASSERT_EQ(part["shards"].size(), 1u);
    EXPECT_EQ(part["shards"][0]["machine"], part["machine"]);
    for (const auto& row : part["results"]) {
      const std::size_t cell = row["cell"];
      EXPECT_EQ(cell % 3, static_cast<std::size_t>(i));
      EXPECT_TRUE(seen.insert(cell).second) << "cell " << cell << " ran twice";
      ASSERT_LT(cell, one["results"].size());
      EXPECT_EQ(cell_identity(row), cell_identity(one["results"][cell]));
    }
  }
  EXPECT_EQ(seen.size(), one["results"].size());
  // More shards than cells: the extra shards run nothing and say so in a valid file.
  EXPECT_TRUE(run_to(tmp.path / "empty.json", {"--shard", "63/64"})["results"].empty());
}

TEST(CliShard, GpusOnTheCpuBackendEqualsTheOneProcessRun) {
  lina::testing::TempDir tmp;
  const json one = run_to(tmp.path / "one.json");
  const json merged = run_to(tmp.path / "gpus.json", {"--gpus", "2"});
  expect_same_cells(merged, one);
  // One machine record per shard; the one-machine key stays for every reader.
  ASSERT_EQ(merged["shards"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(merged["shards"][i]["index"], i);
    EXPECT_EQ(merged["shards"][i]["machine"]["host"], one["machine"]["host"]);
    EXPECT_NE(merged["shards"][i]["command"].get<std::string>().find("--shard " + std::to_string(i) + "/2"), std::string::npos);
  }
  EXPECT_EQ(merged["machine"], merged["shards"][0]["machine"]);
  EXPECT_EQ(merged["config"]["shards"], 2);
  EXPECT_FALSE(merged["config"].contains("shard"));
  json a = one["config"], b = merged["config"];
  for (auto* c : {&a, &b}) c->erase("command");
  b.erase("shards");
  EXPECT_EQ(a, b);
  // The readers of summarize, verify and compare take the merged file.
  EXPECT_EQ(load_summary_file(tmp.path / "gpus.json").rows.size(), 8u);
  EXPECT_EQ(read_run_file(tmp.path / "gpus.json").rows.size(), 8u);
  const ProcessResult s = lina({"summarize", (tmp.path / "gpus.json").string()});
  EXPECT_EQ(s.exit_code, 0) << s.err;
}

TEST(CliShard, MergeOfShardFilesEqualsTheOneProcessRun) {
  lina::testing::TempDir tmp;
  const json one = run_to(tmp.path / "one.json");
  for (int i = 0; i < 2; ++i) run_to(tmp.path / (std::string("s") + std::to_string(i) + ".json"), {"--shard", std::to_string(i) + "/2"});
  // In any order, as a scheduler's tasks finish.
  const ProcessResult r = lina({"merge", (tmp.path / "s1.json").string(), (tmp.path / "s0.json").string(), "--json",
                                (tmp.path / "merged.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_same_cells(read_results_file((tmp.path / "merged.json").string()), one);
}

// bench/slurm/lina-sweep.sbatch as Slurm runs it: each array task with its SLURM_ARRAY_* variables.
TEST(CliShard, TheSlurmArrayTemplateWritesMergeableShards) {
  lina::testing::TempDir tmp;
  const json one = run_to(tmp.path / "one.json");
  const std::string script = std::string(LINA_TEST_SOURCE_DIR) + "/bench/slurm/lina-sweep.sbatch";
  const auto task = [&](int id, const std::string& min, const std::string& max) {
    std::vector<std::string> a{"bash", script};
    a.insert(a.end(), kCells.begin(), kCells.end());
    ProcessOptions o;
    o.timeout = std::chrono::seconds(120);
    o.env = {{"SLURM_ARRAY_TASK_ID", std::to_string(id)}, {"SLURM_ARRAY_TASK_COUNT", "2"}, {"SLURM_ARRAY_TASK_MIN", min},
             {"SLURM_ARRAY_TASK_MAX", max},          {"SLURM_ARRAY_JOB_ID", "7"},           {"LINA", LINA_TEST_LINA_EXE},
             {"LINA_SWEEP_DIR", (tmp.path / "sweep").string()}};
    return run_process(a, o);
  };
  for (int id = 0; id < 2; ++id) ASSERT_EQ(task(id, "0", "1").exit_code, 0);
  const ProcessResult m = lina({"merge", (tmp.path / "sweep" / "shard-0.json").string(), (tmp.path / "sweep" / "shard-1.json").string(),
                                "--json", (tmp.path / "merged.json").string()});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  expect_same_cells(read_results_file((tmp.path / "merged.json").string()), one);
  // An array that does not number its tasks 0..N-1 cannot be shards I/N.
  expect_exit(task(1, "1", "2"), 2, "expected --array=0-1");
}

TEST(CliShard, BadShardAndGpuCountsAreRefusedByName) {
  for (const char* bad : {"2/2", "-1/2", "0/0", "1", "a/b", "0/65", "01/2", "0/2x"})
    expect_exit(lina(run_args({"--shard", bad})), 2, "--shard: got '" + std::string(bad) + "', expected I/N");
  expect_exit(lina(run_args({"--gpus", "0"})), 2, "--gpus: got 0, expected an integer >= 1");
  expect_exit(lina(run_args({"--gpus", "65"})), 2, "expected an integer in [1, 64]");
  expect_exit(lina(run_args({"--gpus", "2", "--shard", "0/2"})), 2, "--shard excludes --gpus");
  // verify and compare check it by the same rule while parsing: no gate runs, no side is built.
  expect_exit(lina({"verify", "--op", "chunk_gla", "--gpus", "0"}), 2, "--gpus: got 0, expected an integer >= 1");
  expect_exit(lina({"compare", "--op", "chunk_gla", "--base", "HEAD", "--gpus", "65"}), 2, "expected an integer in [1, 64]");
  // Without a GPU, the shards run as processes on the CPU only when asked for by name.
  if (cuda_device_count() == 0)
    expect_exit(lina({"run", "--op", "chunk_gla", "--shapes", "B1_T64_H1_D64", "--gpus", "2"}), 2,
                "argument `--gpus`: got 2 with no CUDA device visible, expected a machine with that many GPUs, or --backend cpu");
  else
    expect_exit(lina({"run", "--op", "chunk_gla", "--backend", "cuda", "--gpus", "64"}), 2, "argument `--gpus`: got 64");
}

// `lina verify --gpus 2` on the CPU backend: its `lina run` child shards the cells into two processes, and the
// verify document's rows are the merged run's, each with its shard.
TEST(CliShard, VerifyShardsItsRunOverTheGpus) {
  lina::testing::TempDir tmp;
  const fs::path out = tmp.path / "verify.json";
  const ProcessResult r = lina({"verify", "--op", "chunk_gla", "--backend", "cpu", "--shapes", "B1_T64_H1_D64,B1_T128_H2_D64", "--modes",
                                "fwd", "--no-gate", "--rounds", "1", "--gpus", "2", "--json", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json j = json::parse(read_text_file(out));
  EXPECT_EQ(j["config"]["gpus"], 2);
  ASSERT_EQ(j["results"].size(), 2u) << j["results"].dump();
  std::set<int> shards;
  for (const auto& row : j["results"]) shards.insert(row.at("shard").get<int>());
  EXPECT_EQ(shards, (std::set<int>{0, 1}));
}

TEST(CliShard, MixedIncompleteOrRepeatedShardFilesAreRefusedByName) {
  lina::testing::TempDir tmp;
  json s0 = run_to(tmp.path / "s0.json", {"--shard", "0/2"});
  json s1 = run_to(tmp.path / "s1.json", {"--shard", "1/2"});
  run_to(tmp.path / "whole.json");
  const auto put = [&](const std::string& name, const json& doc) {
    write_text_file(tmp.path / name, doc.dump());
    return (tmp.path / name).string();
  };
  const std::string a = (tmp.path / "s0.json").string(), b = (tmp.path / "s1.json").string(), out = (tmp.path / "m.json").string();
  expect_exit(lina({"merge", a, "--json", out}), 2, "shard 1/2 is missing");
  expect_exit(lina({"merge", a, a, b, "--json", out}), 2, "shard 0/2 is also file");
  expect_exit(lina({"merge", a, (tmp.path / "whole.json").string(), "--json", out}), 2, "key `config.shard`: missing");
  json other_build = s1;
  other_build["tool"]["git_sha"] = std::string(40, 'a');
  expect_exit(lina({"merge", a, put("build.json", other_build), "--json", out}), 2, "key `tool.git_sha`");
  json other_run = s1;
  other_run["config"]["seed"] = 7;
  expect_exit(lina({"merge", a, put("seed.json", other_run), "--json", out}), 2, "key `config.seed`: seen 7, expected 42");
  json repeated = s1;
  repeated["results"][1]["cell"] = repeated["results"][0]["cell"];
  expect_exit(lina({"merge", a, put("cell.json", repeated), "--json", out}), 2, "results[1].cell");
  EXPECT_FALSE(fs::exists(out));
}

TEST(CliShard, AFailedChildFailsTheRunByNameAndWritesNoResults) {
  lina::testing::TempDir tmp;
  const fs::path out = tmp.path / "gpus.json";
  // Each child would sample for minutes; the child time limit of 1 s kills both.
  std::vector<std::string> a{"run", "--op", "chunk_gla", "--backend", "cpu", "--shapes", "B1_T64_H1_D64", "--modes", "fwd,bwd",
                             "--min-samples", "1000000000", "--max-samples", "1000000000", "--time-budget", "100000", "--gpus", "2",
                             "--json", out.string()};
  const ProcessResult r = lina(a, {{"LINA_CHILD_TIMEOUT_S", "1"}});
  expect_exit(r, 1, "shard 0/2 failed: timed out");
  EXPECT_NE(r.err.find("shard 1/2 failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no merged results"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace lina::harness
