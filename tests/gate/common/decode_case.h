// Gate machinery of the decode ops (fused_recurrent_gla / _kda / _gdn): the chunk op's inputs (FLA's
// test distributions, gate_case.h) run token by token against an fp32 state in each place a state can
// live (include/lina/fused_recurrent.h), compared with the fp64 reference at FLA's fused_recurrent
// tolerances; pool slots a call must not write are checked bit for bit. Plus the refusals of bad
// state arguments, which must leave every output untouched.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gate_case.h"

namespace lina::gate {

// Where a case's state lives.
enum class StateForm {
  dense,          // initial_state [N,HV,K,V] -> final_state [N,HV,K,V]
  dense_inplace,  // final_state is initial_state's memory
  pool,           // pool [S,HV,K,V], state_indices [N], inplace_final_state
  pool_2d,        // pool, state_indices [N,L] + num_accepted_tokens, the state after every token in place
  per_token,      // pool, state_indices [N], final_state [B*T,HV,K,V] after every token (pool unchanged)
};

struct DecodeCase {
  GateCase c;  // op fused_recurrent_*, shape tokens + flags in c.name; sizes, gate / l2norm / beta flags
  StateForm form = StateForm::pool;
  bool padding = false;        // 1-D pool forms: every third sequence's slot is -1 (PAD_SLOT_ID)
  bool int64_indices = false;  // state_indices / num_accepted_tokens as int64
  bool reverse = false;        // GLA: tokens last to first
};

// The flags a gate file sets per case (designated initializers, in this order).
struct DecodeFlags {
  std::int64_t HV = 0;  // 0: HV = H
  StateForm form = StateForm::pool;
  double scale = 0, norm = 1, mask_p = 0;  // GateCase's meanings
  bool l2 = false, gate = false, bias = true, safe = false, sigmoid = false;
  bool padding = false, i64 = false, reverse = false;  // DecodeCase's
  DType dt = DType::f16;
};
// A case of `op` named `name` (shape tokens + flags): B sequences of T tokens, or varlen `cu` (B = 1).
DecodeCase decode_case(const std::string& op, std::string name, std::int64_t B, std::int64_t T, std::int64_t H,
                       std::int64_t D, const DecodeFlags& f = {}, std::vector<std::int64_t> cu = {});

// Registers <Prefix>/Fwd.<name> (CPU backend) and <Prefix>Cuda/Fwd.<name> (CUDA backend, skipped
// without a GPU; head dims 64, 128, 256 only, bf16), and <Prefix>/Refuses.<argument problem> (CPU)
// with <Prefix>Cuda/Refuses.<...> for the checks that do not need host indices. Call before
// RUN_ALL_TESTS.
void register_decode_gate(const std::string& prefix, const std::vector<DecodeCase>& cases);

}  // namespace lina::gate
