// Files that are valid but huge are refused by runner's LibTorch-free
// readers before anything is allocated for them, with the limit in the
// message (docs/data.md#limits): .npy, IDX, PNG and JPEG headers, and the
// metadata of exported models. Also the inputs that crashed these readers
// before they were factored out and fuzzed (docs/reliability.md#fuzzing).
#include <gtest/gtest.h>

#include <runner/data_error.hpp>
#include <runner/options.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/expect_throw_msg.hpp"
#include "formats/export_meta.hpp"
#include "formats/idx_header.hpp"
#include "formats/image_decode.hpp"
#include "formats/npy_header.hpp"
#include "runner/weights/zip_directory.hpp"

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

Bytes npy(const std::string& dict) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes b{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<std::uint8_t>(header.size() & 0xFF),
          static_cast<std::uint8_t>(header.size() >> 8)};
  b.insert(b.end(), header.begin(), header.end());
  return b;
}

Bytes idx(std::vector<std::uint32_t> dims) {
  Bytes b{0, 0, 8, static_cast<std::uint8_t>(dims.size())};
  for (const std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<std::uint8_t>(d >> shift));
  return b;
}

// A seed image of the fuzz corpus (its first byte is the fuzz target's options).
Bytes seed_image(const std::string& name) {
  std::ifstream in(fs::path(RUNNER_SOURCE_DIR) / "tests/fuzz/corpus/image" / name, std::ios::binary);
  Bytes b{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  b.erase(b.begin());
  return b;
}

std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFF;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320U & (0U - (c & 1)));
  }
  return ~c;
}

void put_be32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}

// Decodes, failing the test if any pixel memory is asked for.
void decode_unallocated(const Bytes& file, const std::string& name) {
  (void)runner_loaders::decode_image(
      file.data(), file.size(), 3, 0,
      [](int, int, int) -> std::uint8_t* {
        ADD_FAILURE() << "pixel memory was allocated";
        throw std::runtime_error("allocated");
      },
      name);
}

// A zip archive of stored records, as torch.jit.save and runner-export write one.
std::string zip(const std::vector<std::pair<std::string, std::string>>& records) {
  const auto le = [](std::string& s, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
  };
  std::string file, directory;
  for (const auto& [name, data] : records) {
    const std::uint64_t local = file.size();
    le(file, 0x04034b50, 4), le(file, 20, 2), le(file, 0, 2), le(file, 0, 2), le(file, 0, 4);
    le(file, 0, 4), le(file, data.size(), 4), le(file, data.size(), 4), le(file, name.size(), 2);
    le(file, 0, 2);
    file += name + data;
    le(directory, 0x02014b50, 4), le(directory, 20, 2), le(directory, 20, 2), le(directory, 0, 2);
    le(directory, 0, 2), le(directory, 0, 4), le(directory, 0, 4), le(directory, data.size(), 4);
    le(directory, data.size(), 4), le(directory, name.size(), 2), le(directory, 0, 2);
    le(directory, 0, 2), le(directory, 0, 2), le(directory, 0, 2), le(directory, 0, 4);
    le(directory, local, 4);
    directory += name;
  }
  const std::uint64_t at = file.size();
  file += directory;
  le(file, 0x06054b50, 4), le(file, 0, 4), le(file, records.size(), 2), le(file, records.size(), 2);
  le(file, directory.size(), 4), le(file, at, 4), le(file, 0, 2);
  return file;
}

std::map<std::string, std::string> metadata(const std::string& file,
                                            runner_models::exported::ArchiveKind kind) {
  return runner_models::exported::read_archive_metadata(
      file.size(),
      [&](std::uint64_t offset, std::size_t n) {
        return offset >= file.size() ? std::string() : file.substr(offset, n);
      },
      kind, "model", "file", "the TorchScript file 'm.pt'");
}

TEST(FileFormats, AnNpyHeaderDeclaring2To40ElementsIsRefusedUnallocated) {
  const Bytes b = npy("{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776,), }");
  EXPECT_THROW_MSG((void)runner_loaders::parse_npy_header(b.data(), b.size(), "x.npy"),
                   runner::DataError,
                   "'x.npy': shape (1099511627776,) needs 1099511627776 bytes of data after the "
                   "128-byte header, the file has 0");
}

TEST(FileFormats, AnNpyRowOverTheLimitIsRefusedEvenWithNoRows) {
  // No rows, so the (empty) data matches; one row would take 2^31 bytes.
  const Bytes b = npy("{'descr': '|u1', 'fortran_order': False, 'shape': (0, 2147483648), }");
  EXPECT_THROW_MSG((void)runner_loaders::parse_npy_header(b.data(), b.size(), "x.npy"),
                   runner::DataError,
                   "'x.npy': one sample (a row of shape (0, 2147483648)) takes 2147483648 bytes, "
                   "more than the 1073741824 (1 GiB) runner reads per sample");
}

TEST(FileFormats, AnNpyHeaderLongerThanTheLimitIsRefusedUnread) {
  Bytes b{0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0x01, 0x00, 0x01, 0x00};  // 65537 bytes
  EXPECT_THROW_MSG((void)runner_loaders::parse_npy_header(b.data(), b.size(), "x.npy"),
                   runner::DataError,
                   "'x.npy': its .npy header declares 65537 bytes, more than the 65536 runner "
                   "reads (np.save writes a few hundred)");
}

TEST(FileFormats, AnNpyDescrWithNothingAfterItIsADataError) {
  // Crashed the loader before: std::out_of_range escaped instead of DataError.
  const std::string header = "{'descr':";  // unpadded: the header ends at the colon
  Bytes b{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<std::uint8_t>(header.size()), 0};
  b.insert(b.end(), header.begin(), header.end());
  EXPECT_THROW_MSG((void)runner_loaders::parse_npy_header(b.data(), b.size(), "x.npy"),
                   runner::DataError, "'x.npy': the .npy header's descr is not a quoted dtype");
}

TEST(FileFormats, AnIdxImageOf65535SquaredPixelsIsRefusedUnallocated) {
  const Bytes b = idx({1, 65535, 65535});
  EXPECT_THROW_MSG((void)runner_loaders::parse_idx_header(b.data(), b.size(), 3, "x-idx3-ubyte"),
                   runner::DataError,
                   "'x-idx3-ubyte': dimensions 1x65535x65535 make samples of 4294836225 bytes, "
                   "more than the 16777216 (4096 x 4096) runner reads per sample");
}

TEST(FileFormats, IdxSizesWhoseProductOverflowsAreRefused) {
  // Overflowed a signed 64-bit product before (undefined behaviour).
  const Bytes b = idx({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF});
  EXPECT_THROW_MSG((void)runner_loaders::parse_idx_header(b.data(), b.size(), 3, "x-idx3-ubyte"),
                   runner::DataError,
                   "'x-idx3-ubyte': dimensions 4294967295x4294967295x4294967295 make samples of "
                   "18446744065119617025 bytes, more than the 16777216 (4096 x 4096) runner "
                   "reads per sample");
}

TEST(FileFormats, APngOf65535SquaredPixelsIsRefusedBeforeItsPixelsAreAllocated) {
  Bytes png = seed_image("rgb.png");
  put_be32(png, 16, 65535);  // IHDR width, height
  put_be32(png, 20, 65535);
  put_be32(png, 29, crc32(png.data() + 12, 17));
  EXPECT_THROW_MSG(decode_unallocated(png, "big.png"), runner::SampleError,
                   "'big.png' is a PNG of 65535 x 65535 pixels, more than the 67108864 runner "
                   "decodes");
}

// libjpeg itself refuses a side over 65,500 pixels; this is the largest it reads.
TEST(FileFormats, AJpegOf65500SquaredPixelsIsRefusedBeforeItsPixelsAreAllocated) {
  Bytes jpeg = seed_image("rgb.jpg");
  std::size_t sof = 2;
  while (sof + 9 < jpeg.size() && !(jpeg[sof] == 0xFF && jpeg[sof + 1] == 0xC0)) ++sof;
  ASSERT_LT(sof + 9, jpeg.size());
  for (const std::size_t at : {sof + 5, sof + 7}) {
    jpeg[at] = 0xFF;  // 65500
    jpeg[at + 1] = 0xDC;
  }
  EXPECT_THROW_MSG(decode_unallocated(jpeg, "big.jpg"), runner::SampleError,
                   "'big.jpg' is a JPEG of 65500 x 65500 pixels, more than the 67108864 runner "
                   "decodes");
}

TEST(FileFormats, AnExportedInputShapeOverTheLimitIsRefused) {
  const std::string file =
      zip({{"m/data.pkl", "x"}, {"m/extra/runner.json", R"({"runner.input_shape": "1,1048576,1048576"})"}});
  const auto stored = metadata(file, runner_models::exported::ArchiveKind::torchscript);
  EXPECT_EQ(stored.at("runner.input_shape"), "1,1048576,1048576");
  EXPECT_THROW_MSG((void)runner_models::exported::parse_meta_text(stored, "file"), runner::OptionError,
                   "its metadata key runner.input_shape = '1,1048576,1048576' declares more than "
                   "2147483648 (2^31) input elements, more than runner feeds a model");
}

TEST(FileFormats, AMetadataFileOverTheLimitIsRefusedUnread) {
  const std::string file =
      zip({{"m/data.pkl", "x"}, {"m/extra/runner.json", std::string((1 << 20) + 1, ' ')}});
  EXPECT_THROW_MSG((void)metadata(file, runner_models::exported::ArchiveKind::torchscript),
                   runner::OptionError,
                   "the TorchScript file 'm.pt' has a metadata file 'm/extra/runner.json' of "
                   "1048577 bytes, more than the 1048576 runner reads");
}

TEST(FileFormats, AZipClaimingMoreRecordsThanItsDirectoryHoldsIsRefusedUnallocated) {
  std::string file = zip({{"m/data.pkl", "x"}});
  file[file.size() - 12] = file[file.size() - 11] = '\xFF';  // 65535 records, on this disk
  file[file.size() - 14] = file[file.size() - 13] = '\xFF';  // and in all
  EXPECT_THROW_MSG((void)runner::weights::read_zip_directory(file), runner::weights::ZipError,
                   "its zip archive is damaged: it claims 65535 records, more than its 56-byte "
                   "directory holds");
}

}  // namespace
