// CUDA build: entry points of ops whose sm_90a kernels have not landed yet refuse clearly.
// Each op's kernel work removes its lines here and defines them under ops/<op>/cuda/.
#include "lina/error.h"
#include "ops/common/backends.h"

namespace lina::detail::cuda {

namespace {
[[noreturn]] RunInfo pending(const char* op) {
  throw_unsupported("backend", std::string("cuda for ") + op + " (its sm_90a kernels are not built yet)", "the cpu backend");
}
}  // namespace

bool compiled() { return true; }
RunInfo chunk_kda_backward(const Problem&, const ChunkKdaArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, const ExecOptions&) { pending("chunk_kda"); }
RunInfo chunk_gdn_backward(const Problem&, const ChunkGdnArgs&, const AttentionGradInputs&, const DeltaRuleGrads&, const ExecOptions&) { pending("chunk_gdn"); }

}  // namespace lina::detail::cuda
