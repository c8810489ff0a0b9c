#include "abi_record.hpp"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "runner/common/error.hpp"
#include "runner/common/strings.hpp"
#include "runner/host/host.hpp"

namespace fs = std::filesystem;

namespace runner {

HostAbi host_abi() {
  constexpr PluginAbiRecord record = this_abi_record();
  return HostAbi{RUNNER_SDK_ABI_VERSION, record.runner_version, record.torch_version,
                 record.compiler,        record.cxx11_abi,      record.cuda};
}

namespace host::detail {
namespace {

#if defined(__x86_64__)
constexpr unsigned kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr unsigned kMachine = EM_AARCH64;
#else
constexpr unsigned kMachine = 0;  // not checked
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kData = ELFDATA2LSB;
#else
constexpr unsigned char kData = ELFDATA2MSB;
#endif
#if defined(__LP64__)
constexpr unsigned char kClass = ELFCLASS64;
#else
constexpr unsigned char kClass = ELFCLASS32;
#endif

// Tables larger than this are not read: no plugin comes near, and a corrupt
// size must not make the host allocate gigabytes.
constexpr std::uint64_t kMaxTableBytes = 16u << 20;
constexpr std::size_t kHeaderBytes = offsetof(PluginAbiRecord, runner_version);

std::string describe_abi(const HostAbi& abi) {
  std::ostringstream out;
  out << "SDK ABI " << abi.abi_version << ", runner " << abi.runner_version << ", LibTorch "
      << abi.torch_version << ", " << abi.compiler << ", _GLIBCXX_USE_CXX11_ABI=" << abi.cxx11_abi
      << ", CUDA " << (abi.cuda ? "on" : "off");
  return out.str();
}

std::string compiler_family(const std::string& compiler) {
  return compiler.substr(0, compiler.find(' '));
}

std::string major_minor(const std::string& version) {
  const auto first = version.find('.');
  if (first == std::string::npos) return version;
  return version.substr(0, version.find('.', first + 1));
}

Error not_a_plugin(const fs::path& path, const std::string& why) {
  return Error("'" + path.string() + "' is not a runner plugin: " + why,
               "a runner plugin is a shared library whose entry point is declared with "
               "RUNNER_PLUGIN(register_fn) from runner's SDK");
}

Error corrupt(const fs::path& path, const std::string& why) {
  return Error("'" + path.string() + "' is not a valid ELF file: " + why,
               "the file is truncated or damaged; rebuild it");
}

Error malformed(const fs::path& path, const std::string& why) {
  return Error("plugin library '" + path.string() + "' has a malformed ABI record: " + why,
               "rebuild the plugin with RUNNER_PLUGIN from this runner's SDK (" +
                   describe_abi(host_abi()) + ")");
}

Error mismatch(const fs::path& path, const std::vector<std::string>& differences) {
  return Error("plugin library '" + path.string() + "' does not match this runner: " +
                   join(differences, "; "),
               "rebuild the plugin against this runner's SDK (" + describe_abi(host_abi()) + ")");
}

// A read-only view of a file that never reads outside it.
class File {
 public:
  explicit File(const fs::path& path) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd_ < 0)
      throw Error("cannot read plugin library '" + path.string() + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw Error("'" + path.string() + "' is not a runner plugin: it is not a regular file");
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  ~File() { ::close(fd_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  /// True when [offset, offset + length) lies inside the file.
  [[nodiscard]] bool contains(std::uint64_t offset, std::uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
  }

  /// Reads exactly [offset, offset + length); false if outside the file or short.
  bool read(std::uint64_t offset, void* out, std::size_t length) const {
    if (!contains(offset, length)) return false;
    auto* bytes = static_cast<char*>(out);
    while (length > 0) {
      const ssize_t n = ::pread(fd_, bytes, length, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes += n;
      offset += static_cast<std::uint64_t>(n);
      length -= static_cast<std::size_t>(n);
    }
    return true;
  }

  /// The bytes of a section, or nothing if it lies outside the file or is too large.
  [[nodiscard]] std::optional<std::vector<char>> section(const ElfW(Shdr) & header) const {
    if (header.sh_type == SHT_NOBITS || header.sh_size > kMaxTableBytes) return std::nullopt;
    std::vector<char> bytes(header.sh_size);
    if (!read(header.sh_offset, bytes.data(), bytes.size())) return std::nullopt;
    return bytes;
  }

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// The NUL-terminated string at `offset` of a string table, or nothing.
std::optional<std::string_view> string_at(const std::vector<char>& table, std::uint64_t offset) {
  if (offset >= table.size()) return std::nullopt;
  const char* begin = table.data() + offset;
  const void* end = std::memchr(begin, '\0', table.size() - offset);
  if (end == nullptr) return std::nullopt;
  return std::string_view(begin, static_cast<const char*>(end) - begin);
}

// True when the dynamic symbol table defines `runner_plugin_abi`: the entry
// point of a plugin built with an SDK before version 4, which had no record.
bool exports_old_entry(const File& file, const std::vector<ElfW(Shdr)>& sections) {
  for (const auto& header : sections) {
    if (header.sh_type != SHT_DYNSYM || header.sh_entsize != sizeof(ElfW(Sym))) continue;
    if (header.sh_link >= sections.size()) continue;
    const auto symbols = file.section(header);
    const auto names = file.section(sections[header.sh_link]);
    if (!symbols || !names) continue;
    const std::size_t count = symbols->size() / sizeof(ElfW(Sym));
    for (std::size_t i = 0; i < count; ++i) {
      ElfW(Sym) symbol;
      std::memcpy(&symbol, symbols->data() + i * sizeof(ElfW(Sym)), sizeof(symbol));
      if (symbol.st_shndx == SHN_UNDEF) continue;
      if (string_at(*names, symbol.st_name) == std::string_view("runner_plugin_abi")) return true;
    }
  }
  return false;
}

// The bytes of the record section; throws when the file is not a plugin.
std::vector<char> record_bytes(const fs::path& path) {
  const File file(path);
  ElfW(Ehdr) elf;
  if (!file.read(0, &elf, sizeof(elf)) || std::memcmp(elf.e_ident, ELFMAG, SELFMAG) != 0)
    throw not_a_plugin(path, "it is not an ELF file");
  if (elf.e_ident[EI_CLASS] != kClass || elf.e_ident[EI_DATA] != kData)
    throw not_a_plugin(path, std::string("it is not a ") + (kClass == ELFCLASS64 ? "64" : "32") +
                                 "-bit " + (kData == ELFDATA2LSB ? "little" : "big") +
                                 "-endian ELF file");
  if (elf.e_type != ET_DYN)
    throw not_a_plugin(path, "it is not a shared library (ELF type " +
                                 std::to_string(elf.e_type) + ")");
  if (kMachine != 0 && elf.e_machine != kMachine)
    throw not_a_plugin(path, "it was built for another machine (ELF machine " +
                                 std::to_string(elf.e_machine) + ", this runner is " +
                                 std::to_string(kMachine) + ")");
  const std::string no_record = "it has no ABI record (no " + std::string(kAbiRecordSection) +
                                " section)";
  if (elf.e_shoff == 0 || elf.e_shnum == 0) throw not_a_plugin(path, no_record);
  if (elf.e_shentsize != sizeof(ElfW(Shdr)))
    throw corrupt(path, "its section headers are " + std::to_string(elf.e_shentsize) +
                            " bytes each, expected " + std::to_string(sizeof(ElfW(Shdr))));
  std::vector<ElfW(Shdr)> sections(elf.e_shnum);
  if (!file.read(elf.e_shoff, sections.data(), sections.size() * sizeof(ElfW(Shdr))))
    throw corrupt(path, "its section headers lie outside the file");
  if (elf.e_shstrndx >= sections.size())
    throw corrupt(path, "its section name table index is out of range");
  const auto names = file.section(sections[elf.e_shstrndx]);
  if (!names) throw corrupt(path, "its section name table lies outside the file");

  const ElfW(Shdr)* record = nullptr;
  for (const auto& header : sections) {
    if (string_at(*names, header.sh_name) != std::string_view(kAbiRecordSection)) continue;
    if (record != nullptr)
      throw malformed(path, "the file has two " + std::string(kAbiRecordSection) + " sections");
    record = &header;
  }
  if (record == nullptr) {
    if (exports_old_entry(file, sections))
      throw mismatch(path, {"SDK ABI version: expected " + std::to_string(RUNNER_SDK_ABI_VERSION) +
                            ", found " + std::to_string(RUNNER_SDK_ABI_VERSION - 1) +
                            " or older (no ABI record)"});
    throw not_a_plugin(path, no_record);
  }
  if (record->sh_type == SHT_NOBITS || record->sh_size > 4096)
    throw malformed(path, "the " + std::string(kAbiRecordSection) + " section holds " +
                              std::to_string(record->sh_size) + " bytes" +
                              (record->sh_type == SHT_NOBITS ? " of no data" : ""));
  auto bytes = file.section(*record);
  if (!bytes)
    throw corrupt(path, "its " + std::string(kAbiRecordSection) + " section lies outside the file");
  return std::move(*bytes);
}

// A string field of the record: NUL-terminated inside its array, printable.
template <std::size_t N>
std::string text_of(const fs::path& path, const char (&field)[N], const char* name) {
  const void* end = std::memchr(field, '\0', N);
  if (end == nullptr) throw malformed(path, std::string(name) + " is not NUL-terminated");
  const std::string_view text(field, static_cast<const char*>(end) - field);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte > 0x7e) {
      char code[8];
      std::snprintf(code, sizeof(code), "0x%02x", byte);
      throw malformed(path, std::string(name) + " holds a non-printable character (" + code + ")");
    }
  }
  return std::string(text);
}

}  // namespace

PluginAbiRecord read_checked_abi_record(const fs::path& path) {
  const std::vector<char> bytes = record_bytes(path);
  if (bytes.size() < kHeaderBytes)
    throw malformed(path, "the " + std::string(kAbiRecordSection) + " section holds " +
                              std::to_string(bytes.size()) + " bytes, fewer than the " +
                              std::to_string(kHeaderBytes) + "-byte record header");
  PluginAbiRecord record{};
  std::memcpy(&record, bytes.data(), kHeaderBytes);
  char magic[sizeof(record.magic)] = {};
  std::strncpy(magic, kAbiRecordMagic, sizeof(magic) - 1);
  if (std::memcmp(record.magic, magic, sizeof(magic)) != 0)
    throw malformed(path, std::string("it does not start with \"") + kAbiRecordMagic + "\"");

  const HostAbi host = host_abi();
  // Nothing after the version is meaningful when the version differs.
  if (record.abi_version != host.abi_version)
    throw mismatch(path, {"SDK ABI version: expected " + std::to_string(host.abi_version) +
                          ", found " + std::to_string(record.abi_version)});
  if (record.struct_size != sizeof(PluginAbiRecord))
    throw mismatch(path, {"ABI record size: expected " + std::to_string(sizeof(PluginAbiRecord)) +
                          ", found " + std::to_string(record.struct_size)});
  if (bytes.size() != sizeof(PluginAbiRecord))
    throw malformed(path, "the " + std::string(kAbiRecordSection) + " section holds " +
                              std::to_string(bytes.size()) + " bytes for a " +
                              std::to_string(sizeof(PluginAbiRecord)) + "-byte record");
  std::memcpy(&record, bytes.data(), sizeof(record));

  const std::string runner_version = text_of(path, record.runner_version, "runner_version");
  const std::string torch_version = text_of(path, record.torch_version, "torch_version");
  const std::string compiler = text_of(path, record.compiler, "compiler");
  static_cast<void>(text_of(path, record.plugin_version, "plugin_version"));

  std::vector<std::string> differences;
  auto expect = [&](const char* what, const std::string& expected, const std::string& found) {
    differences.push_back(std::string(what) + ": expected " + expected + ", found " + found);
  };
  if (major_minor(runner_version) != major_minor(host.runner_version))
    expect("runner version", host.runner_version, runner_version);
  if (torch_version != host.torch_version)
    expect("LibTorch version", host.torch_version, torch_version);
  if (compiler_family(compiler) != compiler_family(host.compiler))
    expect("compiler", host.compiler, compiler);
  if (record.cxx11_abi != host.cxx11_abi)
    expect("_GLIBCXX_USE_CXX11_ABI", std::to_string(host.cxx11_abi),
           std::to_string(record.cxx11_abi));
  if (record.cuda != host.cuda) expect("CUDA", host.cuda ? "on" : "off", record.cuda ? "on" : "off");
  if (!differences.empty()) throw mismatch(path, differences);
  return record;
}

}  // namespace host::detail
}  // namespace runner
