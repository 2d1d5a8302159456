// The kernel variant tables of chunk_kda and chunk_gdn on the CUDA backend, one per op and direction
// (sites "chunk_kda.fwd", "chunk_kda.bwd", "chunk_gdn.fwd", "chunk_gdn.bwd"; ops/common/variant.h,
// docs/environment.md). The default choice is the first entry that supports the call; the forwards' first entry
// (sequence_split) takes only the calls it speeds up, and a later one supports every call.
// The tables and their supports() are host code built into every library, so that a refusal reads the
// same with or without CUDA; a launch needs the CUDA backend.
#pragma once
#include <span>

#include "lina/chunk_delta.h"
#include "ops/common/problem.h"
#include "ops/common/variant.h"

namespace lina::detail::delta {

template <class Args>
struct ForwardCall {
  const Problem& p;
  const Args& a;
  const AttentionOutputs& out;
  const ExecOptions& opts;
};

template <class Args>
struct BackwardCall {
  const Problem& p;
  const Args& a;
  const AttentionGradInputs& in;
  const DeltaRuleGrads& g;
  const ExecOptions& opts;
};

std::span<const Variant<ForwardCall<ChunkKdaArgs>>> kda_forward_variants();
std::span<const Variant<ForwardCall<ChunkGdnArgs>>> gdn_forward_variants();
std::span<const Variant<BackwardCall<ChunkKdaArgs>>> kda_backward_variants();
std::span<const Variant<BackwardCall<ChunkGdnArgs>>> gdn_backward_variants();

// The CUDA backend: the variant the caller named (ExecOptions::variant, else LINA_VARIANT), refused by
// name if the site has none of that name or with its reason if it declines; else the table's first.
RunInfo run_cuda(const ForwardCall<ChunkKdaArgs>& call);
RunInfo run_cuda(const ForwardCall<ChunkGdnArgs>& call);
RunInfo run_cuda(const BackwardCall<ChunkKdaArgs>& call);
RunInfo run_cuda(const BackwardCall<ChunkGdnArgs>& call);


}  // namespace lina::detail::delta
