// lina's ops as PyTorch operators (namespace `lina`): schemas, CPU and CUDA kernels, Meta kernels.
#include <torch/library.h>

TORCH_LIBRARY(lina, m) {}
