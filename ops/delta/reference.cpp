// PLACEHOLDER: replaced by the fp64 naive recurrences (spec section 2).
#include "lina/error.h"
#include "ops/common/backends.h"
namespace lina::detail::reference {
void chunk_kda_forward(const Problem&, const ChunkKdaArgs&, const AttentionOutputs&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
void chunk_kda_backward(const Problem&, const ChunkKdaArgs&, const AttentionGradInputs&, const DeltaRuleGrads&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
void chunk_gdn_forward(const Problem&, const ChunkGdnArgs&, const AttentionOutputs&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
void chunk_gdn_backward(const Problem&, const ChunkGdnArgs&, const AttentionGradInputs&, const DeltaRuleGrads&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
}  // namespace lina::detail::reference
