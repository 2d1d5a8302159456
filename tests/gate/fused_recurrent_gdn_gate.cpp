// fused_recurrent_gdn gate: FLA's test_gated_delta.py test_fused_recurrent inputs and tolerances, in
// every place the state can live: dense (and in place), the pool of continuous batching with [N] and
// [N,L] indices (num_accepted_tokens), per-token states, padding slots, varlen; GVA groups 1 / 2 / 4,
// the in-kernel gate (softplus, with and without dt_bias), l2norm and beta sigmoid in kernel; head dims
// 64, 128, 256 (and 60 on the CPU). Small B and H; the refusals of bad state arguments.
#include "common/decode_case.h"

namespace lina::gate {
namespace {

DecodeCase gdn(std::string name, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D, DecodeFlags f = {},
               std::vector<std::int64_t> cu = {}) {
  return decode_case("fused_recurrent_gdn", std::move(name), B, T, H, D, f, std::move(cu));
}

const bool registered = [] {
  register_decode_gate("FusedRecurrentGdn", {
      gdn("B1_T1_H2_D64_dense", 1, 1, 2, 64, {.form = StateForm::dense}),
      gdn("B2_T63_H1_D64_dense", 2, 63, 1, 64, {.form = StateForm::dense, .scale = 1}),  // FLA's (1, 63, 1, 1, 64)
      gdn("B2_T40_H2_HV8_D128_dense_gva_g0p1", 2, 40, 2, 128, {.HV = 8, .form = StateForm::dense, .norm = 0.1}),
      gdn("B3_T4_H2_D60_dense_inplace", 3, 4, 2, 60, {.form = StateForm::dense_inplace, .scale = 1}),
      gdn("B8_T1_H2_HV4_D128_pool_gva_l2", 8, 1, 2, 128, {.HV = 4, .l2 = true}),
      gdn("B9_T1_H2_D64_pool_padding", 9, 1, 2, 64, {.padding = true}),
      gdn("B4_T1_H2_D64_pool_int64", 4, 1, 2, 64, {.i64 = true}),
      gdn("B16_T1_H1_HV4_D128_pool_gva4_bf16", 16, 1, 1, 128, {.HV = 4, .l2 = true, .dt = DType::bf16}),
      gdn("B4_T3_H2_HV4_D64_pool2d_accepted", 4, 3, 2, 64, {.HV = 4, .form = StateForm::pool_2d, .l2 = true}),
      gdn("B6_T4_H2_D128_pool2d_accepted_int64", 6, 4, 2, 128, {.form = StateForm::pool_2d, .i64 = true}),
      gdn("B4_T2_H2_D64_per_token", 4, 2, 2, 64, {.form = StateForm::per_token}),
      gdn("B1_T9_H2_HV4_D64_varlen_pool", 1, 0, 2, 64, {.HV = 4}, {0, 1, 3, 4, 9}),
      gdn("B1_T7_H2_D64_varlen_pool2d", 1, 0, 2, 64, {.form = StateForm::pool_2d}, {0, 2, 3, 7}),
      gdn("B1_T6_H2_D64_varlen_dense_empty_seq", 1, 0, 2, 64, {.form = StateForm::dense}, {0, 2, 2, 6}),
      gdn("B4_T1_H2_HV4_D64_pool_gate", 4, 1, 2, 64, {.HV = 4, .gate = true}),                 // softplus form
      gdn("B4_T2_H2_D64_pool_gate_nobias", 4, 2, 2, 64, {.gate = true, .bias = false}),
      gdn("B4_T2_H2_D64_pool_sigmoid", 4, 2, 2, 64, {.sigmoid = true}),
      gdn("B4_T1_H2_HV4_D128_pool_l2_gate_sigmoid_bf16", 4, 1, 2, 128, {.HV = 4, .l2 = true, .gate = true, .sigmoid = true, .dt = DType::bf16}),
      gdn("B2_T1_H1_HV2_D256_pool_l2", 2, 1, 1, 256, {.HV = 2, .l2 = true}),
      gdn("B2_T3_H1_D256_dense_l2", 2, 3, 1, 256, {.form = StateForm::dense, .l2 = true}),
      gdn("B3_T2_H2_D64_dense_f32", 3, 2, 2, 64, {.form = StateForm::dense, .dt = DType::f32}),
  });
  return true;
}();

}  // namespace
}  // namespace lina::gate
