#include "harness/engine/registry.h"

#include <algorithm>

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

ChunkGlaArgs gla_args(const Bound& b) {
  ChunkGlaArgs a;
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
  a.safe_gate = true;
  a.lower_bound = -5.0;
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
  bind_entry_points<GdnOp>(s);
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
  static const std::vector<OpSpec> ops{make_gla(), make_kda(), make_gdn()};
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

std::optional<std::string> OpSpec::refuses(const ShapeKeys& k, Backend backend) const {
  if (!gva && k.HV != k.H) return name + " has no GVA: HV must equal H, seen H=" + std::to_string(k.H) + " HV=" + std::to_string(k.HV);
  if (k.HV % k.H != 0) return "HV % H == 0 is required, seen H=" + std::to_string(k.H) + " HV=" + std::to_string(k.HV);
  if (k.varlen && k.B != 1) return "varlen requires B == 1";
  const auto dims = "K=" + std::to_string(k.K) + " V=" + std::to_string(k.V);
  if (backend == Backend::cuda) {
    const auto ok = [](std::int64_t d) { return d == 64 || d == 128 || d == 256; };
    if (!ok(k.K) || !ok(k.V)) return "the cuda backend takes head dims 64, 128, 256, seen " + dims;
  }
  const std::int64_t max_dim = gva ? 256 : 1024;  // FLA asserts K <= 256 for the delta rules
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
double OpSpec::bytes(const ShapeKeys& k, Mode mode, bool final_state) const {
  double in_bytes = 0;
  for (const auto& in : inputs) in_bytes += static_cast<double>(input_shape(in, k).numel() * dtype_size(in.dtype));
  const double o_bytes = static_cast<double>(output_shape(k).numel() * dtype_size(DType::bf16));
  const double ht_bytes = final_state ? 4.0 * static_cast<double>(k.num_seqs * k.HV * k.K * k.V) : 0;
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
double OpSpec::flops(const ShapeKeys& k, Mode mode) const {
  const double K = static_cast<double>(k.K), V = static_cast<double>(k.V), C = static_cast<double>(model_chunk(*this, k));
  double f = 0, b = 0;
  if (name == "chunk_gla") {
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
  for (const auto& s : shape_set_names()) sets[s] = *shape_set(s);
  std::vector<std::string> modes;
  for (Mode m : all_modes()) modes.push_back(mode_name(m));
  return {{"name", op.name},
          {"category", op.category},
          {"inputs", inputs},
          {"output", {{"name", "o"}, {"shape", {"B", "T", "HV", "V"}}, {"dtype", "bfloat16"}}},
          {"fixed_kwargs", op.fixed_kwargs},
          {"gva", op.gva},
          {"shape_sets", sets},
          {"varlen_distributions", varlen_distributions()},
          {"modes", modes},
          {"backends", op.backends},
          {"gate_suite", op.gate_suite},
          {"bytes_model", op.bytes_model},
          {"flops_model", op.flops_model}};
}

}  // namespace lina::harness
