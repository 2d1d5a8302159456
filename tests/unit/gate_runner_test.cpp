// The gate runner against a real GoogleTest binary (tests/gate/fake/fake_gate_suite.cpp) whose
// outcomes are planted through the environment, and against recorded GoogleTest 1.14 JSON.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "harness/verify/gate.h"
#include "harness/util/subprocess.h"
#include "lina/build_info.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

GateRunOptions fake(const std::string& k = "", std::map<std::string, std::string> env = {}) {
  GateRunOptions o;
  o.executable = LINA_TEST_FAKE_GATE;
  o.k_expr = k;
  o.env = std::move(env);
  return o;
}

TEST(GateRunner, FullGateAllPassingIsGreen) {
  const GateResult r = run_gate(fake());
  EXPECT_EQ(r.status, GateStatus::green) << r.problem << r.output_tail;
  EXPECT_EQ(r.selected, 5);
  EXPECT_EQ(r.passed, 5);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.skipped, 0);
  EXPECT_EQ(r.exit_code, 0);
}

TEST(GateRunner, ReadsTheBuildTheSuiteReports) {
  EXPECT_EQ(run_gate(fake("", {{"FAKE_GATE_SHA", "0123abcd"}})).build_sha, std::optional<std::string>("0123abcd"));
  EXPECT_FALSE(run_gate(fake()).build_sha.has_value());
}

// The real suites report the build they were linked with: this test binary's own (same build tree).
TEST(GateRunner, RealSuitesReportTheirLinaBuild) {
  GateRunOptions o;
  o.executable = std::filesystem::path(LINA_TEST_GATE_DIR) / "lina_chunk_gla_gate";
  ProcessResult list = run_process({o.executable.string(), "--gtest_list_tests"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto names = parse_gtest_list(list.out);
  ASSERT_FALSE(names.empty());
  o.k_expr = names.front();  // one CPU-sized case is enough: the property is the suite's, not the test's
  const GateResult r = run_gate(o);
  ASSERT_EQ(r.selected, 1) << r.problem << r.output_tail;
  ASSERT_TRUE(r.build_sha.has_value()) << r.output_tail;
  EXPECT_EQ(*r.build_sha, LINA_BUILD_GIT_SHA);
}

TEST(GateRunner, FailureIsRedWithNameAndMessage) {
  const GateResult r = run_gate(fake("", {{"FAKE_GATE_FAIL", "gva"}}));
  EXPECT_EQ(r.status, GateStatus::red);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.passed, 4);
  bool found = false;
  for (const auto& t : r.tests)
    if (t.result == "failed") {
      found = true;
      EXPECT_EQ(t.name, "Fake/Bwd.B2_T256_H2_HV4_D64_gva");
      EXPECT_NE(t.message.find("planted failure"), std::string::npos) << t.message;
    }
  EXPECT_TRUE(found);
}

TEST(GateRunner, SkipsMakeThePartialOutcome) {
  const GateResult r = run_gate(fake("", {{"FAKE_GATE_SKIP", "Cuda"}}));
  EXPECT_EQ(r.status, GateStatus::partial);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(r.passed, 4);
}

TEST(GateRunner, KeywordFilterSelectsExactlyTheMatchesAndIsPartial) {
  const GateResult r = run_gate(fake("Fwd and not Cuda"));
  EXPECT_EQ(r.status, GateStatus::partial);
  EXPECT_EQ(r.selected, 2);
  for (const auto& t : r.tests) EXPECT_NE(t.name.find("Fake/Fwd."), std::string::npos) << t.name;
  // A failure outside the selection is not run, so it cannot turn the result red.
  const GateResult r2 = run_gate(fake("varlen", {{"FAKE_GATE_FAIL", "gva"}}));
  EXPECT_EQ(r2.status, GateStatus::partial);
  EXPECT_EQ(r2.selected, 1);
  EXPECT_EQ(r2.tests.at(0).name, "Fake/Fwd.B1_T2048_H4_D128_varlen");
}

TEST(GateRunner, FilterSelectingNothingIsEmptyNotRed) {
  const GateResult r = run_gate(fake("T99999", {{"FAKE_GATE_FAIL", "B"}}));
  EXPECT_EQ(r.status, GateStatus::empty);
  EXPECT_EQ(r.selected, 0);
  EXPECT_EQ(r.failed, 0);
}

TEST(GateRunner, CrashWithoutReportIsRed) {
  const GateResult r = run_gate(fake("", {{"FAKE_GATE_CRASH", "Bwd.B2_T1024"}}));
  EXPECT_EQ(r.status, GateStatus::red);
  EXPECT_FALSE(r.problem.empty());
  EXPECT_NE(r.exit_code, 0);
}

TEST(GateRunner, FaultInjectionEnvironmentReachesTheGate) {
  const GateResult r = run_gate(fake("", {{"LINA_FAULT_INJECT", "perturb:0.01"}}));
  EXPECT_EQ(r.status, GateStatus::red);
  EXPECT_EQ(r.failed, 3);  // every Fwd case of the fake suite
}

TEST(GateRunner, UnlistableExecutableIsAClearError) {
  GateRunOptions o;
  o.executable = "/nonexistent/lina_chunk_gla_gate";
  try {
    run_gate(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/lina_chunk_gla_gate"), std::string::npos);
  }
}

std::string slurp(const std::string& rel) {
  std::ifstream f(std::string(LINA_TEST_SOURCE_DIR) + "/" + rel);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Recorded on the GPU machine (Ubuntu 24.04, GoogleTest 1.14.0): one pass, one failure, one skip,
// one DISABLED_ test (listed by --gtest_list_tests, NOTRUN in the report).
TEST(GateJson, ParsesRecordedGoogleTest114Report) {
  const GateResult r = parse_gtest_json(slurp("tests/gate/fake/gtest_1_14_report.json"));
  EXPECT_TRUE(r.problem.empty()) << r.problem;
  EXPECT_EQ(r.selected, 3);
  EXPECT_EQ(r.passed, 1);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(classify_gate(r), GateStatus::red);
  bool saw_fail = false;
  for (const auto& t : r.tests)
    if (t.result == "failed") {
      saw_fail = true;
      EXPECT_EQ(t.name, "Fake/Bwd.B2_T256_H2_HV4_D64_gva");
      EXPECT_NE(t.message.find("planted failure"), std::string::npos);
    }
  EXPECT_TRUE(saw_fail);
  const auto names = parse_gtest_list(slurp("tests/gate/fake/gtest_1_14_list.txt"));
  ASSERT_EQ(names.size(), 3u);  // DISABLED_x is listed by GoogleTest but can never be selected
  for (const auto& n : names) EXPECT_EQ(n.find("DISABLED_"), std::string::npos) << n;
}

// Skip messages as later GoogleTest releases may write them (an array of {message}); NOTRUN entries
// (disabled tests) are not part of the selection.
TEST(GateJson, ParsesSkipMessagesAndNotRun) {
  const std::string report = R"JSON({
    "tests": 4, "failures": 1, "disabled": 1, "errors": 0, "name": "AllTests",
    "testsuites": [
      {"name": "ChunkGdnCuda/Fwd", "tests": 2, "failures": 0, "disabled": 1, "testsuite": [
        {"name": "B2_T256_H2_HV4_D64_gva", "status": "RUN", "result": "SKIPPED", "time": "0s",
         "classname": "ChunkGdnCuda/Fwd", "skipped": [{"message": "gate.cpp:12\nno CUDA device"}]},
        {"name": "DISABLED_B1_T64_H1_D64", "status": "NOTRUN", "result": "SUPPRESSED", "time": "0s"}]},
      {"name": "ChunkGdn/Bwd", "tests": 2, "failures": 1, "testsuite": [
        {"name": "B2_T256_H2_HV4_D64_gva", "status": "RUN", "result": "COMPLETED", "time": "1.5s",
         "failures": [{"failure": "dk: err_ratio=9.1e-03 (tol 0.008)", "type": ""}]},
        {"name": "B1_T1_H1_D64", "status": "RUN", "result": "COMPLETED", "time": "0.01s"}]}]})JSON";
  GateResult r = parse_gtest_json(report);
  EXPECT_TRUE(r.problem.empty());
  EXPECT_EQ(r.selected, 3);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.passed, 1);
  EXPECT_EQ(r.tests[0].name, "ChunkGdnCuda/Fwd.B2_T256_H2_HV4_D64_gva");
  EXPECT_NE(r.tests[0].message.find("no CUDA device"), std::string::npos);
  EXPECT_NE(r.tests[1].message.find("dk: err_ratio"), std::string::npos);
  EXPECT_DOUBLE_EQ(r.tests[1].time_s, 1.5);
  EXPECT_EQ(classify_gate(r), GateStatus::red);
}

TEST(GateJson, MalformedReportIsAProblemNotAPass) {
  EXPECT_FALSE(parse_gtest_json("{not json").problem.empty());
  EXPECT_FALSE(parse_gtest_json("{\"tests\": 0}").problem.empty());
  EXPECT_EQ(classify_gate(parse_gtest_json("{\"tests\": 0}")), GateStatus::red);
}

TEST(GateLocate, FindsTheSuiteNextToTheBuildAndNamesPlacesWhenMissing) {
  const std::filesystem::path fake_cli = std::filesystem::path(LINA_TEST_LINA_EXE);
  // The build layout: <build>/cli/lina and <build>/tests/lina_<op>_gate.
  EXPECT_EQ(find_gate_executable("fake", fake_cli).filename(), "lina_fake_gate");
  try {
    find_gate_executable("chunk_nope", fake_cli);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lina_chunk_nope_gate"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("--gate-bin"), std::string::npos);
  }
}

}  // namespace
}  // namespace lina::harness
