// FLA's tolerance table (docs/math.md section 6): the one place gate suites and per-cell checks read limits
// from. Changing a value is its own commit with its reason; `lina loop init` hashes this file.
#pragma once
#include <string_view>

namespace lina::harness {

// Which of FLA's test families a check follows: dense chunk tests or varlen tests.
enum class ToleranceSet { dense, varlen };

// err_ratio limit for tensor `name` of op `op` ("chunk_gla", "chunk_kda", "chunk_gdn",
// "fused_recurrent_gla", "fused_recurrent_kda", "fused_recurrent_gdn").
// Names: o, ht, dq, dk, dv, dg, dbeta, dh0, dA_log, ddt_bias. Unknown names throw lina::Error.
double tolerance(std::string_view op, std::string_view name, ToleranceSet set = ToleranceSet::dense);

}  // namespace lina::harness
