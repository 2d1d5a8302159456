#include "lina/tensor.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "lina/error.h"
#include "ops/common/host_io.h"

namespace lina {

Shape::Shape(std::initializer_list<std::int64_t> d) {
  if (d.size() > kMaxRank) throw_invalid("shape", std::to_string(d.size()) + " dims", "at most 6");
  for (auto x : d) dims[static_cast<std::size_t>(rank++)] = x;
}

Shape Shape::of(const std::vector<std::int64_t>& d) {
  if (d.size() > kMaxRank) throw_invalid("shape", std::to_string(d.size()) + " dims", "at most 6");
  Shape s;
  for (auto x : d) s.dims[static_cast<std::size_t>(s.rank++)] = x;
  return s;
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[static_cast<std::size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[static_cast<std::size_t>(i)] != o.dims[static_cast<std::size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[static_cast<std::size_t>(i)]);
  }
  return s + "]";
}

bool TensorView::is_contiguous() const {
  if (strides.rank != shape.rank) return false;
  std::int64_t expect = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

TensorView TensorView::contiguous(void* data, DType dtype, Shape shape, Device device, int device_index) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.shape = shape;
  t.strides.rank = shape.rank;
  std::int64_t s = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    t.strides.dims[static_cast<std::size_t>(i)] = s;
    s *= shape[i];
  }
  t.device = device;
  t.device_index = device_index;
  return t;
}

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(shape), bytes_(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype)) {}

HostTensor HostTensor::filled(DType dtype, Shape shape, double value) {
  HostTensor t(dtype, shape);
  t.fill(value);
  return t;
}

double HostTensor::get(std::int64_t i) const { return detail::load_element(view(), i); }

void HostTensor::set(std::int64_t i, double value) { detail::store_element(view(), i, value); }

void HostTensor::fill(double value) {
  for (std::int64_t i = 0; i < numel(); ++i) set(i, value);
}

std::vector<double> HostTensor::to_f64() const {
  std::vector<double> out(static_cast<std::size_t>(numel()));
  for (std::int64_t i = 0; i < numel(); ++i) out[static_cast<std::size_t>(i)] = get(i);
  return out;
}

HostTensor HostTensor::cast(DType to) const {
  HostTensor t(to, shape_);
  for (std::int64_t i = 0; i < numel(); ++i) t.set(i, get(i));
  return t;
}

TensorView HostTensor::view() { return TensorView::contiguous(bytes_.data(), dtype_, shape_); }
TensorView HostTensor::view() const {
  return TensorView::contiguous(const_cast<std::byte*>(bytes_.data()), dtype_, shape_);
}

}  // namespace lina
