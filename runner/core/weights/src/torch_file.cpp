#include "runner/weights/torch_file.hpp"

#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/storage_context.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/weights/state.hpp"
#include "runner/weights/zip_directory.hpp"
#include "runner/weights/state_pickle.hpp"

namespace runner::weights {
namespace {

namespace fs = std::filesystem;

const std::string kSaveHint =
    "save the weights in Python with torch.save(model.state_dict(), path)";

[[noreturn]] void refuse(const fs::path& path, const std::string& what,
                         const std::string& hint = kSaveHint) {
  throw Error("cannot read weights from '" + path.string() + "': " + what, hint);
}

constexpr std::string_view kZipMagic{"PK\x03\x04", 4};
// The format torch.save wrote before PyTorch 1.6 starts with a pickle
// (protocol 2) of the magic number 0x1950a86a20f9469cfc6c, a 10-byte LONG1.
constexpr std::string_view kLegacyMagic{"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19",
                                        14};

/// The file's size and first bytes, once it is known to be a regular file.
struct Opened {
  std::uint64_t size = 0;
  std::string head;
};

Opened open_weights(const fs::path& path, std::size_t head_bytes) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) refuse(path, "no such file");
  if (!fs::is_regular_file(status)) refuse(path, "not a regular file");
  Opened opened;
  opened.size = fs::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) refuse(path, "cannot open it: " + std::string(std::strerror(errno)));
  opened.head.resize(static_cast<std::size_t>(std::min<std::uint64_t>(head_bytes, opened.size)));
  in.read(opened.head.data(), static_cast<std::streamsize>(opened.head.size()));
  if (!in) refuse(path, "cannot read it");
  if (opened.size == 0) refuse(path, "the file is empty");
  return opened;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

/// Reads and checks the archive's directory (runner's own zip reader, the
/// one the fuzz build runs on hostile bytes) before LibTorch's reader sees
/// the file. torch.save writes the end record last, so a file cut anywhere
/// has none.
void check_directory(const fs::path& path, std::uint64_t size) {
  std::ifstream in(path, std::ios::binary);
  const ZipRead read = zip_read_of(in);
  try {
    (void)read_zip_directory(size, read);
  } catch (const ZipError& e) {
    if (e.cut_short())
      refuse(path, "its zip archive is cut short (no end record): the file was not written or "
                   "copied completely",
             "copy or save the file again");
    refuse(path, e.what(), "the file is damaged or torch.save did not write it; " + kSaveHint);
  }
}

/// The first sentence of a LibTorch message (miniz's go on about checkpoints).
std::string first_sentence(const char* text) {
  const std::string s(text);
  return s.substr(0, std::min(s.find('\n'), s.find(". ")));
}

/// Reads the archive's records, each at most the file's size and all of them
/// together too (a damaged directory could name one stretch many times), and
/// remembers which storage each tensor's memory came from.
class Records {
 public:
  struct Storage {
    std::string name;
    std::size_t size = 0;
  };

  Records(caffe2::serialize::PyTorchStreamReader& zip, const fs::path& path, std::uint64_t size)
      : zip_(zip), path_(path), file_size_(size) {}

  std::tuple<at::DataPtr, std::size_t> read(const std::string& name) {
    const std::uint64_t size = zip_.getRecordSize(name);
    if (size > file_size_)
      refuse(path_, "its record '" + name + "' claims " + std::to_string(size) +
                        " bytes, more than the whole file's " + std::to_string(file_size_) +
                        " (the zip archive is damaged)");
    read_ += size;
    if (read_ > file_size_)
      refuse(path_, "its records add up to more bytes than the file's " +
                        std::to_string(file_size_) + " (the zip archive is damaged)");
    return zip_.getRecord(name);
  }

  at::DataPtr storage(const std::string& key) {
    const std::string name = "data/" + key;
    if (!zip_.hasRecord(name))
      refuse(path_, "its data.pkl refers to the tensor data '" + name +
                        "', which the zip archive lacks (the file is damaged)");
    auto [data, size] = read(name);
    storages_[data.get()] = Storage{name, size};
    return std::move(data);
  }

  /// The record a storage's memory was read from (none for an empty storage).
  [[nodiscard]] std::optional<Storage> storage_of(const void* data) const {
    const auto it = storages_.find(data);
    return it == storages_.end() ? std::nullopt : std::optional<Storage>(it->second);
  }

 private:
  caffe2::serialize::PyTorchStreamReader& zip_;
  const fs::path& path_;
  std::uint64_t file_size_;
  std::uint64_t read_ = 0;
  std::map<const void*, Storage> storages_;
};

/// Python's name for the type of an unpickled value.
std::string python_type(const c10::IValue& v) {
  if (v.isNone()) return "None";
  if (v.isBool()) return "a bool";
  if (v.isInt()) return "an int";
  if (v.isDouble()) return "a float";
  if (v.isString()) return "a str";
  if (v.isTuple()) return "a tuple";
  if (v.isList()) return "a list";
  if (v.isGenericDict()) return "a dict";
  if (v.isTensor()) return "a tensor";
  return "a " + std::string(v.tagKind());
}

/// A dict key as the user wrote it: the text of a str or int, else its type.
std::string key_text(const c10::IValue& key) {
  if (key.isString()) return key.toStringRef();
  if (key.isInt()) return std::to_string(key.toInt());
  return python_type(key);
}

/// The checkpoint case: a dict whose values are not all tensors, but one of
/// which is a non-empty dict of name -> tensor.
std::optional<std::string> nested_state_dict(const c10::impl::GenericDict& top) {
  for (const auto& item : top) {
    if (!item.key().isString() || !item.value().isGenericDict()) continue;
    const auto inner = item.value().toGenericDict();
    const bool state = !inner.empty() && std::all_of(inner.begin(), inner.end(), [](const auto& e) {
      return e.key().isString() && e.value().isTensor();
    });
    if (state) return item.key().toStringRef();
  }
  return std::nullopt;
}

/// The tensor must lie inside its storage, and the storage inside the record
/// it was read from, before anything reads its memory. (LibTorch 2.14's
/// unpickler refuses a view outside its storage itself; this does not rely
/// on it.)
void check_bounds(const fs::path& path, const std::string& name, const torch::Tensor& t,
                  const Records& records) {
  if (t.device().type() != c10::DeviceType::CPU)
    refuse(path, "tensor '" + name + "' is on " + t.device().str() + ", with no data in the file");
  const c10::Storage& storage = t.storage();
  const auto record = records.storage_of(storage.data());
  const std::uint64_t held = record ? record->size : 0;
  if (storage.nbytes() > held)
    refuse(path, "the storage of tensor '" + name + "' takes " + std::to_string(storage.nbytes()) +
                     " bytes, but " + (record ? "its record '" + record->name + "'" : "the file") +
                     " holds " + std::to_string(held) + " (the file is damaged)");
  const auto item = static_cast<std::uint64_t>(t.element_size());
  const std::uint64_t elements = storage.nbytes() / item;
  // The last element the view reaches, plus one (0 for an empty tensor).
  std::uint64_t reach = 0;
  bool bad = t.storage_offset() < 0;
  bool empty = false;
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    bad = bad || t.size(d) < 0 || t.stride(d) < 0;
    empty = empty || t.size(d) == 0;
  }
  if (!bad && !empty) {
    reach = static_cast<std::uint64_t>(t.storage_offset()) + 1;
    for (std::int64_t d = 0; d < t.dim() && !bad; ++d) {
      std::uint64_t step = 0;
      bad = __builtin_mul_overflow(static_cast<std::uint64_t>(t.size(d) - 1),
                                   static_cast<std::uint64_t>(t.stride(d)), &step) ||
            __builtin_add_overflow(reach, step, &reach);
    }
  }
  if (bad || reach > elements)
    refuse(path, "tensor '" + name + "' (shape " + shape_text(t.sizes()) + ", strides " +
                     shape_text(t.strides()) + ", offset " + std::to_string(t.storage_offset()) +
                     ") reaches past the " + std::to_string(elements) +
                     " elements of its storage (the file is damaged)");
}

}  // namespace

std::map<std::string, torch::Tensor> read_torch_state(const fs::path& path) {
  const Opened opened = open_weights(path, kLegacyMagic.size());
  if (starts_with(opened.head, kLegacyMagic))
    refuse(path,
           "it is in the format torch.save wrote before PyTorch 1.6, which runner does not read",
           "save it again with a current torch: torch.save(torch.load(path), path) writes the zip "
           "format");
  if (!starts_with(opened.head, kZipMagic))
    refuse(path, "it is not a zip archive, as torch.save writes");
  check_directory(path, opened.size);

  try {
    caffe2::serialize::PyTorchStreamReader zip(path.string());
    Records records(zip, path, opened.size);
    if (!zip.hasRecord("data.pkl"))
      refuse(path, "its zip archive has no data.pkl, so torch.save did not write it");
    if (zip.hasRecord("byteorder")) {
      const auto [data, size] = records.read("byteorder");
      const std::string order(static_cast<const char*>(data.get()), size);
      if (order != "little")
        refuse(path, "it was written on a machine of byte order '" + order +
                         "'; runner reads little-endian files");
    }
    const auto [data, size] = records.read("data.pkl");
    std::string pickle;
    try {
      pickle = detail::rewrite_state_pickle({static_cast<const char*>(data.get()), size},
                                            opened.size);
    } catch (const detail::PickleError& e) {
      refuse(path, e.what(), e.hint());
    }

    std::size_t at = 0;
    const auto reader = [&](char* out, std::size_t n) {
      n = std::min(n, pickle.size() - at);
      std::memcpy(out, pickle.data() + at, n);
      at += n;
      return n;
    };
    const auto read_record = [&](const std::string& key) { return records.storage(key); };
    // Storages shared by several tensors (tied weights, views) are read once.
    auto shared = std::make_shared<torch::jit::DeserializationStorageContext>();
    torch::jit::Unpickler unpickler(reader, /*type_resolver=*/nullptr, /*obj_loader=*/nullptr,
                                    read_record, c10::Device(c10::DeviceType::CPU),
                                    /*use_storage_device=*/false,
                                    torch::jit::Unpickler::defaultTypeParser, shared);
    c10::IValue top;
    try {
      top = unpickler.parse_ivalue();
    } catch (const Error&) {
      throw;
    } catch (const c10::Error& e) {
      refuse(path, "its data.pkl is malformed: " + first_sentence(e.what_without_backtrace()),
             "the file is damaged; " + kSaveHint);
    } catch (const std::exception& e) {
      refuse(path, "its data.pkl is malformed: " + first_sentence(e.what()),
             "the file is damaged; " + kSaveHint);
    }

    if (!top.isGenericDict())
      refuse(path, "it holds " + python_type(top) + ", not a dict of name -> tensor");
    const auto dict = top.toGenericDict();
    std::map<std::string, torch::Tensor> out;
    for (const auto& item : dict) {
      if (item.key().isString() && item.value().isTensor()) {
        const std::string& name = item.key().toStringRef();
        check_bounds(path, name, item.value().toTensor(), records);
        out[name] = item.value().toTensor().detach();
        continue;
      }
      if (const auto inner = nested_state_dict(dict)) {
        std::vector<std::string> keys;
        for (const auto& e : dict) keys.push_back(key_text(e.key()));
        refuse(path, "it holds a checkpoint with the keys " + join(keys, ", ") +
                         ", not a state dict: the tensors are one level down, in '" + *inner + "'",
               "save the state dict alone: torch.save(checkpoint['" + *inner +
                   "'], path), or torch.save(model.state_dict(), path)");
      }
      if (!item.key().isString())
        refuse(path, "its dict has the key " + key_text(item.key()) + " (" +
                         python_type(item.key()) + "), not a parameter name");
      refuse(path, "its entry '" + item.key().toStringRef() + "' is " +
                       python_type(item.value()) + ", not a tensor");
    }
    return out;
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    refuse(path, "its zip archive cannot be read: " + first_sentence(e.what_without_backtrace()),
           "the file is damaged or torch.save did not write it; " + kSaveHint);
  }
}

std::map<std::string, torch::Tensor> read_weights(const fs::path& path) {
  const Opened opened = open_weights(path, 16);
  if (starts_with(opened.head, kZipMagic) || starts_with(opened.head, kLegacyMagic))
    return read_torch_state(path);
  if (opened.head.size() > 8 && opened.head[8] == '{') return read_safetensors_tensors(path);
  refuse(path,
         "it is neither a safetensors file (an 8-byte header length, then '{') nor a torch.save "
         "file (a zip archive, starting with PK)",
         "runner reads .safetensors files and files written by torch.save(model.state_dict(), "
         "path)");
}

}  // namespace runner::weights
