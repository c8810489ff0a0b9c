// Safetensors: files written by Python's safetensors read byte for byte,
// runner's files read by Python, and every malformed file refused with a
// message naming the file and the fault, before a tensor's bytes are used.
#include "runner/weights/safetensors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <fstream>

#include "runner/common/error.hpp"
#include "support/cli_harness.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using runner::weights::DType;
using runner::weights::SafetensorsFile;
using runner::weights::TensorView;

class SafetensorsTest : public ::testing::Test {
 protected:
  runner::test::TempDir tmp_{"runner_safetensors"};
  const fs::path& dir_ = tmp_.path();

  /// A file of the 8-byte length `length`, then `header`, then `data` bytes.
  fs::path raw(const std::string& name, std::uint64_t length, const std::string& header,
               std::size_t data = 0) {
    const fs::path path = dir_ / name;
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((length >> (8 * i)) & 0xFF));
    out << header << std::string(data, '\0');
    return path;
  }
  fs::path file(const std::string& name, const std::string& header, std::size_t data = 0) {
    return raw(name, header.size(), header, data);
  }
  std::string read_error(const fs::path& path) {
    try {
      SafetensorsFile f(path);
    } catch (const runner::Error& e) {
      return e.what();
    }
    return "no error";
  }
  std::string prefix(const fs::path& path) const {
    return "cannot read weights from '" + path.string() + "': ";
  }

};

template <typename T>
std::vector<T> values(const SafetensorsFile& f, const std::string& name) {
  for (const auto& entry : f.tensors()) {
    if (entry.name != name) continue;
    const auto bytes = f.bytes(entry);
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

std::span<const std::byte> as_bytes_of(const auto& vector) {
  return std::as_bytes(std::span(vector));
}

TEST_F(SafetensorsTest, AFileWrittenByPythonIsReadByteForByte) {
  RUNNER_REQUIRE_ORACLE("torch,safetensors");
  const fs::path path = dir_ / "python.safetensors";
  const auto r = runner::test::run_oracle("safetensors_files.py", {"write", path.string()});
  ASSERT_EQ(r.code, 0) << r.output;
  const SafetensorsFile f(path);
  std::vector<std::string> names;
  for (const auto& t : f.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"empty", "layer.bias", "layer.weight", "mask", "steps"}));
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"by", "python"}, {"format", "pt"}}));
  EXPECT_EQ(values<float>(f, "layer.weight"),
            (std::vector<float>{0.0F, 0.25F, 0.5F, 0.75F, 1.0F, 1.25F}));
  // bf16 is the upper half of a float32: -1.5 is 0xBFC0, 2.25 is 0x4010.
  EXPECT_EQ(values<std::uint16_t>(f, "layer.bias"), (std::vector<std::uint16_t>{0xBFC0, 0x4010}));
  EXPECT_EQ(values<std::int64_t>(f, "steps"), (std::vector<std::int64_t>{7, -8, 1LL << 40}));
  EXPECT_EQ(values<std::uint8_t>(f, "mask"), (std::vector<std::uint8_t>{1, 0, 0, 1}));
  for (const auto& t : f.tensors()) {
    if (t.name == "empty") {
      EXPECT_EQ(t.dtype, DType::f16);
      EXPECT_EQ(t.shape, (std::vector<std::int64_t>{0, 4}));
      EXPECT_EQ(t.begin, t.end);
    }
    if (t.name == "layer.weight") {
      EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 3}));
    }
  }
}

TEST_F(SafetensorsTest, AFileWrittenByRunnerIsReadByPython) {
  RUNNER_REQUIRE_ORACLE("torch,safetensors");
  const std::vector<float> weight{0.0F, 0.25F, 0.5F, 0.75F, 1.0F, 1.25F};
  const std::vector<std::uint16_t> bias{0xBFC0, 0x4010};
  const std::vector<std::int64_t> steps{7, -8, 1LL << 40};
  const std::vector<std::uint8_t> mask{1, 0, 0, 1};
  const fs::path path = dir_ / "runner.safetensors";
  runner::weights::write_safetensors(
      path,
      {TensorView{"layer.weight", DType::f32, {2, 3}, as_bytes_of(weight)},
       TensorView{"layer.bias", DType::bf16, {2}, as_bytes_of(bias)},
       TensorView{"steps", DType::i64, {3}, as_bytes_of(steps)},
       TensorView{"mask", DType::boolean, {2, 2}, as_bytes_of(mask)},
       TensorView{"empty", DType::f16, {0, 4}, {}}},
      {{"format", "pt"}, {"by", "runner"}});
  const auto r = runner::test::run_oracle("safetensors_files.py", {"check", path.string()});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "ok\n");
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(SafetensorsTest, WhatRunnerWritesItReadsBack) {
  const std::vector<double> a{1.5, -2.0};
  const fs::path path = dir_ / "w.safetensors";
  runner::weights::write_safetensors(path, {TensorView{"a", DType::f64, {1, 2}, as_bytes_of(a)}});
  const SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(values<double>(f, "a"), a);
  EXPECT_TRUE(f.metadata().empty());
  // The header is padded so that the data starts 8-byte aligned.
  EXPECT_EQ((fs::file_size(path) - 16) % 8, 0u);
}

TEST_F(SafetensorsTest, TruncatedFilesAreRefused) {
  const fs::path tiny = raw("tiny", 0, "");
  fs::resize_file(tiny, 5);
  EXPECT_EQ(read_error(tiny), prefix(tiny) +
                                  "the file is 5 bytes, shorter than the 8-byte header length a "
                                  "safetensors file starts with");
  const fs::path cut = raw("cut", 4096, "{}");
  EXPECT_EQ(read_error(cut), prefix(cut) +
                                 "its header length is 4096 bytes, but only 2 bytes follow (a "
                                 "truncated file?)");
  const fs::path huge = raw("huge", 1ULL << 62, "{}");
  EXPECT_EQ(read_error(huge), prefix(huge) +
                                  "its header length is 4611686018427387904 bytes, over the 100 "
                                  "MiB runner reads (not a safetensors file?)");
  // A whole header whose tensor's bytes were cut off.
  const fs::path data = file("data", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  EXPECT_EQ(read_error(data), prefix(data) +
                                  "tensor 'a': data_offsets [0, 16] run past the data, which is 8 "
                                  "bytes");
}

TEST_F(SafetensorsTest, HeadersThatLieAboutSizesAreRefused) {
  const fs::path shape = file("shape", R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20);
  EXPECT_EQ(read_error(shape), prefix(shape) +
                                   "tensor 'a': shape [2, 3] of F32 takes 24 bytes, but "
                                   "data_offsets [0, 20] hold 20");
  const fs::path overflow = file(
      "overflow",
      R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8);
  EXPECT_EQ(read_error(overflow), prefix(overflow) +
                                      "tensor 'a': shape [4294967296, 4294967296] of F64 takes "
                                      "over 2^64 bytes, but data_offsets [0, 8] hold 8");
  const fs::path overlap = file("overlap",
                                R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                                6);
  EXPECT_EQ(read_error(overlap), prefix(overlap) + "tensors 'a' and 'b' overlap");
  const fs::path gap = file("gap", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", 4);
  EXPECT_EQ(read_error(gap), prefix(gap) + "bytes 0 to 2 of the data belong to no tensor");
  const fs::path tail = file("tail", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 5);
  EXPECT_EQ(read_error(tail), prefix(tail) + "bytes 2 to 5 of the data belong to no tensor");
  const fs::path backwards =
      file("backwards", R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}})", 2);
  EXPECT_EQ(read_error(backwards),
            prefix(backwards) + "tensor 'a': data_offsets [2, 1] end before they begin");
}

TEST_F(SafetensorsTest, MalformedHeadersAreRefused) {
  const fs::path json = file("json", "{\"a\": ");
  EXPECT_EQ(read_error(json).rfind(prefix(json) + "its header is not valid JSON: ", 0), 0u);
  const fs::path array = file("array", "[1, 2]");
  EXPECT_EQ(read_error(array), prefix(array) + "its header is not a JSON object");
  const fs::path dtype = file("dtype", R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", 1);
  EXPECT_EQ(read_error(dtype), prefix(dtype) +
                                   "tensor 'a' has dtype 'F8_E4M3', which runner does not read "
                                   "(F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)");
  const fs::path negative = file("negative", R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})");
  EXPECT_EQ(read_error(negative),
            prefix(negative) + "tensor 'a': shape must be a list of non-negative integers");
  const fs::path offsets = file("offsets", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1);
  EXPECT_EQ(read_error(offsets), prefix(offsets) +
                                     "tensor 'a': data_offsets must be two non-negative integers "
                                     "[begin, end]");
  const fs::path meta = file("meta", R"({"__metadata__":{"n":1}})");
  EXPECT_EQ(read_error(meta), prefix(meta) + "__metadata__ is not an object of strings");
  EXPECT_EQ(read_error(dir_), prefix(dir_) + "not a regular file");
  EXPECT_EQ(read_error(dir_ / "absent"), prefix(dir_ / "absent") + "no such file");
}

TEST_F(SafetensorsTest, HeaderErrorsQuoteTheFilesBytesEscaped) {
  const fs::path invalid = file("invalid", "{\"a\xff\":{}}");
  const std::string message = read_error(invalid);
  EXPECT_EQ(message, prefix(invalid) +
                         "its header is not valid JSON: [json.exception.parse_error.101] parse "
                         "error at line 1, column 4: syntax error while parsing object key - "
                         "invalid string: ill-formed UTF-8 byte; last read: '\"a\\xff'; "
                         "expected string literal");
  EXPECT_EQ(message.find('\xff'), std::string::npos);
  const fs::path control = file(
      "control", R"({"a\u001b[31m\nb":{"dtype":"x\u009b","shape":[1],"data_offsets":[0,1]}})", 1);
  EXPECT_EQ(read_error(control), prefix(control) +
                                     "tensor 'a\\e[31m\\nb' has dtype 'x\\u009b', which runner "
                                     "does not read (F64, F32, F16, BF16, I64, I32, I16, I8, U8, "
                                     "BOOL)");
}

TEST_F(SafetensorsTest, WritingRefusesViewsThatDoNotMatchTheirShape) {
  const std::vector<float> three{1, 2, 3};
  const fs::path path = dir_ / "bad.safetensors";
  EXPECT_THROW_MSG(runner::weights::write_safetensors(
                       path, {TensorView{"a", DType::f32, {2, 2}, as_bytes_of(three)}}),
                   runner::Error,
                   "cannot write weights to '" + path.string() +
                       "': tensor 'a': shape [2, 2] of F32 does not match its 12 bytes");
  EXPECT_THROW_MSG(runner::weights::write_safetensors(
                       path, {TensorView{"a", DType::f32, {3}, as_bytes_of(three)},
                              TensorView{"a", DType::f32, {3}, as_bytes_of(three)}}),
                   runner::Error,
                   "cannot write weights to '" + path.string() +
                       "': tensor name 'a' is reserved or given twice");
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
