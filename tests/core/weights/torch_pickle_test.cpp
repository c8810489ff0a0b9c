// Hostile and damaged pickles inside otherwise sound torch.save archives
// (written by LibTorch's own zip writer): each is refused before LibTorch's
// unpickler, which trusts its input, or before any tensor's memory is read,
// with a message naming the file, the fault and, for a malformed pickle, the
// byte it is at.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "runner/common/error.hpp"
#include "runner/weights/safetensors.hpp"
#include "runner/weights/state.hpp"
#include "runner/weights/torch_file.hpp"
#include "support/cli_harness.hpp"
#include "support/expect_throw_msg.hpp"

namespace {

namespace fs = std::filesystem;
using runner::weights::read_torch_state;
using runner::weights::read_weights;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spill(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// How a tensor's storage is described in the pickle.
struct Storage {
  std::string type = "FloatStorage";
  std::string key = "0";
  std::string location = "cpu";
  std::int64_t numel = 4;
  std::string numel_bytes;  ///< if set, the opcode that pushes numel, verbatim
};

/// Pickle bytes, opcode by opcode, as Python's pickler writes protocol 2.
class Pickle {
 public:
  Pickle() : bytes_("\x80\x02", 2) {}
  Pickle& op(std::uint8_t code) {
    bytes_.push_back(static_cast<char>(code));
    return *this;
  }
  Pickle& raw(std::string_view bytes) {
    bytes_.append(bytes);
    return *this;
  }
  Pickle& le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    return *this;
  }
  Pickle& str(std::string_view s) { return op('X').le(s.size(), 4).raw(s); }
  Pickle& integer(std::int64_t v) { return op('J').le(static_cast<std::uint64_t>(v), 4); }
  Pickle& global(std::string_view module, std::string_view name) {
    return op('c').raw(module).raw("\n").raw(name).raw("\n");
  }
  /// torch._utils._rebuild_tensor_v2 of `s` viewed as `sizes` / `strides` from `offset`.
  Pickle& tensor(const Storage& s, const std::vector<std::int64_t>& sizes,
                 const std::vector<std::int64_t>& strides, std::int64_t offset = 0) {
    global("torch._utils", "_rebuild_tensor_v2").op('(').op('(').str("storage");
    global("torch", s.type).str(s.key).str(s.location);
    if (s.numel_bytes.empty()) integer(s.numel); else raw(s.numel_bytes);
    op('t').op('Q').integer(offset).op('(');
    for (const auto v : sizes) integer(v);
    op('t').op('(');
    for (const auto v : strides) integer(v);
    return op('t').op(0x89).op('}').op('t').op('R');
  }
  /// The byte the next opcode will be at.
  [[nodiscard]] std::size_t at() const { return bytes_.size(); }
  [[nodiscard]] std::string stop() const { return bytes_ + "."; }
  [[nodiscard]] const std::string& unfinished() const { return bytes_; }

 private:
  std::string bytes_;
};

/// A state dict {"w": tensor} pickled as torch.save does, but with `storage`.
std::string one_tensor(const Storage& storage, const std::vector<std::int64_t>& sizes,
                       const std::vector<std::int64_t>& strides, std::int64_t offset = 0) {
  return Pickle().op('}').str("w").tensor(storage, sizes, strides, offset).op('s').stop();
}

std::string floats(std::initializer_list<float> values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.begin(), bytes.size());
  return bytes;
}

class TorchPickleTest : public ::testing::Test {
 protected:
  /// An archive of `pickle` as data.pkl and each of `data` as data/<key>.
  fs::path archive(const std::string& stem, const std::string& pickle,
                   const std::map<std::string, std::string>& data = {{"0", floats({1, 2, 3, 4})}}) {
    const fs::path path = dir_ / (stem + ".pt");
    caffe2::serialize::PyTorchStreamWriter writer(path.string());
    writer.writeRecord("data.pkl", pickle.data(), pickle.size());
    for (const auto& [key, bytes] : data)
      writer.writeRecord("data/" + key, bytes.data(), bytes.size());
    writer.writeEndOfFile();
    return path;
  }
  /// The message reading `pickle` in an archive fails with.
  std::string error(const std::string& pickle) {
    const fs::path path = archive("p" + std::to_string(++n_), pickle);
    try {
      (void)read_torch_state(path);
    } catch (const runner::Error& e) {
      const std::string prefix = "cannot read weights from '" + path.string() + "': ";
      const std::string what = e.what();
      return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
    }
    return "no error";
  }
  static std::string prefix(const fs::path& path) {
    return "cannot read weights from '" + path.string() + "': ";
  }
  static std::string at(std::size_t byte, const std::string& what) {
    return "its data.pkl is malformed at byte " + std::to_string(byte) + ": " + what;
  }

  runner::test::TempDir tmp_{"runner_torch_pickle"};
  const fs::path& dir_ = tmp_.path();
  int n_ = 0;
};

TEST_F(TorchPickleTest, AnOrderedDictWithMetadataAndShortIntegersReads) {
  // What torch.save writes for a state dict, with numel as a 1-byte LONG1
  // (LibTorch reads only 8-byte ones) and the `_metadata` attribute set by BUILD.
  Storage storage;
  storage.numel_bytes = std::string("\x8a\x01\x04", 3);
  Pickle p;
  p.global("collections", "OrderedDict").op('q').le(0, 1).op(')').op('R').op('q').le(1, 1);
  p.op('(').str("w").tensor(storage, {2, 2}, {2, 1}).str("odd").tensor(storage, {2}, {2}, 1);
  p.op('u').op('}').str("_metadata").op('h').le(0, 1).op(')').op('R');
  p.str("").op('}').str("version").op('K').le(1, 1).op('s').op('s').op('s').op('b');
  const auto got = read_torch_state(archive("ordered", p.stop()));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got.at("w").equal(torch::tensor({1.0F, 2.0F, 3.0F, 4.0F}).reshape({2, 2})));
  EXPECT_TRUE(got.at("odd").equal(torch::tensor({2.0F, 4.0F})));
}

TEST_F(TorchPickleTest, ATensorMustLieInsideItsStorageAndTheStorageInsideItsRecord) {
  Storage big;
  big.numel = 8;
  EXPECT_EQ(error(one_tensor(big, {8}, {1})),
            "the storage of tensor 'w' takes 32 bytes, but its record 'data/0' holds 16 (the file "
            "is damaged)");
  // LibTorch's unpickler checks a view against its storage (runner checks again after it).
  EXPECT_EQ(error(one_tensor(Storage{}, {5}, {1})),
            "its data.pkl is malformed: Tensor: sizes 5, strides 1, storage offset 0 and itemsize "
            "4 require a storage of at least 20 bytes, but storage only has 16 bytes");
  EXPECT_EQ(error(one_tensor(Storage{}, {2}, {3}, 1)),
            "its data.pkl is malformed: Tensor: sizes 2, strides 3, storage offset 1 and itemsize "
            "4 require a storage of at least 20 bytes, but storage only has 16 bytes");
  EXPECT_EQ(error(one_tensor(Storage{}, {2}, {-1}, 1)),
            "its data.pkl is malformed: Tensor: negative stride -1 at dim 0");
  Storage meta;
  meta.location = "meta";
  EXPECT_EQ(error(one_tensor(meta, {4}, {1})), "tensor 'w' is on meta, with no data in the file");
  Storage absent;
  absent.key = "7";
  EXPECT_EQ(error(one_tensor(absent, {4}, {1})),
            "its data.pkl refers to the tensor data 'data/7', which the zip archive lacks (the "
            "file is damaged)");
}

TEST_F(TorchPickleTest, AStorageDescriptionIsCheckedBeforeLibTorchSeesIt) {
  // Where the TUPLE that closes the description is: what precedes it in the
  // tensor (after PROTO), plus the '}' and "w" before the tensor (7 bytes).
  const auto tuple_at = [](const Storage& s) {
    Pickle p;
    p.global("torch._utils", "_rebuild_tensor_v2").op('(').op('(').str("storage");
    p.global("torch", s.type).str(s.key).str(s.location).raw(s.numel_bytes);
    return p.at() + 7;
  };
  Storage huge;
  huge.numel_bytes = std::string("\x8a\x08\x00\x00\x00\x00\x00\x01\x00\x00", 10);  // 2^40
  EXPECT_EQ(error(one_tensor(huge, {1}, {1})),
            at(tuple_at(huge), "a tensor storage of 1099511627776 elements, more than the file "
                               "holds"));
  Storage negative;
  negative.numel_bytes = std::string("\x8a\x01\xff", 3);  // -1, sign-extended
  EXPECT_EQ(error(one_tensor(negative, {1}, {1})),
            at(tuple_at(negative), "a tensor storage of -1 elements"));
  Storage wide;
  wide.numel_bytes = std::string("\x8a\x09", 2) + std::string(9, '\x01');
  EXPECT_EQ(error(one_tensor(wide, {1}, {1})), "its data.pkl holds an integer wider than 64 bits");
  Storage quantized;
  quantized.type = "QInt8Storage";
  EXPECT_EQ(error(one_tensor(quantized, {4}, {1})),
            "its data.pkl needs Python's torch.QInt8Storage, which a state dict of tensors does "
            "not");
  // A dtype given as a bare number instead of a storage type: never handed
  // to LibTorch, which would index its dtype table with it.
  Pickle p;
  p.op('}').str("w").op('(').str("storage").integer(200).str("0").str("cpu").integer(4).op('t');
  const std::size_t persid = p.at();
  p.op('Q');
  EXPECT_EQ(error(p.stop()),
            at(persid, "a persistent id that is not ('storage', type, key, location, size)"));
}

TEST_F(TorchPickleTest, MalformedStructureIsRefusedAtItsByte) {
  EXPECT_EQ(error(Pickle().op(']').op('q').le(0, 1).op('h').le(0, 1).op('a').stop()),
            at(7, "APPEND changes a container after it was put in another one"));
  Pickle deep;
  for (int i = 0; i < 70; ++i) deep.op(']');
  for (int i = 0; i < 69; ++i) deep.op('a');
  EXPECT_EQ(error(deep.stop()), "its data.pkl nests lists, tuples or dicts more than 64 deep");
  EXPECT_EQ(error(Pickle().op('N').op('r').le(1000000, 4).stop()),
            at(3, "memo index 1000000 skips ahead"));
  EXPECT_EQ(error(Pickle().op('h').le(5, 1).stop()), at(2, "memo index 5 was never stored"));
  EXPECT_EQ(error(Pickle().op('}').op('(').str("a").op('u').stop()),
            at(10, "SETITEMS with a key that has no value"));
  EXPECT_EQ(error(Pickle().op('(').op('N').op(0x86).stop()),
            at(4, "TUPLE needs 2 values on the stack, above any mark"));
  EXPECT_EQ(error(Pickle().global("torch", "FloatStorage").op(')').op('R').stop()),
            at(23, "REDUCE calls something that is not a tensor constructor"));
  EXPECT_EQ(error(Pickle().global("collections", "OrderedDict").op('N').stop()),
            at(27, "collections.OrderedDict is used other than as OrderedDict()"));
  EXPECT_EQ(error(Pickle().op(']').op('N').op('b').stop()),
            at(4, "BUILD sets the state of something that is not a dict"));
  EXPECT_EQ(error(Pickle().op('N').op('N').stop()), at(4, "it stops with 2 values on the stack"));
  EXPECT_EQ(error(Pickle().op('}').unfinished()),
            at(3, "it ends before its STOP opcode (cut short?)"));
  EXPECT_EQ(error(std::string("}.", 2)), at(0, "it does not start with a PROTO opcode"));
  EXPECT_EQ(error(Pickle().op('N').op('0').stop()),
            "its data.pkl has opcode 0x30 at byte 3, which torch.save does not write for a state "
            "dict");
  EXPECT_EQ(error(Pickle().global("__torch__.model", "Net").stop()),
            "it is a TorchScript module (torch.jit.save), not a state dict");
}

TEST_F(TorchPickleTest, AnArchiveCutAnywhereIsRefused) {
  const std::string whole = slurp(archive("whole", one_tensor(Storage{}, {4}, {1})));
  for (const std::size_t keep : {std::size_t{4}, std::size_t{100}, whole.size() / 2,
                                 whole.size() - 22, whole.size() - 1}) {
    const fs::path cut = dir_ / ("cut-" + std::to_string(keep) + ".pt");
    spill(cut, whole.substr(0, keep));
    EXPECT_THROW_MSG((void)read_weights(cut), runner::Error,
                     prefix(cut) + "its zip archive is cut short (no end record): the file was "
                                   "not written or copied completely");
  }
  const fs::path two = dir_ / "two.pt";
  spill(two, whole.substr(0, 2));  // "PK": too short to tell
  EXPECT_THROW_MSG((void)read_torch_state(two), runner::Error,
                   prefix(two) + "it is not a zip archive, as torch.save writes");
}

TEST_F(TorchPickleTest, ADamagedArchiveIsRefused) {
  const std::string whole = slurp(archive("whole", one_tensor(Storage{}, {4}, {1})));
  // The central directory entry of whole/data/0: signature, 42 bytes, name.
  const std::string name = "whole/data/0";
  std::size_t entry = whole.find("PK\x01\x02");
  while (entry != std::string::npos && whole.compare(entry + 46, name.size(), name) != 0)
    entry = whole.find("PK\x01\x02", entry + 4);
  ASSERT_NE(entry, std::string::npos);

  std::string bytes = whole;
  bytes[entry + 3] = 9;  // no longer a directory entry's signature
  const fs::path broken = dir_ / "broken.pt";
  spill(broken, bytes);
  // runner's own zip reader (fuzzed: tests/fuzz/torch_save_fuzz.cpp) refuses
  // it before LibTorch's reader sees the file (issue 30).
  std::size_t index = 1;
  for (std::size_t at = whole.find("PK\x01\x02"); at < entry; at = whole.find("PK\x01\x02", at + 4))
    ++index;
  EXPECT_THROW_MSG((void)read_torch_state(broken), runner::Error,
                   prefix(broken) + "its zip archive is damaged: directory entry " +
                       std::to_string(index) + " has no signature");

  // An entry that claims a deflated record of 2 GiB - 1: refused before
  // anything allocates that much.
  bytes = whole;
  bytes[entry + 10] = 8;  // method: deflate
  for (int i = 0; i < 4; ++i) bytes[entry + 24 + i] = static_cast<char>(i == 3 ? 0x7f : 0xff);
  const fs::path huge = dir_ / "huge.pt";
  spill(huge, bytes);
  EXPECT_THROW_MSG((void)read_torch_state(huge), runner::Error,
                   prefix(huge) + "its record 'data/0' claims 2147483647 bytes, more than the "
                                  "whole file's " + std::to_string(bytes.size()) +
                       " (the zip archive is damaged)");
}

TEST_F(TorchPickleTest, ReadWeightsTellsTheFormatsApartByContent) {
  const fs::path torch_file = archive("w", one_tensor(Storage{}, {2, 2}, {2, 1}));
  const std::vector<float> values{5, 6, 7};
  const fs::path misnamed = dir_ / "weights.pt";
  runner::weights::write_safetensors(
      misnamed, {{"v", runner::weights::DType::f32, {3}, std::as_bytes(std::span(values))}});
  fs::rename(torch_file, dir_ / "weights.safetensors");
  const auto from_zip = read_weights(dir_ / "weights.safetensors");
  ASSERT_EQ(from_zip.count("w"), 1u);
  EXPECT_TRUE(from_zip.at("w").equal(torch::tensor({1.0F, 2.0F, 3.0F, 4.0F}).reshape({2, 2})));
  const auto from_safetensors = read_weights(misnamed);
  ASSERT_EQ(from_safetensors.count("v"), 1u);
  EXPECT_TRUE(from_safetensors.at("v").equal(torch::tensor({5.0F, 6.0F, 7.0F})));
}

}  // namespace
