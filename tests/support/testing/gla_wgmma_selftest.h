// Self-test of the wgmma glue of the K = 128 chunk_gla forward (ops/gla/cuda/gla_wgmma_glue.cuh): the
// consumer's three GEMM pieces on exact small-integer tiles against a host product, so that a wrong
// descriptor, swizzle or register-fragment layout is named on the first device run (gla_check --small).
#pragma once
#include <string>

namespace lina::detail::cuda {
// "" when all pieces match exactly; "skipped: ..." when built without CuTe; otherwise what failed and where.
std::string gla_wgmma_selftest();
}  // namespace lina::detail::cuda
