// chunk_kda / chunk_gdn front doors: validate everything, then hand over to the backend.
#include "lina/chunk_delta.h"
#include "ops/common/backends.h"
#include "ops/delta/variants.h"

namespace lina {

using detail::OutputDTypes;
namespace delta = detail::delta;

RunInfo chunk_kda_forward(const ChunkKdaArgs& args, const AttentionOutputs& out, ForwardMode mode, const ExecOptions& opts) {
  const detail::Problem p = detail::validate_kda(args);
  detail::validate_outputs(p, out, args.q.dtype, OutputDTypes::exact);
  RunInfo info;
  if (detail::pick_backend(p, opts) == Backend::cuda) {
    info = delta::run_cuda(delta::ForwardCall<ChunkKdaArgs>{p, args, out, opts});
  } else {
    detail::refuse_variant_on_cpu("chunk_kda.fwd", opts);
    info = detail::cpu::chunk_kda_forward(p, args, out, mode, opts);
  }
  return info;
}

RunInfo chunk_kda_backward(const ChunkKdaArgs& args, const AttentionGradInputs& grad_in, const DeltaRuleGrads& grads,
                           const ExecOptions& opts) {
  const detail::Problem p = detail::validate_kda(args);
  detail::validate_grad_inputs(p, grad_in);
  detail::validate_delta_grads(p, args, grads, OutputDTypes::exact);
  if (detail::pick_backend(p, opts) == Backend::cuda)
    return delta::run_cuda(delta::BackwardCall<ChunkKdaArgs>{p, args, grad_in, grads, opts});
  detail::refuse_variant_on_cpu("chunk_kda.bwd", opts);
  return detail::cpu::chunk_kda_backward(p, args, grad_in, grads, opts);
}

RunInfo chunk_gdn_forward(const ChunkGdnArgs& args, const AttentionOutputs& out, ForwardMode mode, const ExecOptions& opts) {
  const detail::Problem p = detail::validate_gdn(args);
  detail::validate_outputs(p, out, args.q.dtype, OutputDTypes::exact);
  RunInfo info;
  if (detail::pick_backend(p, opts) == Backend::cuda) {
    info = delta::run_cuda(delta::ForwardCall<ChunkGdnArgs>{p, args, out, opts});
  } else {
    detail::refuse_variant_on_cpu("chunk_gdn.fwd", opts);
    info = detail::cpu::chunk_gdn_forward(p, args, out, mode, opts);
  }
  return info;
}

RunInfo chunk_gdn_backward(const ChunkGdnArgs& args, const AttentionGradInputs& grad_in, const DeltaRuleGrads& grads,
                           const ExecOptions& opts) {
  const detail::Problem p = detail::validate_gdn(args);
  detail::validate_grad_inputs(p, grad_in);
  detail::validate_delta_grads(p, args, grads, OutputDTypes::exact);
  if (detail::pick_backend(p, opts) == Backend::cuda)
    return delta::run_cuda(delta::BackwardCall<ChunkGdnArgs>{p, args, grad_in, grads, opts});
  detail::refuse_variant_on_cpu("chunk_gdn.bwd", opts);
  return detail::cpu::chunk_gdn_backward(p, args, grad_in, grads, opts);
}

namespace reference {

void chunk_kda_forward(const ChunkKdaArgs& args, const AttentionOutputs& out) {
  const detail::Problem p = detail::validate_kda(args);
  detail::validate_outputs(p, out, args.q.dtype, OutputDTypes::reference);
  detail::require_host(p);
  detail::reference::chunk_kda_forward(p, args, out);
}

void chunk_kda_backward(const ChunkKdaArgs& args, const AttentionGradInputs& grad_in, const DeltaRuleGrads& grads) {
  const detail::Problem p = detail::validate_kda(args);
  detail::validate_grad_inputs(p, grad_in);
  detail::validate_delta_grads(p, args, grads, OutputDTypes::reference);
  detail::require_host(p);
  detail::reference::chunk_kda_backward(p, args, grad_in, grads);
}

void chunk_gdn_forward(const ChunkGdnArgs& args, const AttentionOutputs& out) {
  const detail::Problem p = detail::validate_gdn(args);
  detail::validate_outputs(p, out, args.q.dtype, OutputDTypes::reference);
  detail::require_host(p);
  detail::reference::chunk_gdn_forward(p, args, out);
}

void chunk_gdn_backward(const ChunkGdnArgs& args, const AttentionGradInputs& grad_in, const DeltaRuleGrads& grads) {
  const detail::Problem p = detail::validate_gdn(args);
  detail::validate_grad_inputs(p, grad_in);
  detail::validate_delta_grads(p, args, grads, OutputDTypes::reference);
  detail::require_host(p);
  detail::reference::chunk_gdn_backward(p, args, grad_in, grads);
}

}  // namespace reference
}  // namespace lina
