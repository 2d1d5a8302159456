// PLACEHOLDER: replaced by the fp64 naive recurrence (spec section 2).
#include "lina/error.h"
#include "ops/common/backends.h"
namespace lina::detail::reference {
void chunk_gla_forward(const Problem&, const ChunkGlaArgs&, const AttentionOutputs&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
void chunk_gla_backward(const Problem&, const ChunkGlaArgs&, const AttentionGradInputs&, const ChunkGlaGrads&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
}  // namespace lina::detail::reference
