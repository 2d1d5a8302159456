// Types shared by every op's front door: outputs, gradients, execution options, run info.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "lina/tensor.h"

namespace lina {

enum class Backend { automatic, cpu, cuda };
std::string backend_name(Backend b);

// training: the forward whose results feed a backward (FLA's forward with requires_grad);
// inference: the forward alone, free to skip anything only the backward needs.
enum class ForwardMode { training, inference };

struct ExecOptions {
  Backend backend = Backend::automatic;  // automatic: the device of q decides
  void* stream = nullptr;                // cudaStream_t for the CUDA backend
  int num_threads = 0;                   // CPU backend; 0 = std::thread::hardware_concurrency()
  // A kernel variant by name (docs/environment.md lists each op's table); empty = the default choice,
  // the first variant that supports the call. A named variant that declines the call is refused.
  std::string variant;
};

// What ran: recorded by the harness with every measurement.
struct RunInfo {
  std::string backend;               // "cpu", "cuda", "reference"
  std::vector<std::string> kernels;  // kernels launched (CUDA) or stages run (CPU)
  std::string variant = {};          // the variant table entry that ran ("" where the op has one implementation)
};

// Forward outputs. o: [B,T,H(V),V]. final_state present <=> output_final_state: [N,H(V),K,V] f32.
struct AttentionOutputs {
  TensorView o;
  std::optional<TensorView> final_state;
};

// Backward inputs: do = dL/do, d_final_state = dL/d final_state (absent = 0).
struct AttentionGradInputs {
  TensorView d_o;
  std::optional<TensorView> d_final_state;
};

}  // namespace lina
