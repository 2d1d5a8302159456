// A planted wrong kernel (LINA_FAULT_INJECT=perturb:0.01 scales every forward output by 1.01) must
// turn the real gate red. NOTE: this needs the real ops (fp64 references and CPU backends); while
// they are placeholders the clean gate is not green and the test skips, saying so.
#include <gtest/gtest.h>

#include "harness/verify/gate.h"

namespace lina::harness {
namespace {

class GateFaultInjection : public ::testing::TestWithParam<const char*> {};

TEST_P(GateFaultInjection, PerturbedOutputsTurnTheGateRed) {
  GateRunOptions o;
  o.executable = std::filesystem::path(LINA_TEST_GATE_DIR) / (std::string("lina_") + GetParam() + "_gate");
  o.k_expr = "Fwd and not Cuda";  // the CPU forward cases: quick, and o is what the fault perturbs
  const GateResult clean = run_gate(o);
  if (clean.status != GateStatus::partial)
    GTEST_SKIP() << GetParam() << ": the clean gate is " << gate_status_name(clean.status)
                 << " (the real ops have not landed on this branch), so a planted fault proves nothing here";
  ASSERT_GT(clean.selected, 0);
  o.env = {{"LINA_FAULT_INJECT", "perturb:0.01"}};
  const GateResult bad = run_gate(o);
  EXPECT_EQ(bad.status, GateStatus::red);
  EXPECT_EQ(bad.failed, bad.selected) << "a 1 % error in o slipped through " << bad.passed << " cases";
  bool names_o = false;
  for (const auto& t : bad.tests) names_o = names_o || t.message.find(" o: err_ratio") != std::string::npos;
  EXPECT_TRUE(names_o) << "failure messages should name the tensor";
}

INSTANTIATE_TEST_SUITE_P(Ops, GateFaultInjection,
                         ::testing::Values("chunk_gla", "chunk_kda", "chunk_gdn", "fused_recurrent_gla",
                                           "fused_recurrent_kda", "fused_recurrent_gdn"));

}  // namespace
}  // namespace lina::harness
