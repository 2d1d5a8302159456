#include "harness/util/npy.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "harness/util/text_file.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

[[noreturn]] void bad(const std::filesystem::path& f, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, f.filename().string(), "file " + f.string() + ": " + what);
}

// Value of key `key` in the header's Python dict literal, as the raw text up to the next
// top-level ',' or '}' (quotes and parentheses are kept).
std::string dict_value(const std::filesystem::path& f, const std::string& header, const std::string& key) {
  std::size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) k = header.find("\"" + key + "\"");
  if (k == std::string::npos) bad(f, "npy header has no '" + key + "' key: " + header);
  std::size_t i = header.find(':', k);
  if (i == std::string::npos) bad(f, "malformed npy header: " + header);
  ++i;
  while (i < header.size() && std::isspace(static_cast<unsigned char>(header[i]))) ++i;
  std::size_t j = i;
  int depth = 0;
  char quote = 0;
  for (; j < header.size(); ++j) {
    const char c = header[j];
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    else if (c == '(' || c == '[') ++depth;
    else if (c == ')' || c == ']') --depth;
    else if ((c == ',' || c == '}') && depth == 0) break;
  }
  std::string v = header.substr(i, j - i);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  return v;
}

std::vector<std::int64_t> parse_shape(const std::filesystem::path& f, const std::string& text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') bad(f, "npy shape is not a tuple: " + text);
  std::vector<std::int64_t> dims;
  std::string cur;
  for (std::size_t i = 1; i + 1 <= text.size(); ++i) {
    const char c = i + 1 == text.size() ? ',' : text[i];
    if (c == ',') {
      std::string t;
      for (char ch : cur)
        if (!std::isspace(static_cast<unsigned char>(ch)) && ch != 'L') t += ch;
      cur.clear();
      if (t.empty()) continue;
      for (char ch : t)
        if (!std::isdigit(static_cast<unsigned char>(ch))) bad(f, "npy shape has a non-integer entry: " + text);
      if (t.size() > 15) bad(f, "npy shape entry " + t + " is too large");  // stoll would throw past 2^63
      dims.push_back(std::stoll(t));
    } else {
      cur += c;
    }
  }
  if (static_cast<int>(dims.size()) > kMaxRank) bad(f, "rank " + std::to_string(dims.size()) + " exceeds the supported " + std::to_string(kMaxRank));
  return dims;
}

}  // namespace

std::string npy_descr(DType t) {
  switch (t) {
    case DType::f64: return "<f8";
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::bf16: return "<u2";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
  }
  return "?";
}

HostTensor read_npy(const std::filesystem::path& file, const NpyReadOptions& opts) {
  // Regular files only (a FIFO would block), up to kMaxNpyBytes.
  return parse_npy(read_text_file(file, file.string(), kMaxNpyBytes), file, opts);
}

HostTensor parse_npy(const std::string& bytes, const std::filesystem::path& file, const NpyReadOptions& opts) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) bad(file, "not an .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad(file, "truncated npy header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    bad(file, "unsupported npy format version " + std::to_string(major));
  }
  if (bytes.size() < offset + header_len) bad(file, "truncated npy header");
  const std::string header(bytes.data() + offset, header_len);
  const std::size_t data_begin = offset + header_len;

  std::string descr = dict_value(file, header, "descr");
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"')) bad(file, "npy descr is not a simple dtype string: " + descr);
  descr = descr.substr(1, descr.size() - 2);
  const std::string fortran = dict_value(file, header, "fortran_order");
  if (fortran == "True") bad(file, "fortran_order arrays are not supported (save with np.ascontiguousarray)");
  if (fortran != "False") bad(file, "malformed fortran_order: " + fortran);
  const auto dims = parse_shape(file, dict_value(file, header, "shape"));

  if (descr.size() >= 2 && (descr[0] == '|' || descr[0] == '=')) descr[0] = '<';
  DType dt;
  if (descr == "<f8") dt = DType::f64;
  else if (descr == "<f4") dt = DType::f32;
  else if (descr == "<f2") dt = DType::f16;
  else if (descr == "<i4") dt = DType::i32;
  else if (descr == "<i8") dt = DType::i64;
  else if (descr == "<V2") dt = DType::bf16;
  else if (descr == "<u2" && opts.u2_is_bf16) dt = DType::bf16;
  else if (descr == "<u2") bad(file, "dtype '<u2' (uint16): say it holds bfloat16 bits with \"bf16\" in kwargs.json");
  else bad(file, "unsupported dtype '" + descr + "' (supported: <f8 <f4 <f2 <i4 <i8, bfloat16 as <V2 or <u2)");

  // The byte count is checked against the file before anything is allocated, without overflow:
  // a header can claim any shape.
  std::int64_t need_elems = 1;
  for (std::int64_t d : dims)
    if (__builtin_mul_overflow(need_elems, d, &need_elems))
      bad(file, "shape entries multiply past 2^63: the header's shape cannot describe this file");
  std::int64_t need_bytes = 0;
  if (__builtin_mul_overflow(need_elems, static_cast<std::int64_t>(dtype_size(dt)), &need_bytes) ||
      static_cast<std::uint64_t>(need_bytes) != bytes.size() - data_begin)
    bad(file, "data is " + std::to_string(bytes.size() - data_begin) + " bytes, the header's shape of " +
                  std::string(dtype_name(dt)) + " needs " + (need_bytes >= 0 ? std::to_string(need_bytes) : std::string("more")));
  HostTensor t(dt, Shape::of(dims));
  const std::size_t need = t.nbytes();
  if (bytes.size() - data_begin != need)
    bad(file, "data is " + std::to_string(bytes.size() - data_begin) + " bytes, shape " + t.shape().str() + " of " +
                  std::string(dtype_name(dt)) + " needs " + std::to_string(need));
  if (need) std::memcpy(t.data(), bytes.data() + data_begin, need);
  return t;
}

void write_npy(const std::filesystem::path& file, const HostTensor& t) {
  std::ostringstream h;
  h << "{'descr': '" << npy_descr(t.dtype()) << "', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < t.shape().rank; ++i) h << t.shape()[i] << (t.shape().rank == 1 || i + 1 < t.shape().rank ? ", " : "");
  h << "), }";
  std::string header = h.str();
  // v1: magic(6) + version(2) + len(2) + header, padded with spaces to a multiple of 64, ending in '\n'.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535) throw Error(ErrorCode::invalid_argument, file.string(), "npy header too long for " + file.string());
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(t.data()), t.nbytes());
  write_file_atomically(file, out);
}

}  // namespace lina::harness
