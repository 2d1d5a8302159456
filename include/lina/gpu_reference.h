// GPU fp32 naive-recurrence references (docs/math.md section 2) for checking CUDA results at full size.
// Device tensors in, f32 device tensors out; one thread block per (sequence, value head).
#pragma once
#include "lina/chunk_delta.h"
#include "lina/chunk_gla.h"

namespace lina::gpu_reference {

// Outputs (o, final_state) and grads must be f32 CUDA tensors of the usual shapes.
void chunk_gla_forward(const ChunkGlaArgs& args, const AttentionOutputs& out, void* stream = nullptr);
void chunk_gla_backward(const ChunkGlaArgs& args, const AttentionGradInputs& grad_in, const ChunkGlaGrads& grads,
                        void* stream = nullptr);
void chunk_kda_forward(const ChunkKdaArgs& args, const AttentionOutputs& out, void* stream = nullptr);
void chunk_kda_backward(const ChunkKdaArgs& args, const AttentionGradInputs& grad_in, const DeltaRuleGrads& grads,
                        void* stream = nullptr);
void chunk_gdn_forward(const ChunkGdnArgs& args, const AttentionOutputs& out, void* stream = nullptr);
void chunk_gdn_backward(const ChunkGdnArgs& args, const AttentionGradInputs& grad_in, const DeltaRuleGrads& grads,
                        void* stream = nullptr);

}  // namespace lina::gpu_reference
