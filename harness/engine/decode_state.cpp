#include "harness/engine/decode_state.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

namespace lina::harness {

std::int64_t StatePoolLayout::states_written() const { return num_seqs * std::max<std::int64_t>(1, indices_per_seq); }

StatePoolLayout state_pool_layout(const ShapeKeys& k) {
  StatePoolLayout l;
  l.num_seqs = k.num_seqs;
  // Varlen sequences differ in length: one slot each, written after the last token.
  l.indices_per_seq = (!k.varlen && k.T > 1) ? k.T : 0;
  l.slots = l.states_written();
  return l;
}

StatePool make_state_pool(const ShapeKeys& k, std::uint64_t seed) {
  const StatePoolLayout l = state_pool_layout(k);
  StatePool p;
  p.pool = generate_tensor("state_pool", DType::f32, Shape{l.slots, k.HV, k.K, k.V}, Transform::randn, seed);
  // Seeded Fisher-Yates over the slots: sequences do not sit in pool order, as in a serving engine.
  std::vector<std::int64_t> slot(static_cast<std::size_t>(l.slots));
  std::iota(slot.begin(), slot.end(), 0);
  CounterRng rng(seed, stream_of("state_indices"));
  for (std::size_t i = slot.size(); i > 1; --i) std::swap(slot[i - 1], slot[rng.next_u64() % i]);
  p.state_indices = l.indices_per_seq ? HostTensor(DType::i32, Shape{l.num_seqs, l.indices_per_seq})
                                      : HostTensor(DType::i32, Shape{l.num_seqs});
  for (std::int64_t i = 0; i < l.slots; ++i) p.state_indices.set(i, static_cast<double>(slot[static_cast<std::size_t>(i)]));
  if (l.indices_per_seq) {
    CounterRng acc(seed, stream_of("num_accepted_tokens"));
    HostTensor n(DType::i32, Shape{l.num_seqs});
    for (std::int64_t i = 0; i < l.num_seqs; ++i)
      n.set(i, static_cast<double>(1 + static_cast<std::int64_t>(acc.next_u64() % static_cast<std::uint64_t>(l.indices_per_seq))));
    p.num_accepted_tokens = std::move(n);
  }
  return p;
}

}  // namespace lina::harness
