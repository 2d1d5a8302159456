// chunk_gla front door: validate everything, then hand over to the backend the device picks.
#include "lina/chunk_gla.h"
#include "ops/common/backends.h"
#include "ops/common/variant.h"

namespace lina {

using detail::OutputDTypes;

RunInfo chunk_gla_forward(const ChunkGlaArgs& args, const AttentionOutputs& out, ForwardMode mode, const ExecOptions& opts) {
  const detail::Problem p = detail::validate_gla(args);
  detail::validate_outputs(p, out, args.v.dtype, OutputDTypes::exact);
  if (detail::pick_backend(p, opts) == Backend::cuda) return detail::cuda::chunk_gla_forward(p, args, out, mode, opts);
  detail::refuse_variant_on_cpu("chunk_gla.fwd", opts);
  return detail::cpu::chunk_gla_forward(p, args, out, mode, opts);
}

RunInfo chunk_gla_backward(const ChunkGlaArgs& args, const AttentionGradInputs& grad_in, const ChunkGlaGrads& grads,
                           const ExecOptions& opts) {
  const detail::Problem p = detail::validate_gla(args);
  detail::validate_grad_inputs(p, grad_in);
  detail::validate_gla_grads(p, args, grads, OutputDTypes::exact);
  if (detail::pick_backend(p, opts) == Backend::cuda) {
    // One pipeline (states, dq/dk/dg, dv): no table to choose from.
    detail::refuse_named_variant("chunk_gla.bwd", "", "chunk_gla.bwd has one CUDA pipeline", opts);
    return detail::cuda::chunk_gla_backward(p, args, grad_in, grads, opts);
  }
  detail::refuse_variant_on_cpu("chunk_gla.bwd", opts);
  return detail::cpu::chunk_gla_backward(p, args, grad_in, grads, opts);
}

namespace reference {

void chunk_gla_forward(const ChunkGlaArgs& args, const AttentionOutputs& out) {
  const detail::Problem p = detail::validate_gla(args);
  detail::validate_outputs(p, out, args.v.dtype, OutputDTypes::reference);
  detail::require_host(p);
  detail::reference::chunk_gla_forward(p, args, out);
}

void chunk_gla_backward(const ChunkGlaArgs& args, const AttentionGradInputs& grad_in, const ChunkGlaGrads& grads) {
  const detail::Problem p = detail::validate_gla(args);
  detail::validate_grad_inputs(p, grad_in);
  detail::validate_gla_grads(p, args, grads, OutputDTypes::reference);
  detail::require_host(p);
  detail::reference::chunk_gla_backward(p, args, grad_in, grads);
}

}  // namespace reference
}  // namespace lina
