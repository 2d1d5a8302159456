// The built `lina` binary: exit codes and messages of bad flags (docs/architecture.md section 4: usage -> 2).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#ifndef LINA_TEST_LINA_EXE
#error "tests/CMakeLists.txt defines LINA_TEST_LINA_EXE"
#endif

namespace {

struct Result {
  int code = -1;
  std::string output;  // stdout + stderr
};

Result lina(const std::string& args) {
  Result r;
  const std::string cmd = std::string("'") + LINA_TEST_LINA_EXE + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

void expect_usage(const std::string& args, const std::string& needle) {
  const Result r = lina(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
}

TEST(HarnessCli, ListPrintsTheRegistry) {
  const Result r = lina("list");
  EXPECT_EQ(r.code, 0);
  for (const char* s : {"chunk_gla", "chunk_kda", "chunk_gdn", "logsigmoid(randn).clamp_min(-5)", "lina_chunk_kda_gate",
                        "B8_T2048_H32_D256"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s;
  const Result j = lina("list --json chunk_gdn");
  ASSERT_EQ(j.code, 0);
  const auto doc = nlohmann::json::parse(j.output);
  ASSERT_EQ(doc.size(), 1u);
  EXPECT_EQ(doc[0]["name"], "chunk_gdn");
}

TEST(HarnessCli, NoBaseIsAccepted) {
  // --no-base is what `lina verify` / `lina compare` pass; with --min-samples 0 the run still stops at
  // flag validation (exit 2 naming --min-samples), proving --no-base itself parsed.
  const Result r = lina("run --op chunk_gla --backend cpu --no-base --min-samples 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--min-samples"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("not expected"), std::string::npos) << r.output;
}

TEST(HarnessCli, BadFlagsExitTwoNamingTheFlag) {
  expect_usage("list chunk_foo", "chunk_gla, chunk_kda, chunk_gdn");
  expect_usage("run --op chunk_foo --backend cpu", "--op");
  expect_usage("run --op chunk_gla --backend cpu --modes sideways", "--modes");
  expect_usage("run --op chunk_gla --backend cpu --custom-shapes '[{\"B\":1,'", "--custom-shapes");
  expect_usage("run --op chunk_gla --backend cpu --custom-shapes '[{\"B\":1,\"T\":8,\"H\":1}]'", "without key 'D'");
  expect_usage("run --op chunk_kda --backend cpu --shapes B1_T64_H2_D512", "B1_T64_H2_D512");
  expect_usage("run --op chunk_gla --backend cpu --shapes B1_T64_H2_D64_HV4", "GVA");
  expect_usage("run --op chunk_gla --backend tpu", "--backend");
  expect_usage("run --op chunk_gla --backend cpu --shapes B1_T64", "--shapes");
  expect_usage("run --op chunk_gla --backend cpu --varlen zipf:T=100", "--varlen");
  expect_usage("run --op chunk_gla --backend cpu --min-samples 0", "--min-samples");
  expect_usage("run --backend cpu", "--op");  // --op is required
  expect_usage("run --op chunk_gla --backend cpu --base HEAD~1", "lina verify --base");
  expect_usage("run --op chunk_kda --backend cpu --safe-gate maybe", "--safe-gate: got 'maybe', expected on or off");
  expect_usage("verify --op chunk_kda --backend cpu --safe-gate 0", "--safe-gate: got '0', expected on or off");
  expect_usage("compare --base HEAD --op chunk_kda --safe-gate yes", "--safe-gate: got 'yes', expected on or off");
}

// Bounded counts say the bound in words, not CLI11's double range (0.000000 to 1.79e308 spelled out).
TEST(HarnessCli, BoundedCountsNameTheirBound) {
  for (const char* args : {"compare --base a --head b --rounds 0", "summarize x.json --top -1", "summarize x.json --top 1.5",
                           "profile --op chunk_gla --launch-count x"}) {
    const Result r = lina(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("expected an integer >= "), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find("179769313486231570"), std::string::npos) << args << "\n" << r.output;
  }
  expect_usage("run --op chunk_gla --backend cpu --max-noise 2", "a fraction in (0, 1)");
}

}  // namespace

namespace lina::harness {
namespace {

// Found by an adversarial pass: each of these crashed, wrapped silently or failed only after measuring.
TEST(HarnessCli, HostileValuesAreRefusedUpFront) {
  expect_usage("run --op chunk_gla --backend cpu --seed -1", "--seed");
  expect_usage("run --op chunk_gla --backend cpu --seed 18446744073709551616", "--seed");
  expect_usage("run --op chunk_gla --backend cpu --shapes B1_T4611686018427387904_H1_D64", "2^33");
  expect_usage("run --op chunk_gla --backend cpu --shapes B1_T64_H1_D64 --json /nonexistent-dir/x.json", "--json");
  expect_usage("summarize --threshold nan x.json", "--threshold");
  expect_usage("loop status --op ../../evil", "unknown op");
}

}  // namespace
}  // namespace lina::harness
