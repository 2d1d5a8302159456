#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "harness/util/npy.h"
#include "harness/util/subprocess.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

namespace fs = std::filesystem;

void write_raw(const fs::path& p, const std::string& header_dict, const std::string& data, int version = 1) {
  std::string h = header_dict;
  const std::size_t pre = version == 1 ? 10 : 12;
  while ((pre + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::ofstream f(p, std::ios::binary);
  f.write("\x93NUMPY", 6);
  f.put(static_cast<char>(version));
  f.put(0);
  if (version == 1) {
    f.put(static_cast<char>(h.size() & 0xff));
    f.put(static_cast<char>(h.size() >> 8));
  } else {
    for (int i = 0; i < 4; ++i) f.put(static_cast<char>((h.size() >> (8 * i)) & 0xff));
  }
  f << h << data;
}

std::string expect_error(const fs::path& p, const NpyReadOptions& o = {}) {
  try {
    read_npy(p, o);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(p.filename().string()), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for " << p;
  return "";
}

TEST(Npy, RoundTripsEveryDtype) {
  TempDir d("npy");
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64}) {
    HostTensor x(t, Shape{2, 3, 5});
    for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, static_cast<double>(i) - 7.0 + (is_floating(t) ? 0.5 : 0.0));
    const fs::path p = d.path() / (std::string(dtype_name(t)) + ".npy");
    write_npy(p, x);
    NpyReadOptions o;
    o.u2_is_bf16 = t == DType::bf16;
    const HostTensor y = read_npy(p, o);
    EXPECT_EQ(y.dtype(), t);
    EXPECT_EQ(y.shape(), x.shape());
    for (std::int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y.get(i), x.get(i)) << dtype_name(t) << " " << i;
  }
}

TEST(Npy, RoundTripsRank1AndScalarShapes) {
  TempDir d("npy");
  HostTensor v(DType::i32, Shape{4});
  for (int i = 0; i < 4; ++i) v.set(i, i * 10);
  write_npy(d.path() / "cu.npy", v);
  const HostTensor w = read_npy(d.path() / "cu.npy");
  EXPECT_EQ(w.shape(), Shape{4});
  EXPECT_EQ(w.get(3), 30.0);
}

TEST(Npy, ReadsV2HeadersAndMlDtypesBfloat16) {
  TempDir d("npy");
  const std::uint16_t bits[2] = {float_to_bf16_bits(1.5f), float_to_bf16_bits(-2.0f)};
  write_raw(d.path() / "g.npy", "{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }",
            std::string(reinterpret_cast<const char*>(bits), 4), 2);
  const HostTensor t = read_npy(d.path() / "g.npy");
  EXPECT_EQ(t.dtype(), DType::bf16);
  EXPECT_EQ(t.get(0), 1.5);
  EXPECT_EQ(t.get(1), -2.0);
}

TEST(Npy, Uint16NeedsTheBf16Hint) {
  TempDir d("npy");
  const std::uint16_t bits[1] = {float_to_bf16_bits(3.0f)};
  write_raw(d.path() / "q.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }", std::string(reinterpret_cast<const char*>(bits), 2));
  EXPECT_NE(expect_error(d.path() / "q.npy").find("bf16"), std::string::npos);
  NpyReadOptions o;
  o.u2_is_bf16 = true;
  EXPECT_EQ(read_npy(d.path() / "q.npy", o).get(0), 3.0);
}

TEST(Npy, MalformedFilesNameTheFile) {
  TempDir d("npy");
  expect_error(d.path() / "missing.npy");
  {
    std::ofstream(d.path() / "magic.npy") << "PK\x03\x04 not numpy at all";
  }
  EXPECT_NE(expect_error(d.path() / "magic.npy").find("magic"), std::string::npos);
  write_raw(d.path() / "short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", std::string(8, '\0'));
  EXPECT_NE(expect_error(d.path() / "short.npy").find("needs 16"), std::string::npos);
  write_raw(d.path() / "big.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", std::string(4, '\0'));
  EXPECT_NE(expect_error(d.path() / "big.npy").find(">f4"), std::string::npos);
  write_raw(d.path() / "fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", std::string(4, '\0'));
  EXPECT_NE(expect_error(d.path() / "fortran.npy").find("fortran"), std::string::npos);
  write_raw(d.path() / "noshape.npy", "{'descr': '<f4', 'fortran_order': False, }", std::string(4, '\0'));
  EXPECT_NE(expect_error(d.path() / "noshape.npy").find("shape"), std::string::npos);
  write_raw(d.path() / "badshape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", std::string(8, '\0'));
  expect_error(d.path() / "badshape.npy");
  write_raw(d.path() / "obj.npy", "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0'));
  expect_error(d.path() / "obj.npy");
}

TEST(Npy, HeaderIsAlignedAndParseableByNumpyRules) {
  TempDir d("npy");
  write_npy(d.path() / "x.npy", HostTensor(DType::f32, Shape{3, 1}));
  std::ifstream f(d.path() / "x.npy", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::size_t hl = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + hl) % 64, 0u);
  EXPECT_EQ(bytes[10 + hl - 1], '\n');
  EXPECT_NE(bytes.find("'shape': (3, 1)"), std::string::npos);
}

}  // namespace
}  // namespace lina::harness

namespace lina::harness {
namespace {

// A header shape whose byte count wraps modulo 2^64 to the file's real size must still be refused.
TEST(Npy, ShapesThatOverflowAreRefusedBeforeAllocating) {
  TempDir d;
  const std::string data(1024, '\0');
  const auto header = [](const std::string& shape) {
    return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  };
  write_raw(d.path() / "q.npy", header("(1, 4611686018427388160, 1, 1)"), data);  // bytes wrap to 1024
  EXPECT_NE(expect_error(d.path() / "q.npy").find("too large"), std::string::npos);
  write_raw(d.path() / "k.npy", header("(999999999999999, 9999)"), data);  // elements past 2^63
  EXPECT_NE(expect_error(d.path() / "k.npy").find("multiply past"), std::string::npos);
  write_raw(d.path() / "v.npy", header("(999999999999999, 3000)"), data);  // bytes past 2^63
  EXPECT_NE(expect_error(d.path() / "v.npy").find("needs more"), std::string::npos);
}

}  // namespace
}  // namespace lina::harness
