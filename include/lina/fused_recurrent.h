// fused_recurrent_gla / fused_recurrent_kda / fused_recurrent_gdn: the decode form of the chunk ops
// (FLA's fused_recurrent_*). One token, or a few per sequence (speculative steps), run token by
// token against an fp32 recurrent state, with the step order of the chunk ops (docs/math.md
// section 2: decay -> update -> read). Forward only (decode has no backward).
//
// The arguments are the chunk op's plus where the state lives (DecodeState):
//
// Dense state (no state_indices):
//   initial_state [N,HV,K,V] f32, absent = zero; final_state (AttentionOutputs) [N,HV,K,V] f32, written
//   after each sequence's last token when given. inplace_final_state = true writes it into initial_state
//   instead (final_state must then be absent).
//
// Continuous batching (state_indices given; vLLM's and FLA's ssm_state_indices):
//   initial_state is required and is a state pool [S,HV,K,V] f32; state_indices on q's device, int32
//   or int64, [N] or [N,L] (L >= the longest sequence), names each sequence's slot:
//   - read: slot indices[n] ([N]), indices[n][0] ([N,L]), or indices[n][num_accepted_tokens[n] - 1]
//     with num_accepted_tokens ([N] int32 / int64, requires [N,L] indices, values in [1, L]);
//   - inplace_final_state = true: the state after the last token goes back to slot indices[n] ([N]);
//     with [N,L] indices the state after token t goes to slot indices[n][t] (speculative decoding);
//     final_state must then be absent;
//   - inplace_final_state = false: final_state [B*T,HV,K,V] f32 receives the state after every token
//     (row = the token's row of the flattened token axis), as FLA does.
//   A negative slot is padding (vLLM's PAD_SLOT_ID): the sequence reads and writes no state and its o
//   rows are zero. A slot >= S is refused (invalid_argument, naming state_indices) where the indices
//   are on the host; indices on the device are not copied back (decode steps stay asynchronous and
//   capturable), and there the kernel treats a slot >= S as padding: it never touches memory outside
//   the pool.
//
// Tokens: dense q [B,T,H,K] (B sequences of T tokens) or varlen through cu_seqlens (B = 1). o has
// q's dtype, [B,T,HV,V]. The CUDA backend takes K, V in {64, 128, 256}, the CPU backend any K, V.
#pragma once
#include "lina/chunk_delta.h"
#include "lina/chunk_gla.h"

namespace lina {

struct DecodeState {
  std::optional<TensorView> state_indices;        // [N] or [N,L] int32 | int64; initial_state is then a pool
  std::optional<TensorView> num_accepted_tokens;  // [N] int32 | int64; requires [N,L] state_indices
  bool inplace_final_state = false;               // with state_indices: write the state back into the pool
};

struct FusedRecurrentGlaArgs : ChunkGlaArgs {
  DecodeState decode;
  bool reverse = false;  // run each sequence's tokens last to first (FLA's reverse=True)
};

struct FusedRecurrentKdaArgs : ChunkKdaArgs {  // safe_gate is accepted and changes nothing: no chunk here
  DecodeState decode;
};

struct FusedRecurrentGdnArgs : ChunkGdnArgs {
  DecodeState decode;
};

RunInfo fused_recurrent_gla_forward(const FusedRecurrentGlaArgs& args, const AttentionOutputs& out,
                                    const ExecOptions& opts = {});
RunInfo fused_recurrent_kda_forward(const FusedRecurrentKdaArgs& args, const AttentionOutputs& out,
                                    const ExecOptions& opts = {});
RunInfo fused_recurrent_gdn_forward(const FusedRecurrentGdnArgs& args, const AttentionOutputs& out,
                                    const ExecOptions& opts = {});

namespace reference {
// fp64 token-by-token recurrences on the host; o and the states may be f32 or f64 host tensors
// (the pool of continuous batching keeps the caller's dtype: f32).
void fused_recurrent_gla_forward(const FusedRecurrentGlaArgs& args, const AttentionOutputs& out);
void fused_recurrent_kda_forward(const FusedRecurrentKdaArgs& args, const AttentionOutputs& out);
void fused_recurrent_gdn_forward(const FusedRecurrentGdnArgs& args, const AttentionOutputs& out);
}  // namespace reference

}  // namespace lina
