// The state pool of the decode cells: layout per workload, seeded indices that name each slot once.
#include <gtest/gtest.h>

#include <set>

#include "harness/engine/decode_state.h"

namespace lina::harness {
namespace {

std::set<std::int64_t> slots_named(const StatePool& p) {
  std::set<std::int64_t> s;
  for (std::int64_t i = 0; i < p.state_indices.numel(); ++i) s.insert(static_cast<std::int64_t>(p.state_indices.get(i)));
  return s;
}

TEST(HarnessDecodeState, OneTokenPerSequenceUsesOneSlotEach) {
  const Workload w = parse_shape_name("B8_T1_H2_D16_HV4", 7);
  const StatePoolLayout l = state_pool_layout(w.keys);
  EXPECT_EQ(l.num_seqs, 8);
  EXPECT_EQ(l.slots, 8);
  EXPECT_EQ(l.indices_per_seq, 0);
  EXPECT_EQ(l.states_written(), 8);
  const StatePool p = make_state_pool(w.keys, 7);
  EXPECT_EQ(p.pool.shape(), (Shape{8, 4, 16, 16}));
  EXPECT_EQ(p.pool.dtype(), DType::f32);
  EXPECT_EQ(p.state_indices.shape(), Shape{8});
  EXPECT_EQ(p.state_indices.dtype(), DType::i32);
  EXPECT_FALSE(p.num_accepted_tokens);
  const auto named = slots_named(p);
  EXPECT_EQ(named.size(), 8u);  // a permutation: every slot once
  EXPECT_EQ(*named.begin(), 0);
  EXPECT_EQ(*named.rbegin(), 7);
}

TEST(HarnessDecodeState, SpeculativeStepsGetASlotPerTokenAndAcceptedCounts) {
  const Workload w = parse_shape_name("B5_T3_H2_D16", 7);
  const StatePoolLayout l = state_pool_layout(w.keys);
  EXPECT_EQ(l.indices_per_seq, 3);
  EXPECT_EQ(l.slots, 15);
  const StatePool p = make_state_pool(w.keys, 7);
  EXPECT_EQ(p.state_indices.shape(), (Shape{5, 3}));
  EXPECT_EQ(slots_named(p).size(), 15u);
  ASSERT_TRUE(p.num_accepted_tokens);
  ASSERT_EQ(p.num_accepted_tokens->shape(), Shape{5});
  for (std::int64_t n = 0; n < 5; ++n) {
    EXPECT_GE(p.num_accepted_tokens->get(n), 1);
    EXPECT_LE(p.num_accepted_tokens->get(n), 3);
  }
}

TEST(HarnessDecodeState, VarlenSequencesHaveOneSlotEach) {
  const Workload w = parse_varlen("uniform:T=40,H=2,D=16,N=6", 3).at(0);
  const StatePoolLayout l = state_pool_layout(w.keys);
  EXPECT_EQ(l.num_seqs, 6);
  EXPECT_EQ(l.indices_per_seq, 0);
  EXPECT_EQ(make_state_pool(w.keys, 3).state_indices.shape(), Shape{6});
}

TEST(HarnessDecodeState, SeedDecidesEverything) {
  const Workload w = parse_shape_name("B16_T2_H2_D16", 1);
  const StatePool a = make_state_pool(w.keys, 11), b = make_state_pool(w.keys, 11), c = make_state_pool(w.keys, 12);
  for (std::int64_t i = 0; i < a.state_indices.numel(); ++i) EXPECT_EQ(a.state_indices.get(i), b.state_indices.get(i));
  EXPECT_EQ(a.pool.get(5), b.pool.get(5));
  bool differs = false;
  for (std::int64_t i = 0; i < a.state_indices.numel(); ++i) differs = differs || a.state_indices.get(i) != c.state_indices.get(i);
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace lina::harness
