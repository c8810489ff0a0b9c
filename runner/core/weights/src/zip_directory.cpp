#include "runner/weights/zip_directory.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <string_view>

namespace runner::weights {
namespace {

constexpr std::uint64_t kEndRecord = 22;        // end of central directory, without comment
constexpr std::uint64_t kLocator = 20;          // zip64 end locator
constexpr std::uint64_t kEnd64 = 56;            // zip64 end record
constexpr std::uint64_t kEntry = 46;            // central directory entry, without name
constexpr std::uint64_t kLocal = 30;            // local header, without name
constexpr std::uint32_t kMax32 = 0xFFFFFFFF;

[[noreturn]] void damaged(const std::string& what) {
  throw ZipError("its zip archive is damaged: " + what, false);
}

std::uint64_t le(std::string_view bytes, std::size_t at, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = n; i-- > 0;) v = (v << 8) | static_cast<std::uint8_t>(bytes[at + i]);
  return v;
}

bool signature(std::string_view bytes, std::size_t at, std::uint32_t sig) {
  return bytes.size() >= at + 4 && le(bytes, at, 4) == sig;
}

// Exactly `n` bytes at `offset`, which the caller has checked lie in the file.
std::string exactly(const ZipRead& read, std::uint64_t offset, std::uint64_t n, const char* what) {
  std::string bytes = read(offset, static_cast<std::size_t>(n));
  if (bytes.size() != n) damaged(std::string("cannot read its ") + what);
  return bytes;
}

struct End {
  std::uint64_t at = 0;         // where the end record (or the zip64 one) starts
  std::uint64_t entries = 0;
  std::uint64_t directory = 0;  // offset
  std::uint64_t directory_size = 0;
};

End find_end(std::uint64_t file_size, const ZipRead& read) {
  const std::uint64_t tail_size = std::min<std::uint64_t>(file_size, kEndRecord + 0xFFFF + kLocator);
  const std::uint64_t tail_at = file_size - tail_size;
  const std::string tail = read(tail_at, static_cast<std::size_t>(tail_size));
  if (tail.size() != tail_size || tail_size < kEndRecord)
    throw ZipError("its zip archive has no end record: it is cut short, or not a zip archive", true);
  // The last signature whose comment runs exactly to the end of the file.
  std::size_t at = tail.size() - kEndRecord + 1;
  for (;;) {
    if (at-- == 0) throw ZipError("its zip archive has no end record: it is cut short, or not a zip archive", true);
    if (signature(tail, at, 0x06054b50) && at + kEndRecord + le(tail, at + 20, 2) == tail.size())
      break;
  }
  End end{tail_at + at, le(tail, at + 10, 2), le(tail, at + 16, 4), le(tail, at + 12, 4)};
  if (le(tail, at + 4, 2) != 0 || le(tail, at + 6, 2) != 0 || le(tail, at + 8, 2) != end.entries)
    damaged("it spans several disks");
  const bool wide = end.entries == 0xFFFF || end.directory == kMax32 || end.directory_size == kMax32;
  if (!wide || at < kLocator || !signature(tail, at - kLocator, 0x07064b50)) return end;
  // Zip64: the locator just before the end record points at the zip64 end record.
  const std::uint64_t at64 = le(tail, at - kLocator + 8, 8);
  if (at64 > end.at - kLocator || end.at - kLocator - at64 < kEnd64)
    damaged("its zip64 end record lies outside the file");
  const std::string record = exactly(read, at64, kEnd64, "zip64 end record");
  if (!signature(record, 0, 0x06064b50)) damaged("its zip64 end record has no signature");
  if (le(record, 16, 4) != 0 || le(record, 20, 4) != 0 || le(record, 24, 8) != le(record, 32, 8))
    damaged("it spans several disks");
  return End{at64, le(record, 32, 8), le(record, 48, 8), le(record, 40, 8)};
}

// The zip64 extra field (id 1) replaces each 32-bit field that is 0xFFFFFFFF,
// in the order size, stored size, local header offset.
void widen(std::string_view extra, const std::string& name, std::uint64_t& size,
           std::uint64_t& stored, std::uint64_t& local) {
  std::size_t at = 0;
  while (at + 4 <= extra.size()) {
    const std::uint64_t id = le(extra, at, 2);
    const std::uint64_t length = le(extra, at + 2, 2);
    if (at + 4 + length > extra.size()) damaged("the extra field of record '" + name + "' runs past it");
    if (id == 1) {
      std::size_t field = at + 4;
      for (std::uint64_t* value : {&size, &stored, &local}) {
        if (*value != kMax32) continue;
        if (field + 8 > at + 4 + length)
          damaged("the zip64 field of record '" + name + "' is too short");
        *value = le(extra, field, 8);
        field += 8;
      }
      return;
    }
    at += 4 + length;
  }
}

}  // namespace

std::vector<ZipEntry> read_zip_directory(std::uint64_t file_size, const ZipRead& read) {
  const End end = find_end(file_size, read);
  if (end.directory > end.at || end.directory_size > end.at - end.directory)
    damaged("its directory (" + std::to_string(end.directory_size) + " bytes at byte " +
            std::to_string(end.directory) + ") lies outside the file");
  if (end.entries > kMaxZipEntries)
    damaged("it claims " + std::to_string(end.entries) + " records, more than the " +
            std::to_string(kMaxZipEntries) + " runner reads");
  if (end.entries > end.directory_size / kEntry)
    damaged("it claims " + std::to_string(end.entries) + " records, more than its " +
            std::to_string(end.directory_size) + "-byte directory holds");
  const std::string directory = exactly(read, end.directory, end.directory_size, "directory");

  std::vector<ZipEntry> entries;
  entries.reserve(static_cast<std::size_t>(end.entries));
  std::set<std::string_view> names;
  // [first byte, one past the last] of each record, local header included.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < end.entries; ++i) {
    const std::string where = "directory entry " + std::to_string(i + 1);
    if (directory.size() - at < kEntry || !signature(directory, at, 0x02014b50))
      damaged(where + " has no signature");
    const std::uint64_t name_length = le(directory, at + 28, 2);
    const std::uint64_t extra_length = le(directory, at + 30, 2);
    const std::uint64_t comment_length = le(directory, at + 32, 2);
    if (directory.size() - at - kEntry < name_length + extra_length + comment_length)
      damaged(where + " runs past the directory");
    ZipEntry e;
    e.name = directory.substr(at + kEntry, name_length);
    e.method = static_cast<std::uint16_t>(le(directory, at + 10, 2));
    e.stored = le(directory, at + 20, 4);
    e.size = le(directory, at + 24, 4);
    std::uint64_t local = le(directory, at + 42, 4);
    if (e.name.empty()) damaged(where + " has no name");
    widen(std::string_view(directory).substr(at + kEntry + name_length, extra_length), e.name,
          e.size, e.stored, local);
    if ((le(directory, at + 8, 2) & 1) != 0) damaged("record '" + e.name + "' is encrypted");
    at += kEntry + name_length + extra_length + comment_length;

    if (local > end.directory || end.directory - local < kLocal)
      damaged("record '" + e.name + "' starts outside the file's records");
    const std::string header = exactly(read, local, kLocal, "local header");
    if (!signature(header, 0, 0x04034b50))
      damaged("the local header of record '" + e.name + "' has no signature");
    const std::uint64_t skip = kLocal + le(header, 26, 2) + le(header, 28, 2);
    if (end.directory - local < skip || end.directory - local - skip < e.stored)
      damaged("record '" + e.name + "' (" + std::to_string(e.stored) + " bytes at byte " +
              std::to_string(local) + ") runs past the records into the directory");
    e.data = local + skip;
    spans.emplace_back(local, e.data + e.stored);
    entries.push_back(std::move(e));
  }
  for (const ZipEntry& e : entries)
    if (!names.insert(e.name).second) damaged("it holds record '" + e.name + "' twice");
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second)
      damaged("two records overlap at byte " + std::to_string(spans[i].first));
  return entries;
}

std::vector<ZipEntry> read_zip_directory(const std::string& bytes) {
  return read_zip_directory(bytes.size(), [&](std::uint64_t offset, std::size_t n) {
    if (offset >= bytes.size()) return std::string();
    return bytes.substr(static_cast<std::size_t>(offset), n);
  });
}

ZipRead zip_read_of(std::ifstream& in) {
  return [&in](std::uint64_t offset, std::size_t n) {
    std::string bytes(n, '\0');
    in.clear();
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(bytes.data(), static_cast<std::streamsize>(n));
    bytes.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    return bytes;
  };
}

}  // namespace runner::weights
