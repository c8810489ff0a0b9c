#include "runner/weights/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "runner/common/error.hpp"
#include "runner/common/files.hpp"
#include "runner/common/output_path.hpp"
#include "runner/common/strings.hpp"

namespace runner::weights {
namespace {

using nlohmann::json;

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeInfo, 10> kDTypes{{
    {DType::f64, "F64", 8},
    {DType::f32, "F32", 4},
    {DType::f16, "F16", 2},
    {DType::bf16, "BF16", 2},
    {DType::i64, "I64", 8},
    {DType::i32, "I32", 4},
    {DType::i16, "I16", 2},
    {DType::i8, "I8", 1},
    {DType::u8, "U8", 1},
    {DType::boolean, "BOOL", 1},
}};

const DTypeInfo& info(DType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d;
  throw Error("internal: unknown dtype");
}

std::string known_dtypes() {
  std::vector<std::string> names;
  for (const auto& d : kDTypes) names.emplace_back(d.name);
  return join(names, ", ");
}

[[noreturn]] void refuse(const std::filesystem::path& path, const std::string& what) {
  throw Error("cannot read weights from '" + path.string() + "': " + what,
              "give a .safetensors file as written by safetensors or by runner's save_to");
}

/// Bytes a tensor of this shape and dtype takes, or nullopt past `limit`.
std::optional<std::uint64_t> bytes_needed(const std::vector<std::int64_t>& shape,
                                          std::size_t element, std::uint64_t limit) {
  std::uint64_t n = element;
  for (const std::int64_t s : shape) {
    if (s == 0) return 0;
    if (n > limit / static_cast<std::uint64_t>(s)) return std::nullopt;
    n *= static_cast<std::uint64_t>(s);
  }
  return n <= limit ? std::optional<std::uint64_t>(n) : std::nullopt;
}

TensorEntry parse_entry(const std::filesystem::path& path, const std::string& name,
                        const json& value, std::uint64_t data_size) {
  const std::string where = "tensor '" + terminal_safe(name) + "'";  // a name is the file's bytes
  if (!value.is_object()) refuse(path, where + " is not described by an object");
  TensorEntry entry;
  entry.name = name;
  const auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) refuse(path, where + " has no dtype string");
  const std::string& dtype_text = dtype->get_ref<const std::string&>();
  const auto known = std::find_if(kDTypes.begin(), kDTypes.end(),
                                  [&](const DTypeInfo& d) { return d.name == dtype_text; });
  if (known == kDTypes.end())
    refuse(path, where + " has dtype '" + terminal_safe(dtype_text) +
                     "', which runner does not read (" + known_dtypes() + ")");
  entry.dtype = known->dtype;
  const auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array())
    refuse(path, where + ": shape must be a list of non-negative integers");
  for (const json& s : *shape) {
    if (!s.is_number_unsigned() || s.get<std::uint64_t>() >
                                       static_cast<std::uint64_t>(
                                           std::numeric_limits<std::int64_t>::max()))
      refuse(path, where + ": shape must be a list of non-negative integers");
    entry.shape.push_back(static_cast<std::int64_t>(s.get<std::uint64_t>()));
  }
  const auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    refuse(path, where + ": data_offsets must be two non-negative integers [begin, end]");
  entry.begin = (*offsets)[0].get<std::uint64_t>();
  entry.end = (*offsets)[1].get<std::uint64_t>();
  const std::string range =
      "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
  if (entry.end < entry.begin) refuse(path, where + ": " + range + " end before they begin");
  if (entry.end > data_size)
    refuse(path, where + ": " + range + " run past the data, which is " +
                     std::to_string(data_size) + " bytes");
  const auto needed =
      bytes_needed(entry.shape, known->size, std::numeric_limits<std::uint64_t>::max());
  if (!needed || *needed != entry.end - entry.begin)
    refuse(path, where + ": shape " + shape_text(entry.shape) + " of " + dtype_text + " takes " +
                     (needed ? std::to_string(*needed) + " bytes" : "over 2^64 bytes") +
                     ", but " + range + " hold " + std::to_string(entry.end - entry.begin));
  return entry;
}

}  // namespace

std::size_t dtype_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> head,
                                           std::uint64_t file_size,
                                           const std::filesystem::path& path) {
  if (head.size() > file_size) throw Error("internal: more bytes given than the file holds");
  if (file_size < 8)
    refuse(path, "the file is " + std::to_string(file_size) +
                     " bytes, shorter than the 8-byte header length a safetensors file starts "
                     "with");
  if (head.size() < 8) throw Error("internal: the 8-byte header length was not given");
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<std::uint8_t>(head[i]);
  if (length > kMaxHeaderBytes)
    refuse(path, "its header length is " + std::to_string(length) +
                     " bytes, over the 100 MiB runner reads (not a safetensors file?)");
  if (length > file_size - 8)
    refuse(path, "its header length is " + std::to_string(length) + " bytes, but only " +
                     std::to_string(file_size - 8) + " bytes follow (a truncated file?)");
  if (length > head.size() - 8) throw Error("internal: the header was not given whole");
  SafetensorsHeader out;
  out.data_offset = 8 + length;
  const auto* text = reinterpret_cast<const char*>(head.data() + 8);
  json doc;
  try {
    doc = json::parse(text, text + length);
  } catch (const json::exception& e) {
    refuse(path, std::string("its header is not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) refuse(path, "its header is not a JSON object");
  const std::uint64_t data_size = file_size - out.data_offset;
  for (const auto& [key, value] : doc.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) refuse(path, "__metadata__ is not an object of strings");
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string()) refuse(path, "__metadata__ is not an object of strings");
        out.metadata[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    out.tensors.push_back(parse_entry(path, key, value, data_size));
  }
  // The entries must tile the data: no overlap, no gap, nothing after.
  std::vector<const TensorEntry*> by_offset;
  for (const auto& t : out.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t covered = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry* t : by_offset) {
    if (t->begin < covered)
      refuse(path, "tensors '" + terminal_safe(previous->name) + "' and '" +
                       terminal_safe(t->name) + "' overlap");
    if (t->begin > covered)
      refuse(path, "bytes " + std::to_string(covered) + " to " + std::to_string(t->begin) +
                       " of the data belong to no tensor");
    covered = t->end;
    previous = t;
  }
  if (covered != data_size)
    refuse(path, "bytes " + std::to_string(covered) + " to " + std::to_string(data_size) +
                     " of the data belong to no tensor");
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  return out;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) refuse(path, "no such file");
  if (!std::filesystem::is_regular_file(status)) refuse(path, "not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) refuse(path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    refuse(path, std::strerror(err));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (map == MAP_FAILED) refuse(path, std::string("cannot map it: ") + std::strerror(err));
    map_ = static_cast<const std::byte*>(map);
  } else {
    ::close(fd);
  }
  try {
    SafetensorsHeader header = parse_safetensors_header({map_, size_}, size_, path);
    data_offset_ = header.data_offset;
    tensors_ = std::move(header.tensors);
    metadata_ = std::move(header.metadata);
  } catch (...) {
    if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), size_);
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      data_offset_(other.data_offset_),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {}

std::span<const std::byte> SafetensorsFile::bytes(const TensorEntry& entry) const {
  return {map_ + data_offset_ + entry.begin, static_cast<std::size_t>(entry.end - entry.begin)};
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const auto fail = [&](const std::string& what) -> void {
    throw Error("cannot write weights to '" + path.string() + "': " + what);
  };
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const TensorView& t : tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      fail("tensor name '" + t.name + "' is reserved or given twice");
    const auto needed = bytes_needed(t.shape, dtype_size(t.dtype),
                                     std::numeric_limits<std::uint64_t>::max());
    if (std::any_of(t.shape.begin(), t.shape.end(), [](std::int64_t s) { return s < 0; }) ||
        !needed || *needed != t.bytes.size())
      fail("tensor '" + t.name + "': shape " + shape_text(t.shape) + " of " +
           std::string(dtype_name(t.dtype)) + " does not match its " +
           std::to_string(t.bytes.size()) + " bytes");
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the format allows trailing spaces; aligns the data
  std::array<char, 8> length{};
  for (std::size_t i = 0; i < 8; ++i) length[i] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);

  // The output-path rule (runner/common/output_path.hpp): a device, a FIFO or
  // a symbolic link at `path` is refused and left as it is, never renamed over.
  OutputUse use;
  use.example = "weights.safetensors";
  use.standard_output = false;
  refuse_non_regular(path, use);
  TemporaryFile temporary(path);
  const int fd = ::open(temporary.path().c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) fail(std::strerror(errno));
  const auto write_all = [&](const void* data, std::size_t size) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  };
  bool ok = write_all(length.data(), length.size()) && write_all(text.data(), text.size());
  for (const TensorView& t : tensors) ok = ok && write_all(t.bytes.data(), t.bytes.size());
  const int err = ok ? 0 : (errno != 0 ? errno : EIO);
  const bool closed = ::close(fd) == 0;
  if (!ok) fail(std::strerror(err));
  if (!closed) fail(std::strerror(errno));
  temporary.commit();  // fsync, the rule once more, rename
}

}  // namespace runner::weights
