#include "npy_header.hpp"

#include <runner/data_error.hpp>

#include <array>
#include <climits>
#include <cstdint>
#include <charconv>
#include <cstring>
#include <string_view>
#include <utility>

namespace runner_loaders {
namespace {

using runner::DataError;

constexpr std::array<std::pair<std::string_view, std::size_t>, 8> kDtypes{{
    {"<f4", 4}, {"<f8", 8}, {"<i2", 2}, {"<i4", 4}, {"<i8", 8}, {"|b1", 1}, {"|i1", 1}, {"|u1", 1}}};

// The text after `'key':` in a header dict, trimmed of spaces.
std::string_view field(std::string_view header, std::string_view key, const std::string& path) {
  const std::string quoted = "'" + std::string(key) + "'";
  const auto at = header.find(quoted);
  auto colon = at == std::string_view::npos ? at : header.find(':', at + quoted.size());
  if (colon == std::string_view::npos)
    throw DataError("'" + path + "': the .npy header has no '" + std::string(key) + "'");
  ++colon;
  while (colon < header.size() && header[colon] == ' ') ++colon;
  return header.substr(colon);
}

// The shape as written, up to its closing parenthesis (or 40 characters).
std::string shape_as_written(std::string_view text) {
  const auto close = text.find(')');
  return std::string(text.substr(0, close == std::string_view::npos ? 40 : close + 1));
}

}  // namespace

std::uint64_t NpyHeader::row_bytes() const {
  // Saturating: with no rows the data check passes whatever the other sizes.
  std::uint64_t n = item_size;
  for (std::size_t d = 1; d < shape.size(); ++d)
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(shape[d]), &n)) return UINT64_MAX;
  return n;
}

std::string npy_supported_dtypes() {
  std::string text;
  for (const auto& [name, size] : kDtypes) text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

NpyHeader parse_npy_header(const std::uint8_t* b, std::size_t size, const std::string& path) {
  if (size < 10 || std::memcmp(b, "\x93NUMPY", 6) != 0)
    throw DataError("'" + path + "' is not a .npy file: it does not start with \\x93NUMPY");
  const int major = b[6];
  if (major < 1 || major > 3)
    throw DataError("'" + path + "': .npy format version " + std::to_string(major) +
                    " is not 1, 2 or 3");
  std::size_t length = b[8] | (b[9] << 8);
  std::size_t start = 10;
  if (major >= 2) {
    if (size < 12) throw DataError("'" + path + "' is truncated inside its header");
    length |= (static_cast<std::size_t>(b[10]) << 16) | (static_cast<std::size_t>(b[11]) << 24);
    start = 12;
  }
  if (length > kMaxNpyHeaderBytes)
    throw DataError("'" + path + "': its .npy header declares " + std::to_string(length) +
                    " bytes, more than the " + std::to_string(kMaxNpyHeaderBytes) +
                    " runner reads (np.save writes a few hundred)");
  if (length > size - start) throw DataError("'" + path + "' is truncated inside its header");
  const std::string_view header(reinterpret_cast<const char*>(b) + start, length);
  NpyHeader h;
  h.data = start + length;

  const std::string_view descr_text = field(header, "descr", path);
  const auto close = descr_text.size() > 1 ? descr_text.find('\'', 1) : std::string_view::npos;
  if (descr_text.empty() || descr_text[0] != '\'' || close == std::string_view::npos)
    throw DataError("'" + path + "': the .npy header's descr is not a quoted dtype");
  h.descr = std::string(descr_text.substr(1, close - 1));
  for (const auto& [name, item] : kDtypes)
    if (name == h.descr) h.item_size = item;
  if (h.item_size == 0)
    throw DataError("'" + path + "': dtype '" + h.descr + "' is not supported; supported: " +
                    npy_supported_dtypes());
  if (field(header, "fortran_order", path).rfind("True", 0) == 0)
    throw DataError("'" + path + "' is in Fortran order; save it with "
                    "np.save(path, np.ascontiguousarray(array))");
  const std::string_view shape_text = field(header, "shape", path);
  const auto bad_shape = [&] {
    return DataError("'" + path + "': the header's shape " + shape_as_written(shape_text) +
                     " is not a tuple of sizes");
  };
  if (shape_text.empty() || shape_text[0] != '(') throw bad_shape();
  std::size_t p = 1;
  for (;;) {
    while (p < shape_text.size() && (shape_text[p] == ' ' || shape_text[p] == ',')) ++p;
    if (p >= shape_text.size()) throw bad_shape();
    if (shape_text[p] == ')') break;
    std::int64_t dim = -1;
    const auto [end, ec] =
        std::from_chars(shape_text.data() + p, shape_text.data() + shape_text.size(), dim);
    if (ec != std::errc() || dim < 0) throw bad_shape();
    if (h.shape.size() == kMaxNpyDims)
      throw DataError("'" + path + "': the header's shape has more than " +
                      std::to_string(kMaxNpyDims) + " dimensions");
    h.shape.push_back(dim);
    p = static_cast<std::size_t>(end - shape_text.data());
  }
  if (h.shape.empty())
    throw DataError("'" + path + "' holds a scalar; it needs one row per sample");
  // The bytes the shape needs, compared without overflowing (a hostile header
  // can name sizes whose product wraps around).
  const std::size_t have = size - h.data;
  std::size_t need = h.item_size;
  bool too_big = false;
  for (const std::int64_t dim : h.shape)
    too_big = too_big || __builtin_mul_overflow(need, static_cast<std::size_t>(dim), &need);
  if (too_big || need != have)
    throw DataError("'" + path + "': shape " + shape_as_written(shape_text) + " needs " +
                    (too_big ? std::string("more than 2^64") : std::to_string(need)) +
                    " bytes of data after the " + std::to_string(h.data) +
                    "-byte header, the file has " + std::to_string(have));
  if (h.row_bytes() > kMaxNpyRowBytes)
    throw DataError("'" + path + "': one sample (a row of shape " + shape_as_written(shape_text) +
                    ") takes " +
                    (h.row_bytes() == UINT64_MAX ? std::string("more than 2^64")
                                                 : std::to_string(h.row_bytes())) +
                    " bytes, more than the " +
                    std::to_string(kMaxNpyRowBytes) + " (1 GiB) runner reads per sample");
  return h;
}

}  // namespace runner_loaders
