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
RunInfo chunk_gla_backward(const Problem&, const ChunkGlaArgs&, const AttentionGradInputs&, const ChunkGlaGrads&, const ExecOptions&) { pending("chunk_gla"); }

}  // namespace lina::detail::cuda
