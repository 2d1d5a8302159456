// The state pool a decode (fused_recurrent) cell runs against, in the serving form of vLLM and FLA:
// a pool of fp32 states [S,HV,K,V], each sequence's slots named by state_indices (a seeded
// permutation of the pool), updated in place. One token per sequence: indices [N], S = N. Speculative
// steps (T > 1): indices [N,T] (the state after token t goes to slot indices[n][t]), S = N*T, and
// num_accepted_tokens [N] in [1, T] picks the slot each sequence reads. Varlen: indices [N], S = N.
#pragma once
#include <cstdint>
#include <optional>

#include "harness/engine/workload.h"
#include "lina/tensor.h"

namespace lina::harness {

struct StatePoolLayout {
  std::int64_t num_seqs = 0;         // N
  std::int64_t slots = 0;            // S
  std::int64_t indices_per_seq = 0;  // 0: indices [N]; L: indices [N,L]
  std::int64_t states_written() const;  // states one call writes: N, or N*L
};
StatePoolLayout state_pool_layout(const ShapeKeys& keys);

struct StatePool {
  HostTensor pool;                            // [S,HV,K,V] f32, randn
  HostTensor state_indices;                   // int32 [N] or [N,L]
  std::optional<HostTensor> num_accepted_tokens;  // int32 [N], with [N,L] indices
};
// Seeded from (seed, "state_pool" / "state_indices" / "num_accepted_tokens").
StatePool make_state_pool(const ShapeKeys& keys, std::uint64_t seed);

}  // namespace lina::harness
