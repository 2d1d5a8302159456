// fused_recurrent_kda gate: FLA's test_kda.py test_fused_recurrent / test_fused_recurrent_vllm_decode
// inputs and tolerances, in every place the state can live: dense (and in place), the pool of
// continuous batching with [N] and [N,L] indices (num_accepted_tokens), per-token states, padding
// slots, varlen; GVA, both in-kernel gate forms (softplus; lower bound with safe_gate), l2norm and
// beta sigmoid in kernel; head dims 64, 128, 256 (and 100 on the CPU). Small B and H; the refusals
// of bad state arguments.
#include "common/decode_case.h"

namespace lina::gate {
namespace {

DecodeCase kda(std::string name, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D, DecodeFlags f = {},
               std::vector<std::int64_t> cu = {}) {
  return decode_case("fused_recurrent_kda", std::move(name), B, T, H, D, f, std::move(cu));
}

const bool registered = [] {
  register_decode_gate("FusedRecurrentKda", {
      kda("B1_T64_H1_D64_dense", 1, 64, 1, 64, {.form = StateForm::dense, .scale = 1}),  // FLA's (1, 64, 1, 64)
      kda("B3_T20_H4_D100_dense_l2", 3, 20, 4, 100, {.form = StateForm::dense, .scale = 0.1, .l2 = true}),
      kda("B2_T32_H2_D128_dense_inplace", 2, 32, 2, 128, {.form = StateForm::dense_inplace, .scale = 0.1}),
      kda("B16_T1_H2_D128_pool_l2_bf16", 16, 1, 2, 128, {.scale = 0.1, .l2 = true, .dt = DType::bf16}),  // vllm_decode (16, 16, 128)
      kda("B7_T1_H4_D128_pool_l2_g0p5", 7, 1, 4, 128, {.scale = 0.5, .norm = 0.5, .l2 = true}),         // odd batch
      kda("B8_T1_H2_D64_pool_gate", 8, 1, 2, 64, {.gate = true}),                                         // softplus form
      kda("B7_T1_H2_D128_pool_l2_gate_safe_bf16", 7, 1, 2, 128, {.scale = 0.5, .l2 = true, .gate = true, .safe = true, .dt = DType::bf16}),
      kda("B9_T1_H2_D64_pool_padding", 9, 1, 2, 64, {.padding = true}),
      kda("B4_T1_H2_D64_pool_int64", 4, 1, 2, 64, {.i64 = true}),
      kda("B4_T1_H2_HV4_D64_pool_gva", 4, 1, 2, 64, {.HV = 4}),
      kda("B4_T2_H1_HV4_D64_pool_gate_gva4", 4, 2, 1, 64, {.HV = 4, .gate = true}),
      kda("B4_T3_H2_D64_pool2d_accepted", 4, 3, 2, 64, {.form = StateForm::pool_2d, .l2 = true}),
      kda("B6_T4_H2_HV4_D128_pool2d_accepted_gva_int64", 6, 4, 2, 128, {.HV = 4, .form = StateForm::pool_2d, .i64 = true}),
      kda("B4_T2_H2_D64_per_token", 4, 2, 2, 64, {.form = StateForm::per_token}),
      kda("B1_T9_H2_D64_varlen_pool_mask0p5", 1, 0, 2, 64, {.mask_p = 0.5}, {0, 1, 3, 4, 9}),
      kda("B1_T7_H2_HV4_D64_varlen_pool2d_gate", 1, 0, 2, 64, {.HV = 4, .form = StateForm::pool_2d, .gate = true}, {0, 2, 3, 7}),
      kda("B1_T15_H2_D64_varlen_dense", 1, 0, 2, 64, {.form = StateForm::dense}, {0, 15}),
      kda("B4_T2_H2_D64_pool_sigmoid", 4, 2, 2, 64, {.sigmoid = true}),
      kda("B2_T1_H1_D256_pool_l2_gate_safe", 2, 1, 1, 256, {.l2 = true, .gate = true, .safe = true}),
      kda("B2_T3_H1_HV2_D256_dense_gva", 2, 3, 1, 256, {.HV = 2, .form = StateForm::dense}),
      kda("B3_T2_H2_D64_dense_f32", 3, 2, 2, 64, {.form = StateForm::dense, .dt = DType::f32}),
  });
  return true;
}();

}  // namespace
}  // namespace lina::gate
