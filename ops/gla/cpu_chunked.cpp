// PLACEHOLDER: replaced by the chunked CPU backend.
#include "lina/error.h"
#include "ops/common/backends.h"
namespace lina::detail::cpu {
RunInfo chunk_gla_forward(const Problem&, const ChunkGlaArgs&, const AttentionOutputs&, ForwardMode, const ExecOptions&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
RunInfo chunk_gla_backward(const Problem&, const ChunkGlaArgs&, const AttentionGradInputs&, const ChunkGlaGrads&, const ExecOptions&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
}  // namespace lina::detail::cpu
