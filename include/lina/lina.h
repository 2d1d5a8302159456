// lina: linear-attention kernels for Hopper. One include for the whole public API.
#pragma once
#include "lina/chunk_delta.h"
#include "lina/chunk_gla.h"
#include "lina/dtype.h"
#include "lina/error.h"
#include "lina/fused_recurrent.h"
#include "lina/gpu_reference.h"
#include "lina/ops.h"
#include "lina/tensor.h"
#include "lina/version.h"
#include "lina/workspace.h"
