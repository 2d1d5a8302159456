// chunk_gla gate: FLA's test_gla.py test_chunk / test_chunk_varlen inputs and tolerances, with
// sizes cut (small B, H) so that the CPU gate stays within about a minute on two cores.
#include "common/gate_case.h"

namespace lina::gate {
namespace {

GateCase gla(std::string name, std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t D, double norm = 1,
             DType dt = DType::f16) {
  GateCase c;
  c.op = "chunk_gla";
  c.name = std::move(name);
  c.B = B; c.T = T; c.H = H; c.D = D; c.norm = norm; c.dtype = dt;
  return c;
}

GateCase gla_varlen(std::string name, std::int64_t H, std::int64_t D, std::vector<std::int64_t> cu) {
  GateCase c = gla(std::move(name), 1, cu.back(), H, D);
  c.cu = std::move(cu);
  return c;
}

const bool registered = [] {
  register_gate("ChunkGla", {
      gla("B1_T63_H1_D64", 1, 63, 1, 64),                     // one partial chunk
      gla("B1_T1_H2_D64", 1, 1, 2, 64),                       // a single token
      gla("B2_T256_H2_D60", 2, 256, 2, 60),                   // head dim no kernel instantiates (CPU)
      gla("B2_T1024_H4_D128", 2, 1024, 4, 128),
      gla("B2_T2048_H4_D64", 2, 2048, 4, 64),                 // FLA's (4, 2048, 8, 64), halved
      gla("B2_T512_H2_D128_g0p1", 2, 512, 2, 128, 0.1),       // strong decay
      gla("B2_T512_H2_D128_g10", 2, 512, 2, 128, 10),         // weak decay
      gla("B1_T128_H2_D256", 1, 128, 2, 256),
      gla("B1_T128_H2_D128_bf16", 1, 128, 2, 128, 1, DType::bf16),
      gla("B1_T200_H2_D64_f32", 1, 200, 2, 64, 1, DType::f32),
      gla_varlen("B1_T15_H4_D64_varlen", 4, 64, {0, 15}),
      gla_varlen("B1_T16_H4_D64_varlen_zero", 4, 64, {0, 0, 16}),  // a zero-length sequence
      gla_varlen("B1_T1000_H2_D64_varlen", 2, 64, {0, 256, 500, 1000}),
      gla_varlen("B1_T2000_H2_D100_varlen", 2, 100, {0, 15, 100, 300, 1200, 2000}),
      gla_varlen("B1_T2048_H2_D128_varlen", 2, 128, {0, 1, 100, 300, 1200, 2048}),
  });
  return true;
}();

}  // namespace
}  // namespace lina::gate
