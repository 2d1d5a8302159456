// A stand-in gate suite for testing the gate runner without the ops: same naming scheme as the
// real suites; outcomes are chosen by environment variables holding name substrings:
//   FAKE_GATE_FAIL=<s>  tests whose full name contains s fail (with a message naming them)
//   FAKE_GATE_SKIP=<s>  ... are skipped
//   FAKE_GATE_CRASH=<s> ... abort the process (no JSON report is written)
// LINA_FAULT_INJECT set (any value): every Fwd test fails, like a perturbed kernel would.
// FAKE_GATE_SHA=<sha>: the lina build the suite reports (the real suites report their own build,
// tests/gate/build_record.cpp); unset: it reports none, like a suite built before they did.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

bool env_matches(const char* var, const std::string& name) {
  const char* v = std::getenv(var);
  return v && *v && name.find(v) != std::string::npos;
}

class FakeCase : public ::testing::Test {
 public:
  explicit FakeCase(std::string name) : name_(std::move(name)) {}
  void TestBody() override {
    if (env_matches("FAKE_GATE_CRASH", name_)) std::abort();
    if (env_matches("FAKE_GATE_SKIP", name_)) GTEST_SKIP() << "skipped on purpose: " << name_;
    if (env_matches("FAKE_GATE_FAIL", name_)) FAIL() << "planted failure in " << name_;
    const char* fault = std::getenv("LINA_FAULT_INJECT");
    if (fault && *fault && name_.find("/Fwd.") != std::string::npos) FAIL() << "o: err_ratio 1.0e-02 >= 4.0e-03";
    SUCCEED();
  }

 private:
  std::string name_;
};

class ReportBuild : public ::testing::Environment {
 public:
  void SetUp() override {
    if (const char* sha = std::getenv("FAKE_GATE_SHA")) ::testing::Test::RecordProperty("lina_git_sha", sha);
  }
};

void add(const char* suite, const char* test) {
  const std::string full = std::string(suite) + "." + test;
  ::testing::RegisterTest(suite, test, nullptr, nullptr, __FILE__, __LINE__, [full]() -> ::testing::Test* { return new FakeCase(full); });
}

}  // namespace

int main(int argc, char** argv) {
  add("Fake/Fwd", "B2_T1024_H4_D128");
  add("Fake/Fwd", "B1_T2048_H4_D128_varlen");
  add("Fake/Bwd", "B2_T1024_H4_D128");
  add("Fake/Bwd", "B2_T256_H2_HV4_D64_gva");
  add("FakeCuda/Fwd", "B2_T1024_H4_D128");
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new ReportBuild);
  return RUN_ALL_TESTS();
}
