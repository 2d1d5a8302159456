// plan_scratch: slices that live at the same time never share bytes; slices that do not, may.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ops/common/scratch_plan.h"

namespace lina::detail {
namespace {

void expect_valid(const std::vector<ScratchSlice>& s, const ScratchPlan& p, std::int64_t align) {
  ASSERT_EQ(p.offsets.size(), s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % align, 0);
    EXPECT_LE(p.offsets[i] + s[i].bytes, p.total_bytes);
    for (std::size_t j = i + 1; j < s.size(); ++j) {
      const bool same_time = s[i].first_stage <= s[j].last_stage && s[j].first_stage <= s[i].last_stage;
      const bool same_bytes = s[i].bytes > 0 && s[j].bytes > 0 && p.offsets[i] < p.offsets[j] + s[j].bytes &&
                              p.offsets[j] < p.offsets[i] + s[i].bytes;
      EXPECT_FALSE(same_time && same_bytes) << "slices " << i << " and " << j;
    }
  }
  EXPECT_LE(p.total_bytes, p.unshared_bytes);
}

TEST(ScratchPlan, DeadSlicesAreReused) {
  // a [0,1] and b [2,3] never live together: b takes a's bytes; c [1,2] lives with both.
  const std::vector<ScratchSlice> s{{1000, 0, 1}, {1000, 2, 3}, {300, 1, 2}};
  const ScratchPlan p = plan_scratch(s, 256);
  expect_valid(s, p, 256);
  EXPECT_EQ(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(p.total_bytes, 1024 + 512);
  EXPECT_EQ(p.unshared_bytes, 1024 + 1024 + 512);
}

TEST(ScratchPlan, StagesAreInclusive) {
  // the last reader of a and the first writer of b are the same stage: no sharing
  const std::vector<ScratchSlice> s{{512, 0, 2}, {512, 2, 3}};
  const ScratchPlan p = plan_scratch(s, 256);
  expect_valid(s, p, 256);
  EXPECT_EQ(p.total_bytes, 1024);
}

TEST(ScratchPlan, RandomPipelinesNeverOverlapLiveSlices) {
  std::mt19937_64 gen(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ScratchSlice> s(1 + gen() % 24);
    for (auto& x : s) {
      x.bytes = static_cast<std::int64_t>(gen() % 5000);
      x.first_stage = static_cast<int>(gen() % 8);
      x.last_stage = x.first_stage + static_cast<int>(gen() % 4);
    }
    const ScratchPlan p = plan_scratch(s, 64);
    expect_valid(s, p, 64);
  }
}

}  // namespace
}  // namespace lina::detail
