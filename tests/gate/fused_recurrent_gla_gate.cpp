// fused_recurrent_gla gate: FLA's test_gla.py test_fused_recurrent inputs and tolerances, in every
// place the state can live: dense (and in place), the pool of continuous batching with [N] and [N,L]
// indices (num_accepted_tokens), per-token states, padding slots, varlen; reverse; gate normalisers
// 1 and 0.1; head dims 64, 128, 256 (and 100 on the CPU). GLA has no GVA. Small B and H; the
// refusals of bad state arguments.
#include "common/decode_case.h"

namespace lina::gate {
namespace {

DecodeCase gla(std::string name, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D, DecodeFlags f = {},
               std::vector<std::int64_t> cu = {}) {
  return decode_case("fused_recurrent_gla", std::move(name), B, T, H, D, f, std::move(cu));
}

const bool registered = [] {
  register_decode_gate("FusedRecurrentGla", {
      gla("B1_T1_H2_D64_dense", 1, 1, 2, 64, {.form = StateForm::dense}),
      gla("B2_T50_H2_D100_dense_g0p1", 2, 50, 2, 100, {.form = StateForm::dense, .norm = 0.1}),
      gla("B2_T32_H2_D128_dense_inplace", 2, 32, 2, 128, {.form = StateForm::dense_inplace}),
      gla("B2_T16_H2_D64_dense_reverse", 2, 16, 2, 64, {.form = StateForm::dense, .reverse = true}),
      gla("B16_T1_H2_D128_pool_bf16", 16, 1, 2, 128, {.dt = DType::bf16}),
      gla("B9_T1_H2_D64_pool_padding", 9, 1, 2, 64, {.padding = true}),
      gla("B4_T1_H4_D64_pool_int64_scale1", 4, 1, 4, 64, {.scale = 1, .i64 = true}),
      gla("B4_T3_H2_D64_pool2d_accepted", 4, 3, 2, 64, {.form = StateForm::pool_2d}),
      gla("B6_T4_H2_D128_pool2d_accepted_int64", 6, 4, 2, 128, {.form = StateForm::pool_2d, .i64 = true}),
      gla("B4_T2_H2_D64_per_token", 4, 2, 2, 64, {.form = StateForm::per_token}),
      gla("B1_T9_H2_D64_varlen_pool", 1, 0, 2, 64, {}, {0, 1, 3, 4, 9}),
      gla("B1_T7_H2_D64_varlen_pool2d", 1, 0, 2, 64, {.form = StateForm::pool_2d}, {0, 2, 3, 7}),
      gla("B1_T20_H2_D64_varlen_dense_reverse", 1, 0, 2, 64, {.form = StateForm::dense, .reverse = true}, {0, 4, 20}),
      gla("B2_T1_H1_D256_pool", 2, 1, 1, 256, {}),
      gla("B2_T3_H1_D256_dense_g0p1", 2, 3, 1, 256, {.form = StateForm::dense, .norm = 0.1}),
      gla("B3_T2_H2_D64_dense_f32", 3, 2, 2, 64, {.form = StateForm::dense, .dt = DType::f32}),
  });
  return true;
}();

}  // namespace
}  // namespace lina::gate
