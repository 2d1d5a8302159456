// chunk_kda gate: FLA's test_kda.py test_chunk / test_chunk_varlen inputs and tolerances: safe gate,
// both in-kernel gate forms, l2norm and beta sigmoid in kernel, GVA groups 1/2/4, and gates at
// -1000 in the varlen cases; small B and H.
#include "common/gate_case.h"

namespace lina::gate {
namespace {

struct Flags {
  std::int64_t HV = 0;
  double scale = 0, norm = 1, mask_p = 0, neg1000 = 0;
  bool l2 = false, gate = false, safe = false, sigmoid = false;
  DType dt = DType::f16;
};

GateCase kda(std::string name, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D, Flags f = {},
             std::vector<std::int64_t> cu = {}) {
  GateCase c;
  c.op = "chunk_kda";
  c.name = std::move(name);
  c.B = B; c.T = cu.empty() ? T : cu.back(); c.H = H; c.HV = f.HV; c.D = D;
  c.scale = f.scale; c.norm = f.norm; c.mask_p = f.mask_p; c.neg1000_p = f.neg1000;
  c.l2 = f.l2; c.gate_in = f.gate; c.safe = f.safe; c.beta_sigmoid = f.sigmoid; c.dtype = f.dt;
  c.cu = std::move(cu);
  return c;
}

const bool registered = [] {
  register_gate("ChunkKda", {
      kda("B1_T1_H2_D64", 1, 1, 2, 64),
      kda("B1_T63_H1_D64_safe", 1, 63, 1, 64, {.scale = 1, .safe = true}),
      kda("B2_T500_H3_D60_safe", 2, 500, 3, 60, {.scale = 1, .safe = true}),
      kda("B2_T1000_H3_D64_mask0p5", 2, 1000, 3, 64, {.scale = 0.1, .mask_p = 0.5}),
      kda("B2_T512_H2_D128_g0p1", 2, 512, 2, 128, {.scale = 0.1, .norm = 0.1}),
      kda("B2_T1024_H4_D128_safe", 2, 1024, 4, 128, {.scale = 0.1, .safe = true}),  // FLA's (4, 1024, 4, 4, 128), halved
      kda("B2_T512_H2_D128_l2_safe", 2, 512, 2, 128, {.scale = 0.1, .l2 = true, .safe = true}),
      kda("B2_T512_H2_D128_gate", 2, 512, 2, 128, {.scale = 0.1, .gate = true}),                  // softplus form
      kda("B2_T160_H2_HV4_D64_gate_safe", 2, 160, 2, 64, {.HV = 4, .scale = 0.1, .gate = true, .safe = true}),  // lower-bound form
      kda("B2_T512_H2_HV4_D64_gva", 2, 512, 2, 64, {.HV = 4, .scale = 0.1}),
      kda("B2_T512_H1_HV4_D64_gate_gva4", 2, 512, 1, 64, {.HV = 4, .scale = 0.1, .gate = true}),
      kda("B2_T160_H2_D64_sigmoid", 2, 160, 2, 64, {.scale = 0.1, .sigmoid = true}),
      kda("B2_T256_H2_HV4_D128_l2_gate_bf16", 2, 256, 2, 128, {.HV = 4, .scale = 0.1, .l2 = true, .gate = true, .dt = DType::bf16}),
      kda("B1_T15_H4_D60_varlen_gate_m1000", 1, 0, 4, 60, {.mask_p = 0.1, .neg1000 = 0.1, .gate = true}, {0, 15}),
      kda("B1_T16_H2_D64_varlen_zero", 1, 0, 2, 64, {}, {0, 0, 16}),
      kda("B1_T1000_H2_D64_varlen_gate_m1000", 1, 0, 2, 64, {.mask_p = 0.9, .neg1000 = 0.9, .gate = true}, {0, 256, 500, 1000}),
      kda("B1_T1000_H2_D128_varlen_m1000", 1, 0, 2, 128, {.mask_p = 0.5, .neg1000 = 0.5}, {0, 256, 500, 1000}),
      kda("B1_T2000_H2_D100_varlen_gate", 1, 0, 2, 100, {.gate = true}, {0, 15, 100, 300, 1200, 2000}),
      kda("B1_T160_H2_HV4_D64_varlen_gate_m1000_gva", 1, 0, 2, 64, {.HV = 4, .mask_p = 0.1, .neg1000 = 0.1, .gate = true}, {0, 31, 96, 160}),
      kda("B1_T2048_H2_D128_varlen", 1, 0, 2, 128, {}, {0, 100, 300, 1200, 2048}),
      // head dim 256 (the CUDA backward's CTA pairs over the channel halves; the forward's K = 256 instantiations)
      kda("B2_T200_H2_D256_l2_gate_safe", 2, 200, 2, 256, {.scale = 0.1, .l2 = true, .gate = true, .safe = true}),
      kda("B1_T600_H1_HV2_D256_varlen_m1000_gva", 1, 0, 1, 256, {.HV = 2, .mask_p = 0.5, .neg1000 = 0.5}, {0, 100, 130, 600}),
  });
  return true;
}();

}  // namespace
}  // namespace lina::gate
