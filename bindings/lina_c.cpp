// The C ABI behind bindings/lina_c.h: names -> argument structs -> the public C++ API.
#include "bindings/lina_c.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "lina/lina.h"

namespace {

using lina::TensorView;
using Named = std::map<std::string, TensorView>;

TensorView to_view(const lina_c_tensor& t) {
  if (t.rank < 0 || t.rank > lina::kMaxRank) lina::throw_invalid(t.name ? t.name : "?", "rank " + std::to_string(t.rank), "0..6");
  if (t.dtype < 0 || t.dtype > LINA_I64) lina::throw_invalid(t.name ? t.name : "?", "dtype code " + std::to_string(t.dtype), "0..5");
  lina::Shape s;
  for (int i = 0; i < t.rank; ++i) s.dims[static_cast<std::size_t>(i)] = t.shape[i];
  s.rank = t.rank;
  return TensorView::contiguous(t.data, static_cast<lina::DType>(t.dtype), s,
                                t.device == LINA_CUDA ? lina::Device::cuda : lina::Device::cpu, t.device_index);
}

const TensorView& need(const Named& m, const std::string& name) {
  auto it = m.find(name);
  if (it == m.end()) lina::throw_invalid(name, "no tensor", "a tensor named `" + name + "`");
  return it->second;
}

std::optional<TensorView> maybe(const Named& m, const std::string& name) {
  auto it = m.find(name);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

template <class T>
std::optional<T> kw(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<T>();
}

lina::ExecOptions exec_options(const nlohmann::json& kw_json, void* stream) {
  lina::ExecOptions o;
  o.stream = stream;
  if (auto b = kw<std::string>(kw_json, "backend")) {
    if (*b == "cpu") o.backend = lina::Backend::cpu;
    else if (*b == "cuda") o.backend = lina::Backend::cuda;
    else if (*b != "auto") lina::throw_invalid("backend", "'" + *b + "'", "cpu, cuda or auto");
  }
  if (auto n = kw<int>(kw_json, "num_threads")) o.num_threads = *n;
  return o;
}

lina::AttentionOutputs outputs(const Named& m) { return {need(m, "o"), maybe(m, "final_state")}; }
lina::AttentionGradInputs grad_inputs(const Named& m) { return {need(m, "do"), maybe(m, "dht")}; }

void fill_delta(lina::DeltaRuleArgs& a, const Named& m, const nlohmann::json& j) {
  a.q = need(m, "q"); a.k = need(m, "k"); a.v = need(m, "v"); a.g = need(m, "g"); a.beta = need(m, "beta");
  a.scale = kw<double>(j, "scale");
  a.initial_state = maybe(m, "initial_state");
  a.cu_seqlens = maybe(m, "cu_seqlens");
  a.cu_seqlens_cpu = maybe(m, "cu_seqlens_cpu");
  a.use_qk_l2norm_in_kernel = kw<bool>(j, "use_qk_l2norm_in_kernel").value_or(false);
  a.use_beta_sigmoid_in_kernel = kw<bool>(j, "use_beta_sigmoid_in_kernel").value_or(false);
  a.allow_neg_eigval = kw<bool>(j, "allow_neg_eigval").value_or(false);
  a.use_gate_in_kernel = kw<bool>(j, "use_gate_in_kernel").value_or(false);
  a.A_log = maybe(m, "A_log");
  a.dt_bias = maybe(m, "dt_bias");
}

lina::DeltaRuleGrads delta_grads(const Named& m) {
  return {need(m, "dq"), need(m, "dk"), need(m, "dv"), need(m, "dg"), need(m, "dbeta"),
          maybe(m, "dh0"), maybe(m, "dA_log"), maybe(m, "ddt_bias")};
}

lina::RunInfo dispatch(const std::string& op, const std::string& phase, const Named& m, const nlohmann::json& j, void* stream) {
  const lina::ExecOptions opts = exec_options(j, stream);
  const bool fwd = phase == "forward" || phase == "inference";
  const lina::ForwardMode mode = phase == "inference" ? lina::ForwardMode::inference : lina::ForwardMode::training;
  lina::RunInfo info;
  if (op == "chunk_gla") {
    lina::ChunkGlaArgs a{need(m, "q"), need(m, "k"), need(m, "v"), need(m, "g"), kw<double>(j, "scale"),
                         maybe(m, "initial_state"), maybe(m, "cu_seqlens"), maybe(m, "cu_seqlens_cpu")};
    if (fwd) return lina::chunk_gla_forward(a, outputs(m), mode, opts);
    lina::ChunkGlaGrads g{need(m, "dq"), need(m, "dk"), need(m, "dv"), need(m, "dg"), maybe(m, "dh0")};
    if (phase == "backward") return lina::chunk_gla_backward(a, grad_inputs(m), g, opts);
    if (phase == "reference_forward") lina::reference::chunk_gla_forward(a, outputs(m));
    else if (phase == "reference_backward") lina::reference::chunk_gla_backward(a, grad_inputs(m), g);
    else if (phase == "gpu_reference_forward") lina::gpu_reference::chunk_gla_forward(a, outputs(m), stream);
    else if (phase == "gpu_reference_backward") lina::gpu_reference::chunk_gla_backward(a, grad_inputs(m), g, stream);
    else lina::throw_invalid("phase", "'" + phase + "'", "forward, inference, backward, reference_forward, reference_backward, gpu_reference_forward or gpu_reference_backward");
    info.backend = "reference";
    return info;
  }
  if (op == "chunk_kda") {
    lina::ChunkKdaArgs a;
    fill_delta(a, m, j);
    a.lower_bound = kw<double>(j, "lower_bound");
    a.safe_gate = kw<bool>(j, "safe_gate").value_or(false);
    if (fwd) return lina::chunk_kda_forward(a, outputs(m), mode, opts);
    if (phase == "backward") return lina::chunk_kda_backward(a, grad_inputs(m), delta_grads(m), opts);
    if (phase == "reference_forward") lina::reference::chunk_kda_forward(a, outputs(m));
    else if (phase == "reference_backward") lina::reference::chunk_kda_backward(a, grad_inputs(m), delta_grads(m));
    else if (phase == "gpu_reference_forward") lina::gpu_reference::chunk_kda_forward(a, outputs(m), stream);
    else if (phase == "gpu_reference_backward") lina::gpu_reference::chunk_kda_backward(a, grad_inputs(m), delta_grads(m), stream);
    else lina::throw_invalid("phase", "'" + phase + "'", "a known phase");
    info.backend = "reference";
    return info;
  }
  if (op == "chunk_gdn") {
    lina::ChunkGdnArgs a;
    fill_delta(a, m, j);
    if (fwd) return lina::chunk_gdn_forward(a, outputs(m), mode, opts);
    if (phase == "backward") return lina::chunk_gdn_backward(a, grad_inputs(m), delta_grads(m), opts);
    if (phase == "reference_forward") lina::reference::chunk_gdn_forward(a, outputs(m));
    else if (phase == "reference_backward") lina::reference::chunk_gdn_backward(a, grad_inputs(m), delta_grads(m));
    else if (phase == "gpu_reference_forward") lina::gpu_reference::chunk_gdn_forward(a, outputs(m), stream);
    else if (phase == "gpu_reference_backward") lina::gpu_reference::chunk_gdn_backward(a, grad_inputs(m), delta_grads(m), stream);
    else lina::throw_invalid("phase", "'" + phase + "'", "a known phase");
    info.backend = "reference";
    return info;
  }
  lina::throw_invalid("op", "'" + op + "'", "chunk_gla, chunk_kda or chunk_gdn");
}

void copy_out(char* dst, std::size_t len, const std::string& s) {
  if (dst == nullptr || len == 0) return;
  std::snprintf(dst, len, "%s", s.c_str());
}

}  // namespace

extern "C" int lina_c_call(const char* op, const char* phase, const lina_c_tensor* tensors, int num_tensors,
                           const char* kwargs_json, void* stream, char* err, size_t err_len, char* kernels_out,
                           size_t kernels_len) {
  try {
    if (op == nullptr || phase == nullptr) lina::throw_invalid("op", "NULL", "an op and a phase name");
    Named named;
    for (int i = 0; i < num_tensors; ++i) {
      if (tensors[i].name == nullptr) lina::throw_invalid("tensors", "an unnamed tensor at index " + std::to_string(i), "a name");
      named[tensors[i].name] = to_view(tensors[i]);
    }
    const nlohmann::json j = (kwargs_json && *kwargs_json) ? nlohmann::json::parse(kwargs_json) : nlohmann::json::object();
    const lina::RunInfo info = dispatch(op, phase, named, j, stream);
    std::string names;
    for (const auto& k : info.kernels) names += (names.empty() ? "" : ",") + k;
    copy_out(kernels_out, kernels_len, names);
    copy_out(err, err_len, "");
    return 0;
  } catch (const lina::Error& e) {
    copy_out(err, err_len, e.what());
    return e.code() == lina::ErrorCode::runtime ? 1 : 2;
  } catch (const nlohmann::json::exception& e) {
    copy_out(err, err_len, std::string("argument `kwargs_json`: ") + e.what());
    return 2;
  } catch (const std::exception& e) {
    copy_out(err, err_len, e.what());
    return 1;
  }
}

extern "C" const char* lina_c_version(void) { return lina::kVersion; }
extern "C" int lina_c_cuda_device_count(void) { return lina::cuda_device_count(); }

extern "C" int lina_c_workspace_stats(uint64_t* reserved, uint64_t* used, uint64_t* used_high) {
  try {
    const lina::WorkspaceStats s = lina::workspace_stats();
    if (reserved) *reserved = s.reserved_bytes;
    if (used) *used = s.used_bytes;
    if (used_high) *used_high = s.used_high_bytes;
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}
extern "C" int lina_c_workspace_reset_high_water(void) {
  try {
    lina::reset_workspace_high_water();
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}
extern "C" int lina_c_workspace_release(void) {
  try {
    lina::release_workspace();
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}
