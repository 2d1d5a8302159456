// The validated description of one call: sizes, sequences and scale. Backends trust it.
#pragma once
#include <initializer_list>
#include <utility>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lina/chunk_delta.h"
#include "lina/chunk_gla.h"

namespace lina::detail {

// One sequence: rows [row_begin, row_begin + length) of the flattened [B*T] token axis.
struct Sequence {
  std::int64_t row_begin = 0;
  std::int64_t length = 0;
};

enum class OpKind { gla, kda, gdn };

struct Problem {
  OpKind op = OpKind::gla;
  std::int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
  std::int64_t N = 0;  // sequences: B when dense, len(cu_seqlens) - 1 when varlen
  bool varlen = false;
  double scale = 1.0;
  Device device = Device::cpu;
  int device_index = 0;
  std::vector<Sequence> sequences;  // N entries
  std::int64_t group() const { return HV / H; }  // GVA group size G
};

// Exhaustive checks. Each throws lina::Error naming the argument, what was seen, what was expected.
Problem validate_gla(const ChunkGlaArgs& a);
Problem validate_kda(const ChunkKdaArgs& a);
Problem validate_gdn(const ChunkGdnArgs& a);

// Output dtype rule: kernels write the dtype FLA writes (`exact`); the fp64 reference writes f32 or
// f64 host tensors (`reference`).
enum class OutputDTypes { exact, reference };

// out.o: [B,T,HV,V] in `o_dtype`; final_state [N,HV,K,V] f32 (device of q).
void validate_outputs(const Problem& p, const AttentionOutputs& out, DType o_dtype, OutputDTypes rule);
// d_o: [B,T,HV,V] (any float dtype); d_final_state [N,HV,K,V] (any float dtype).
void validate_grad_inputs(const Problem& p, const AttentionGradInputs& in);
void validate_gla_grads(const Problem& p, const ChunkGlaArgs& a, const ChunkGlaGrads& g, OutputDTypes rule);
void validate_delta_grads(const Problem& p, const DeltaRuleArgs& a, const DeltaRuleGrads& g, OutputDTypes rule);

// The fp64 reference runs on host tensors only.
void require_host(const Problem& p);

// Head dims the CUDA backend instantiates.
bool cuda_head_dim_supported(std::int64_t d);

// The CUDA kernels move their tensors as 16-byte vectors (cp.async, uint4 / float4): a data pointer
// that is not 16-byte aligned (a view at an odd element offset) is refused (unsupported) naming the
// tensor, instead of faulting on the device. `kernel` ends the expected text, e.g. " (the CUDA
// chunk_gla kernel)".
using NamedTensor = std::pair<const char*, const TensorView*>;
void require_aligned16(std::initializer_list<NamedTensor> tensors, const std::string& kernel);

// Reads an int32/int64 vector from host or device memory (device via cudaMemcpy when CUDA is built).
std::vector<std::int64_t> read_index_tensor(const TensorView& t);

}  // namespace lina::detail
