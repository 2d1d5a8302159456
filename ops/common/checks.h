// The argument checks every front door composes (ops/common/validate.cpp). Each throws lina::Error naming
// the argument, what was seen and what was expected.
#pragma once
#include <initializer_list>
#include <string>

#include "lina/tensor.h"
#include "ops/common/problem.h"

namespace lina::detail {

std::string device_str(const TensorView& t);  // "cpu", "cuda:0"
void require_defined(const std::string& name, const TensorView& t);
// Contiguous and on the device of q (p.device).
void require_layout(const std::string& name, const TensorView& t, const Problem& p);
void require_shape(const std::string& name, const TensorView& t, const Shape& expected, const std::string& meaning);
void require_dtype(const std::string& name, const TensorView& t, std::initializer_list<DType> allowed);
// `exact`: the dtype FLA writes; `reference`: f32 or f64.
void require_float_out(const std::string& name, const TensorView& t, DType exact, OutputDTypes rule);

}  // namespace lina::detail
