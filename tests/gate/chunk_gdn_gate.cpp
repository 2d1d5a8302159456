// chunk_gdn gate: FLA's test_gdn.py test_chunk, test_chunk_varlen and gate-in-kernel inputs and
// tolerances (GVA groups 1/2/4, l2norm, beta sigmoid and softplus gate in kernel), small B and H.
#include "common/gate_case.h"

namespace lina::gate {
namespace {

struct Flags {
  std::int64_t HV = 0;
  double scale = 0, norm = 1, mask_p = 0;
  bool l2 = false, gate = false, bias = true, sigmoid = false;
  DType dt = DType::f16;
};

GateCase gdn(std::string name, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D, Flags f = {},
             std::vector<std::int64_t> cu = {}) {
  GateCase c;
  c.op = "chunk_gdn";
  c.name = std::move(name);
  c.B = B; c.T = cu.empty() ? T : cu.back(); c.H = H; c.HV = f.HV; c.D = D;
  c.scale = f.scale; c.norm = f.norm; c.mask_p = f.mask_p;
  c.l2 = f.l2; c.gate_in = f.gate; c.bias = f.bias; c.beta_sigmoid = f.sigmoid; c.dtype = f.dt;
  c.cu = std::move(cu);
  return c;
}

const bool registered = [] {
  register_gate("ChunkGdn", {
      gdn("B1_T1_H2_D64", 1, 1, 2, 64),
      gdn("B2_T75_H4_D64_g0p01", 2, 75, 4, 64, {.scale = 1, .norm = 0.01}),   // g ~ -31..-69 per step
      gdn("B2_T500_H3_D60", 2, 500, 3, 60, {.scale = 1}),
      gdn("B2_T1000_H3_D64_mask0p5", 2, 1000, 3, 64, {.scale = 0.1, .mask_p = 0.5}),
      gdn("B1_T1024_H2_D128_gzero", 1, 1024, 2, 128, {.scale = 0.1, .mask_p = 1.0}),  // g == 0
      gdn("B2_T1024_H4_D128", 2, 1024, 4, 128, {.scale = 0.1}),  // FLA's (4, 1024, 4, 4, 128), halved
      gdn("B2_T512_H2_D128_l2", 2, 512, 2, 128, {.scale = 0.1, .l2 = true}),
      gdn("B2_T256_H2_HV4_D64_gva", 2, 256, 2, 64, {.HV = 4, .scale = 1}),
      gdn("B2_T256_H1_HV4_D64_gva4_l2", 2, 256, 1, 64, {.HV = 4, .scale = 1, .norm = 0.1, .l2 = true}),
      gdn("B2_T256_H2_D64_gate", 2, 256, 2, 64, {.scale = 1, .l2 = true, .gate = true}),
      gdn("B2_T512_H1_HV4_D64_gate_gva4_nobias", 2, 512, 1, 64, {.HV = 4, .scale = 0.1, .gate = true, .bias = false}),
      gdn("B2_T160_H2_D64_sigmoid", 2, 160, 2, 64, {.sigmoid = true}),
      gdn("B1_T256_H2_D128_bf16", 1, 256, 2, 128, {.scale = 0.1, .dt = DType::bf16}),
      gdn("B1_T15_H4_D60_varlen", 1, 0, 4, 60, {}, {0, 15}),
      gdn("B1_T16_H2_D64_varlen_zero", 1, 0, 2, 64, {}, {0, 0, 16}),
      gdn("B1_T1000_H2_D64_varlen_mask0p5", 1, 0, 2, 64, {.mask_p = 0.5}, {0, 256, 500, 1000}),
      gdn("B1_T1000_H2_HV4_D64_varlen_gva", 1, 0, 2, 64, {.HV = 4}, {0, 256, 500, 1000}),
      gdn("B1_T1000_H1_HV4_D64_varlen_gva4", 1, 0, 1, 64, {.HV = 4}, {0, 256, 500, 1000}),
      gdn("B1_T2000_H2_D100_varlen", 1, 0, 2, 100, {}, {0, 15, 100, 300, 1200, 2000}),
      gdn("B1_T1000_H2_D64_varlen_gate", 1, 0, 2, 64, {.gate = true}, {0, 256, 500, 1000}),
      // head dim 256 (the CUDA backward's CTA pairs over the channel halves; the forward's K = 256 instantiations)
      gdn("B2_T200_H2_D256_l2", 2, 200, 2, 256, {.scale = 0.1, .l2 = true}),
      gdn("B1_T600_H1_HV2_D256_varlen_gate_gva", 1, 0, 1, 256, {.HV = 2, .gate = true}, {0, 100, 130, 600}),
  });
  return true;
}();

}  // namespace
}  // namespace lina::gate
