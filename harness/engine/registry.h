// The op registry: everything the harness knows about an op, and the only way it calls one.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/engine/workload.h"
#include "lina/ops.h"

namespace lina::harness {

enum class Mode { fwd, infer, bwd, fwdbwd };
std::string mode_name(Mode m);
Mode parse_mode(const std::string& s);  // throws invalid_argument naming --modes
const std::vector<Mode>& all_modes();
bool mode_has_forward(Mode m);   // o is produced by the timed call
bool mode_has_backward(Mode m);  // grads are produced by the timed call

// One input tensor: its shape rule over the shape keys, dtype and value transform.
struct InputSpec {
  std::string name;        // q, k, v, g, beta
  std::vector<std::string> rule;  // e.g. {"B","T","HV","K"}
  DType dtype = DType::bf16;
  Transform transform = Transform::randn;
  std::string grad;        // gradient name checked against the reference (dq, ...)
};

// Views of one cell's tensors on one device, from which each op builds its argument struct.
struct Bound {
  std::map<std::string, TensorView> in;  // q, k, v, g, beta
  std::optional<TensorView> cu_seqlens, cu_seqlens_cpu;
  AttentionOutputs out;                   // o (+ final_state when the op's kwargs ask for it)
  AttentionGradInputs grad_in;            // d_o
  std::map<std::string, TensorView> grads;  // dq, dk, dv, dg, dbeta
  // Ops with a state pool (OpSpec::state_pool): the pool [S,HV,K,V] f32, updated in place, and
  // where each sequence's state lives (decode_state.h).
  std::optional<TensorView> state_pool, state_indices, num_accepted_tokens;
  // chunk_kda: safe_gate=True with lower_bound -5 (FLA's registry); false: neither (FLA's KDA layer default,
  // `lina run --safe-gate off`)
  bool kda_safe_gate = true;
};

// Named shape sets of one op: set name -> shape names, in listing order.
using ShapeSets = std::vector<std::pair<std::string, std::vector<std::string>>>;

struct OpSpec {
  std::string name;            // chunk_gla
  std::string category;        // linear_attention
  std::string gate_suite;      // lina_chunk_gla_gate
  std::string source_dir;      // ops/gla: the op library folder of its code and its fp64 reference
  std::string reference_prefix = "reference";  // the files of source_dir that hold the fp64 reference (frozen hashes)
  std::string model_name;      // gla: the name FLA's training-throughput benchmark gives the model (--name)
  std::vector<InputSpec> inputs;
  nlohmann::json fixed_kwargs;  // documented constants of every call (FLA's benchmark kwargs)
  std::vector<std::string> backends{"cuda", "cpu"};
  std::string bytes_model = "minimal-fused-io/1";
  std::string flops_model = "anchors-chunk64/1";
  bool gva = false;             // HV may differ from H
  std::vector<Mode> modes = all_modes();           // what the op runs; other modes are refused by name
  std::vector<Mode> default_modes{Mode::fwd, Mode::fwdbwd};  // `lina run` without --modes
  ShapeSets shape_sets;         // default, cpu, ...: `--shapes <set>` and the backend defaults
  // Decode ops: every call reads and writes a state pool in place (decode_state.h); the timed
  // call is re-seeded before every sample and the pool is checked as "ht".
  bool state_pool = false;

  bool runs(Mode m) const;
  // The members of set `name`, or nullopt when the op has no such set.
  std::optional<std::vector<std::string>> shape_set(const std::string& name) const;
  std::string mode_list() const;  // "fwd, infer, bwd, fwdbwd"

  // Why this op cannot run `keys` on `backend`, or nullopt when it can.
  std::optional<std::string> refuses(const ShapeKeys& keys, Backend backend) const;
  Shape input_shape(const InputSpec& in, const ShapeKeys& keys) const;
  Shape output_shape(const ShapeKeys& keys) const;  // o: [B,T,HV,V]
  // final_state: the forward also writes ht ([N,HV,K,V] f32). State-pool ops: the states read and
  // written (fp32) plus indices, whatever final_state says.
  double bytes(const ShapeKeys& keys, Mode mode, bool final_state = false) const;
  double flops(const ShapeKeys& keys, Mode mode) const;
  double token_heads(const ShapeKeys& keys) const { return static_cast<double>(keys.tokens() * keys.HV); }

  // The op's entry points over a Bound (built from the public API).
  RunInfo (*forward)(const Bound&, ForwardMode, const ExecOptions&) = nullptr;
  RunInfo (*backward)(const Bound&, const ExecOptions&) = nullptr;  // null: forward-only op
  void (*reference_forward)(const Bound&) = nullptr;   // fp64 host reference
  void (*reference_backward)(const Bound&) = nullptr;
  void (*gpu_reference_forward)(const Bound&, void* stream) = nullptr;  // fp32 GPU reference; null: fp64 host
  void (*gpu_reference_backward)(const Bound&, void* stream) = nullptr;
};

const std::vector<OpSpec>& registry();
// Throws lina::Error(invalid_argument, "--op") listing the valid names.
const OpSpec& find_op(const std::string& name);
// The spec named `name`, or nullptr.
const OpSpec* lookup_op(const std::string& name);
// Registered op names in registry order, and as text: "chunk_gla, chunk_kda, chunk_gdn" with
// `last_separator` (", " or " or ") before the last one.
std::vector<std::string> op_names();
std::string op_name_list(const std::string& last_separator = ", ");
// "all" or a comma list (already split) -> specs.
std::vector<const OpSpec*> resolve_ops(const std::vector<std::string>& names);

// Mode names the plan runs for `op`: `requested` (each must be one the op runs; else
// lina::Error(invalid_argument, "--modes") naming the op and its modes), or its defaults when empty.
std::vector<Mode> resolve_modes(const OpSpec& op, const std::vector<std::string>& requested);

// Chunk size the FLOP model assumes: GLA min(64, max(16, next_pow2(T))), delta rules 64.
std::int64_t model_chunk(const OpSpec& op, const ShapeKeys& keys);

nlohmann::json to_json(const OpSpec& op);

}  // namespace lina::harness
