// PLACEHOLDER: replaced by the chunked CPU backend.
#include "lina/error.h"
#include "ops/common/backends.h"
namespace lina::detail::cpu {
RunInfo chunk_kda_forward(const Problem&, const ChunkKdaArgs&, const AttentionOutputs&, ForwardMode, const ExecOptions&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
RunInfo chunk_kda_backward(const Problem&, const ChunkKdaArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, const ExecOptions&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
RunInfo chunk_gdn_forward(const Problem&, const ChunkGdnArgs&, const AttentionOutputs&, ForwardMode, const ExecOptions&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
RunInfo chunk_gdn_backward(const Problem&, const ChunkGdnArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, const ExecOptions&) { throw Error(ErrorCode::unsupported, "", "not implemented yet"); }
}  // namespace lina::detail::cpu
