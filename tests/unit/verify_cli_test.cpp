// `lina verify` / `lina check` through the real binary: flags and documented exit codes.
#include <gtest/gtest.h>

#include "harness/util/subprocess.h"
#include "lina/version.h"

namespace lina::harness {
namespace {

ProcessResult lina(std::vector<std::string> args) {
  args.insert(args.begin(), LINA_TEST_LINA_EXE);
  return run_process(args);
}

TEST(VerifyCli, FilterSelectingNothingExitsFour) {
  const auto r = lina({"verify", "--op", "chunk_gla", "--gate-bin", LINA_TEST_FAKE_GATE, "--gate-k", "T99999 and Fwd"});
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("selects no test"), std::string::npos) << r.out;
}

TEST(VerifyCli, RedGateExitsOne) {
  ProcessOptions o;
  o.env = {{"FAKE_GATE_FAIL", "Bwd"}};
  const auto r = run_process({LINA_TEST_LINA_EXE, "verify", "--op", "chunk_gla", "--gate-bin", LINA_TEST_FAKE_GATE}, o);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("gate RED"), std::string::npos) << r.out;
}

TEST(VerifyCli, UnknownBaseRefExitsThree) {
  const auto r = lina({"verify", "--op", "chunk_gla", "--no-gate", "--base", "no-such-ref-for-lina-tests", "--repo", LINA_TEST_SOURCE_DIR});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("unknown git ref 'no-such-ref-for-lina-tests'"), std::string::npos) << r.out;
}

TEST(VerifyCli, BadUsageExitsTwo) {
  EXPECT_EQ(lina({"verify", "--op", "chunk_nope", "--no-gate"}).exit_code, 2);
  EXPECT_EQ(lina({"verify"}).exit_code, 2);
  const auto k = lina({"verify", "--op", "chunk_gla", "--gate-bin", LINA_TEST_FAKE_GATE, "--gate-k", "Fwd and"});
  EXPECT_EQ(k.exit_code, 2);
  EXPECT_NE(k.err.find("--gate-k"), std::string::npos) << k.err;
  EXPECT_EQ(lina({"verify", "--op", "chunk_gla", "--rounds", "0", "--no-gate"}).exit_code, 2);
  // A ready-made baseline needs the ref whose SHA it must prove, and must exist.
  const auto no_ref = lina({"verify", "--op", "chunk_gla", "--no-gate", "--base-exe", LINA_TEST_LINA_EXE});
  EXPECT_EQ(no_ref.exit_code, 2);
  EXPECT_NE(no_ref.err.find("--base-exe: needs --base"), std::string::npos) << no_ref.err;
  const auto missing = lina({"verify", "--op", "chunk_gla", "--no-gate", "--base", "main", "--base-exe", "/no/such/lina"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/no/such/lina"), std::string::npos) << missing.err;
}

TEST(VerifyCli, CudaBackendWithoutGpuExitsTwo) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  const auto r = lina({"verify", "--op", "chunk_gla", "--backend", "cuda", "--no-gate"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("--backend cuda needs an NVIDIA GPU"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace lina::harness
