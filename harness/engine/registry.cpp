#include "harness/engine/registry.h"

#include <algorithm>

#include "harness/engine/decode_state.h"
#include "lina/lina.h"

namespace lina::harness {

std::string mode_name(Mode m) {
  switch (m) {
    case Mode::fwd: return "fwd";
    case Mode::infer: return "infer";
    case Mode::bwd: return "bwd";
    case Mode::fwdbwd: return "fwdbwd";
  }
  return "?";
}

const std::vector<Mode>& all_modes() {
  static const std::vector<Mode> m{Mode::fwd, Mode::infer, Mode::bwd, Mode::fwdbwd};
  return m;
}

Mode parse_mode(const std::string& s) {
  for (Mode m : all_modes())
    if (mode_name(m) == s) return m;
  throw_invalid("--modes", "'" + s + "'", "one of fwd, infer, bwd, fwdbwd");
}

bool mode_has_forward(Mode m) { return m != Mode::bwd; }
bool mode_has_backward(Mode m) { return m == Mode::bwd || m == Mode::fwdbwd; }

namespace {

template <class Args = ChunkGlaArgs>
Args gla_args(const Bound& b) {
  Args a;
  a.q = b.in.at("q");
  a.k = b.in.at("k");
  a.v = b.in.at("v");
  a.g = b.in.at("g");
  a.cu_seqlens = b.cu_seqlens;
  a.cu_seqlens_cpu = b.cu_seqlens_cpu;
  return a;
}
ChunkGlaGrads gla_grads(const Bound& b) {
  return ChunkGlaGrads{b.grads.at("dq"), b.grads.at("dk"), b.grads.at("dv"), b.grads.at("dg"), std::nullopt};
}

template <class Args>
Args delta_args(const Bound& b) {
  Args a;
  a.q = b.in.at("q");
  a.k = b.in.at("k");
  a.v = b.in.at("v");
  a.g = b.in.at("g");
  a.beta = b.in.at("beta");
  a.cu_seqlens = b.cu_seqlens;
  a.cu_seqlens_cpu = b.cu_seqlens_cpu;
  a.use_qk_l2norm_in_kernel = true;
  return a;
}
ChunkKdaArgs kda_args(const Bound& b) {
  auto a = delta_args<ChunkKdaArgs>(b);
  if (b.kda_safe_gate) {
    a.safe_gate = true;
    a.lower_bound = -5.0;
  }
  return a;
}
DeltaRuleGrads delta_grads(const Bound& b) {
  DeltaRuleGrads g;
  g.dq = b.grads.at("dq");
  g.dk = b.grads.at("dk");
  g.dv = b.grads.at("dv");
  g.dg = b.grads.at("dg");
  g.dbeta = b.grads.at("dbeta");
  return g;
}

// The six entry points an OpSpec carries, bound once for every op from its traits: how a Bound
// becomes the op's argument and gradient structs, and the op's public, reference and GPU-reference
// functions.
template <class Op>
void bind_entry_points(OpSpec& s) {
  s.forward = [](const Bound& b, ForwardMode m, const ExecOptions& o) { return Op::forward(Op::args(b), b.out, m, o); };
  s.backward = [](const Bound& b, const ExecOptions& o) { return Op::backward(Op::args(b), b.grad_in, Op::grads(b), o); };
  s.reference_forward = [](const Bound& b) { Op::reference_forward(Op::args(b), b.out); };
  s.reference_backward = [](const Bound& b) { Op::reference_backward(Op::args(b), b.grad_in, Op::grads(b)); };
  s.gpu_reference_forward = [](const Bound& b, void* st) { Op::gpu_reference_forward(Op::args(b), b.out, st); };
  s.gpu_reference_backward = [](const Bound& b, void* st) {
    Op::gpu_reference_backward(Op::args(b), b.grad_in, Op::grads(b), st);
  };
}

// Per-op traits: how a Bound becomes the op's argument and gradient structs, and its entry points.
#define LINA_OP_ENTRY_POINTS(NAME)                                                        \
  static constexpr auto forward = &lina::NAME##_forward;                                  \
  static constexpr auto backward = &lina::NAME##_backward;                                \
  static constexpr auto reference_forward = &reference::NAME##_forward;                   \
  static constexpr auto reference_backward = &reference::NAME##_backward;                 \
  static constexpr auto gpu_reference_forward = &gpu_reference::NAME##_forward;           \
  static constexpr auto gpu_reference_backward = &gpu_reference::NAME##_backward;
struct GlaOp {
  static ChunkGlaArgs args(const Bound& b) { return gla_args(b); }
  static ChunkGlaGrads grads(const Bound& b) { return gla_grads(b); }
  LINA_OP_ENTRY_POINTS(chunk_gla)
};
struct KdaOp {
  static ChunkKdaArgs args(const Bound& b) { return kda_args(b); }
  static DeltaRuleGrads grads(const Bound& b) { return delta_grads(b); }
  LINA_OP_ENTRY_POINTS(chunk_kda)
};
struct GdnOp {
  static ChunkGdnArgs args(const Bound& b) { return delta_args<ChunkGdnArgs>(b); }
  static DeltaRuleGrads grads(const Bound& b) { return delta_grads(b); }
  LINA_OP_ENTRY_POINTS(chunk_gdn)
};
#undef LINA_OP_ENTRY_POINTS

// Decode ops: the chunk op's arguments plus the serving form's state pool, updated in place.
template <class Args>
Args with_state_pool(Args a, const Bound& b) {
  a.initial_state = b.state_pool;
  a.decode.state_indices = b.state_indices;
  a.decode.num_accepted_tokens = b.num_accepted_tokens;
  a.decode.inplace_final_state = true;
  return a;
}

// Forward only, and no GPU reference: cells on the GPU are checked against the fp64 host reference.
template <class Op>
void bind_decode_entry_points(OpSpec& s) {
  s.forward = [](const Bound& b, ForwardMode, const ExecOptions& o) { return Op::forward(Op::args(b), b.out, o); };
  s.reference_forward = [](const Bound& b) { Op::reference_forward(Op::args(b), b.out); };
}

#define LINA_DECODE_ENTRY_POINTS(NAME)                                 \
  static constexpr auto forward = &lina::NAME##_forward;               \
  static constexpr auto reference_forward = &reference::NAME##_forward;
struct RecurrentGlaOp {
  static FusedRecurrentGlaArgs args(const Bound& b) { return with_state_pool(gla_args<FusedRecurrentGlaArgs>(b), b); }
  LINA_DECODE_ENTRY_POINTS(fused_recurrent_gla)
};
struct RecurrentKdaOp {
  static FusedRecurrentKdaArgs args(const Bound& b) { return with_state_pool(delta_args<FusedRecurrentKdaArgs>(b), b); }
  LINA_DECODE_ENTRY_POINTS(fused_recurrent_kda)
};
struct RecurrentGdnOp {
  static FusedRecurrentGdnArgs args(const Bound& b) { return with_state_pool(delta_args<FusedRecurrentGdnArgs>(b), b); }
  LINA_DECODE_ENTRY_POINTS(fused_recurrent_gdn)
};
#undef LINA_DECODE_ENTRY_POINTS

ShapeSets chunk_shape_sets() {
  ShapeSets sets;
  for (const auto& name : shape_set_names()) sets.emplace_back(name, *shape_set(name));
  return sets;
}

OpSpec make_gla() {
  OpSpec s;
  s.name = "chunk_gla";
  s.category = "linear_attention";
  s.gate_suite = "lina_chunk_gla_gate";
  s.source_dir = "ops/gla";
  s.model_name = "gla";
  s.inputs = {{"q", {"B", "T", "H", "K"}, DType::bf16, Transform::randn, "dq"},
              {"k", {"B", "T", "H", "K"}, DType::bf16, Transform::randn, "dk"},
              {"v", {"B", "T", "H", "V"}, DType::bf16, Transform::randn, "dv"},
              {"g", {"B", "T", "H", "K"}, DType::bf16, Transform::logsigmoid_clamp5, "dg"}};
  s.fixed_kwargs = {{"scale", nullptr}, {"initial_state", nullptr}, {"output_final_state", false}};
  s.shape_sets = chunk_shape_sets();
  bind_entry_points<GlaOp>(s);
  return s;
}

std::vector<InputSpec> delta_inputs(const std::vector<std::string>& g_rule) {
  return {{"q", {"B", "T", "H", "K"}, DType::bf16, Transform::randn, "dq"},
          {"k", {"B", "T", "H", "K"}, DType::bf16, Transform::randn, "dk"},
          {"v", {"B", "T", "HV", "V"}, DType::bf16, Transform::randn, "dv"},
          {"g", g_rule, DType::bf16, Transform::logsigmoid, "dg"},
          {"beta", {"B", "T", "HV"}, DType::bf16, Transform::sigmoid, "dbeta"}};
}

OpSpec make_kda() {
  OpSpec s;
  s.name = "chunk_kda";
  s.category = "linear_attention";
  s.gate_suite = "lina_chunk_kda_gate";
  s.source_dir = "ops/delta";
  s.model_name = "kda";
  s.gva = true;
  s.inputs = delta_inputs({"B", "T", "HV", "K"});
  s.fixed_kwargs = {{"scale", nullptr},          {"initial_state", nullptr}, {"output_final_state", false},
                    {"use_qk_l2norm_in_kernel", true}, {"safe_gate", true},       {"lower_bound", -5.0}};
  s.shape_sets = chunk_shape_sets();
  bind_entry_points<KdaOp>(s);
  return s;
}

OpSpec make_gdn() {
  OpSpec s;
  s.name = "chunk_gdn";
  s.category = "linear_attention";
  s.gate_suite = "lina_chunk_gdn_gate";
  s.source_dir = "ops/delta";
  s.model_name = "gdn";
  s.gva = true;
  s.inputs = delta_inputs({"B", "T", "HV"});
  s.fixed_kwargs = {{"scale", nullptr}, {"initial_state", nullptr}, {"output_final_state", false}, {"use_qk_l2norm_in_kernel", true}};
  s.shape_sets = chunk_shape_sets();
  bind_entry_points<GdnOp>(s);
  return s;
}

// Decode shape sets: batch 1 to 1024 at one model's state size (H, HV, D), speculative steps
// (T = 2..4, [N,T] state indices) and the other head dims the CUDA backend takes, all T = 1 unless
// named; `cpu`: small enough for the CPU backend and the fp64 check in well under a second.
ShapeSets decode_shape_sets(std::int64_t H, std::int64_t HV, const std::vector<std::string>& cpu) {
  std::vector<std::string> batch, spec, dims;
  for (std::int64_t B : {1, 8, 64, 256, 1024}) batch.push_back(dense_name(B, 1, H, 128, HV));
  for (std::int64_t T : {2, 3, 4}) spec.push_back(dense_name(64, T, H, 128, HV));
  spec.push_back(dense_name(256, 2, H, 128, HV));
  for (std::int64_t D : {64, 256}) dims.push_back(dense_name(64, 1, H, D, HV));
  std::vector<std::string> all = batch;
  all.insert(all.end(), spec.begin(), spec.end());
  all.insert(all.end(), dims.begin(), dims.end());
  return {{"default", all}, {"batch", batch}, {"spec", spec}, {"dims", dims}, {"cpu", cpu}};
}

OpSpec decode_op(OpSpec chunk, const std::string& name) {
  OpSpec s = std::move(chunk);
  s.name = name;
  s.category = "linear_attention_decode";
  s.gate_suite = "lina_" + name + "_gate";
  s.source_dir = "ops/recurrent";
  s.reference_prefix = "host_recurrence";  // the fp64 reference and the CPU backend are one template
  s.model_name.clear();
  s.modes = {Mode::infer};
  s.default_modes = {Mode::infer};
  s.state_pool = true;
  s.bytes_model = "state-pool-io/1";
  s.flops_model = "recurrent-step/1";
  // The serving form: the state pool and its indices replace initial_state / output_final_state.
  s.fixed_kwargs.erase("initial_state");
  s.fixed_kwargs.erase("output_final_state");
  s.fixed_kwargs.erase("safe_gate");  // fused_recurrent_kda has no chunk: safe_gate changes nothing
  s.fixed_kwargs.erase("lower_bound");
  s.fixed_kwargs["initial_state"] = "state pool [S,HV,K,V] float32";
  s.fixed_kwargs["ssm_state_indices"] = "int32 [N] (T = 1, varlen) or [N,T], a seeded permutation of the S slots";
  s.fixed_kwargs["num_accepted_tokens"] = "int32 [N] in [1, T] with [N,T] indices, else None";
  s.fixed_kwargs["inplace_final_state"] = true;
  s.forward = nullptr;
  s.backward = nullptr;
  s.reference_forward = nullptr;
  s.reference_backward = nullptr;
  s.gpu_reference_forward = nullptr;
  s.gpu_reference_backward = nullptr;
  return s;
}

// GLA: FLA's GLA-1.3B (hidden 2048, 4 heads, expand_k 0.5) has K = 256, V = 512, beyond the decode
// kernels' head dims; the sets use the same hidden size as 16 heads of 128.
OpSpec make_recurrent_gla() {
  OpSpec s = decode_op(make_gla(), "fused_recurrent_gla");
  s.shape_sets = decode_shape_sets(16, 16, {"B1_T1_H2_D64", "B4_T1_H2_D64", "B3_T3_H2_D64"});
  s.fixed_kwargs["reverse"] = false;
  bind_decode_entry_points<RecurrentGlaOp>(s);
  return s;
}

// KDA: Kimi-Linear (32 heads of 128, HV = H).
OpSpec make_recurrent_kda() {
  OpSpec s = decode_op(make_kda(), "fused_recurrent_kda");
  s.shape_sets = decode_shape_sets(32, 32, {"B1_T1_H2_D64", "B4_T1_H2_D64_HV4", "B3_T3_H2_D64_HV4"});
  bind_decode_entry_points<RecurrentKdaOp>(s);
  return s;
}

// GDN: Qwen3-Next (16 query/key heads, 32 value heads, 128 each).
OpSpec make_recurrent_gdn() {
  OpSpec s = decode_op(make_gdn(), "fused_recurrent_gdn");
  s.shape_sets = decode_shape_sets(16, 32, {"B1_T1_H2_D64", "B4_T1_H2_D64_HV4", "B3_T3_H2_D64_HV4"});
  bind_decode_entry_points<RecurrentGdnOp>(s);
  return s;
}

std::int64_t key_value(const ShapeKeys& k, const std::string& name) {
  if (name == "B") return k.B;
  if (name == "T") return k.T;
  if (name == "H") return k.H;
  if (name == "HV") return k.HV;
  if (name == "K") return k.K;
  if (name == "V") return k.V;
  throw_invalid("shape rule", name, "one of B, T, H, HV, K, V");
}

}  // namespace

const std::vector<OpSpec>& registry() {
  static const std::vector<OpSpec> ops{make_gla(),           make_kda(),           make_gdn(),
                                       make_recurrent_gla(), make_recurrent_kda(), make_recurrent_gdn()};
  return ops;
}

const OpSpec& find_op(const std::string& name) {
  for (const auto& op : registry())
    if (op.name == name) return op;
  std::string valid;
  for (const auto& op : registry()) valid += (valid.empty() ? "" : ", ") + op.name;
  throw_invalid("--op", "'" + name + "'", "one of " + valid + " (or all)");
}

const OpSpec* lookup_op(const std::string& name) {
  for (const auto& op : registry())
    if (op.name == name) return &op;
  return nullptr;
}

std::vector<std::string> op_names() {
  std::vector<std::string> out;
  for (const auto& op : registry()) out.push_back(op.name);
  return out;
}

std::string op_name_list(const std::string& last_separator) {
  const auto names = op_names();
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? last_separator : ", ") + names[i];
  return out;
}

std::vector<const OpSpec*> resolve_ops(const std::vector<std::string>& names) {
  std::vector<const OpSpec*> out;
  for (const auto& n : names) {
    if (n == "all") {
      for (const auto& op : registry()) out.push_back(&op);
      continue;
    }
    const OpSpec* op = &find_op(n);
    if (std::find(out.begin(), out.end(), op) == out.end()) out.push_back(op);
  }
  if (out.empty()) throw_invalid("--op", "nothing", "an op name or all");
  return out;
}

bool OpSpec::runs(Mode m) const { return std::find(modes.begin(), modes.end(), m) != modes.end(); }

std::optional<std::vector<std::string>> OpSpec::shape_set(const std::string& set) const {
  for (const auto& [n, members] : shape_sets)
    if (n == set) return members;
  return std::nullopt;
}

std::string OpSpec::mode_list() const {
  std::string out;
  for (Mode m : modes) out += (out.empty() ? "" : ", ") + mode_name(m);
  return out;
}

std::vector<Mode> resolve_modes(const OpSpec& op, const std::vector<std::string>& requested) {
  if (requested.empty()) return op.default_modes;
  std::vector<Mode> out;
  for (const auto& name : requested) {
    const Mode m = parse_mode(name);
    if (!op.runs(m))
      throw_invalid("--modes", "'" + name + "' for " + op.name,
                    op.mode_list() + (op.backward ? "" : " (" + op.name + " is forward only: it has no backward)"));
    out.push_back(m);
  }
  return out;
}

std::optional<std::string> OpSpec::refuses(const ShapeKeys& k, Backend backend) const {
  if (!gva && k.HV != k.H) return name + " has no GVA: HV must equal H, seen H=" + std::to_string(k.H) + " HV=" + std::to_string(k.HV);
  if (k.HV % k.H != 0) return "HV % H == 0 is required, seen H=" + std::to_string(k.H) + " HV=" + std::to_string(k.HV);
  if (k.varlen && k.B != 1) return "varlen requires B == 1";
  const auto dims = "K=" + std::to_string(k.K) + " V=" + std::to_string(k.V);
  if (backend == Backend::cuda) {
    const auto ok = [](std::int64_t d) { return d == 64 || d == 128 || d == 256; };
    if (!ok(k.K) || !ok(k.V)) return "the cuda backend takes head dims 64, 128, 256, seen " + dims;
  }
  // FLA asserts K <= 256 for the delta rules; the decode ops keep one state of K x V per program.
  const std::int64_t max_dim = gva || state_pool ? 256 : 1024;
  if (k.K > max_dim || k.V > max_dim) return name + " takes head dims up to " + std::to_string(max_dim) + ", seen " + dims;
  return std::nullopt;
}

Shape OpSpec::input_shape(const InputSpec& in, const ShapeKeys& k) const {
  std::vector<std::int64_t> d;
  for (const auto& r : in.rule) d.push_back(key_value(k, r));
  return Shape::of(d);
}

Shape OpSpec::output_shape(const ShapeKeys& k) const { return Shape{k.B, k.T, k.HV, k.V}; }

std::int64_t model_chunk(const OpSpec& op, const ShapeKeys& k) {
  if (op.name != "chunk_gla") return 64;
  std::int64_t p = 1;
  while (p < k.T) p <<= 1;
  return std::min<std::int64_t>(64, std::max<std::int64_t>(16, p));
}

// Minimal ("fully fused") traffic: each input read once, each output written once (docs/math.md section 7).
// State-pool ops: each sequence's state read once and every state the call stores written once (fp32),
// plus the indices: at large batch the state is nearly all of it, so achieved GB/s against the HBM
// ceiling is the fraction of the floor that reading and writing the state sets.
double OpSpec::bytes(const ShapeKeys& k, Mode mode, bool final_state) const {
  double in_bytes = 0;
  for (const auto& in : inputs) in_bytes += static_cast<double>(input_shape(in, k).numel() * dtype_size(in.dtype));
  const double o_bytes = static_cast<double>(output_shape(k).numel() * dtype_size(DType::bf16));
  const double state = 4.0 * static_cast<double>(k.HV * k.K * k.V);
  double ht_bytes = final_state ? state * static_cast<double>(k.num_seqs) : 0;
  if (state_pool) {
    const StatePoolLayout l = state_pool_layout(k);
    const double index_bytes = 4.0 * static_cast<double>(l.states_written() + (l.indices_per_seq ? l.num_seqs : 0));
    ht_bytes = state * static_cast<double>(l.num_seqs + l.states_written()) + index_bytes;
  }
  const double fwd = in_bytes + o_bytes + ht_bytes;  // read inputs, write o (and ht)
  const double bwd = in_bytes + o_bytes + in_bytes;  // read inputs and do, write one grad per input
  switch (mode) {
    case Mode::fwd:
    case Mode::infer: return fwd;
    case Mode::bwd: return bwd;
    case Mode::fwdbwd: return fwd + bwd;
  }
  return 0;
}

// Per token and value head, one multiply-add = 2 FLOPs. Forward: the anchors' formulas
// (GLA 4KV + 2CK + 2CV; KDA/GDN 6KV + 6CK + 4CV + C^2); backward: the table of docs/math.md section 7.
// Decode (one recurrent step per token): GLA decay + outer-product update + read, 4KV; the delta
// rules add the k^T S read-out, 6KV.
double OpSpec::flops(const ShapeKeys& k, Mode mode) const {
  const double K = static_cast<double>(k.K), V = static_cast<double>(k.V), C = static_cast<double>(model_chunk(*this, k));
  double f = 0, b = 0;
  if (state_pool) {
    f = (name == "fused_recurrent_gla" ? 4 : 6) * K * V;
  } else if (name == "chunk_gla") {
    f = 4 * K * V + 2 * C * K + 2 * C * V;
    b = 10 * K * V + 4 * C * K + 4 * C * V;
  } else if (name == "chunk_gdn") {
    f = 6 * K * V + 6 * C * K + 4 * C * V + C * C;
    b = 16 * K * V + 18 * C * K + 10 * C * V + 4 * C * C;
  } else {
    f = 6 * K * V + 6 * C * K + 4 * C * V + C * C;
    b = 16 * K * V + 14 * C * K + 10 * C * V + 4 * C * C;
  }
  const double per = mode == Mode::bwd ? b : mode == Mode::fwdbwd ? f + b : f;
  return per * token_heads(k);
}

nlohmann::json to_json(const OpSpec& op) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& in : op.inputs)
    inputs.push_back({{"name", in.name}, {"shape", in.rule}, {"dtype", std::string(dtype_name(in.dtype))},
                      {"transform", transform_text(in.transform)}, {"grad", in.grad}});
  nlohmann::json sets = nlohmann::json::object();
  for (const auto& [set, members] : op.shape_sets) sets[set] = members;
  std::vector<std::string> modes;
  for (Mode m : op.modes) modes.push_back(mode_name(m));
  return {{"name", op.name},
          {"category", op.category},
          {"inputs", inputs},
          {"output", {{"name", "o"}, {"shape", {"B", "T", "HV", "V"}}, {"dtype", "bfloat16"}}},
          {"fixed_kwargs", op.fixed_kwargs},
          {"gva", op.gva},
          {"state_pool", op.state_pool},
          {"shape_sets", sets},
          {"varlen_distributions", varlen_distributions()},
          {"modes", modes},
          {"backends", op.backends},
          {"gate_suite", op.gate_suite},
          {"bytes_model", op.bytes_model},
          {"flops_model", op.flops_model}};
}

}  // namespace lina::harness
