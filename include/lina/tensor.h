// Non-owning strided tensor view, plus an owning host tensor for tests, tools and the CPU backend.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "lina/dtype.h"

namespace lina {

enum class Device : std::uint8_t { cpu, cuda };

inline constexpr int kMaxRank = 6;

struct Shape {
  std::array<std::int64_t, kMaxRank> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> d);
  static Shape of(const std::vector<std::int64_t>& d);
  std::int64_t operator[](int i) const { return dims[static_cast<std::size_t>(i)]; }
  std::int64_t numel() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "[2, 64, 4, 128]"
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  Shape strides;  // in elements
  Device device = Device::cpu;
  int device_index = 0;

  std::int64_t numel() const { return shape.numel(); }
  bool is_contiguous() const;
  bool defined() const { return data != nullptr || shape.numel() == 0; }
  template <class T> T* ptr() const { return static_cast<T*>(data); }

  static TensorView contiguous(void* data, DType dtype, Shape shape, Device device = Device::cpu,
                               int device_index = 0);
};

// Owning, contiguous, host memory. Values are read and written as double regardless of dtype.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);
  static HostTensor filled(DType dtype, Shape shape, double value);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t numel() const { return shape_.numel(); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  std::size_t nbytes() const { return bytes_.size(); }

  double get(std::int64_t flat_index) const;
  void set(std::int64_t flat_index, double value);
  void fill(double value);
  std::vector<double> to_f64() const;
  HostTensor cast(DType to) const;

  TensorView view();
  TensorView view() const;  // const_cast inside: the view itself is how ops read inputs

 private:
  DType dtype_ = DType::f32;
  Shape shape_;
  std::vector<std::byte> bytes_;
};

}  // namespace lina
