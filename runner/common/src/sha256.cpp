#include "runner/common/sha256.hpp"

#include <openssl/evp.h>

#include <array>
#include <fstream>
#include <memory>

#include "runner/common/error.hpp"

namespace runner {
namespace {

struct DigestContext {
  DigestContext() : ctx(EVP_MD_CTX_new()) {
    if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1)
      throw Error("cannot initialise SHA-256 (OpenSSL)", {}, ErrorKind::run);
  }
  ~DigestContext() { EVP_MD_CTX_free(ctx); }
  DigestContext(const DigestContext&) = delete;
  DigestContext& operator=(const DigestContext&) = delete;

  void update(const void* data, std::size_t size) { EVP_DigestUpdate(ctx, data, size); }

  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int length = 0;
    EVP_DigestFinal_ex(ctx, digest.data(), &length);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(length * 2);
    for (unsigned int i = 0; i < length; ++i) {
      out += kHex[digest[i] >> 4];
      out += kHex[digest[i] & 0xF];
    }
    return out;
  }

  EVP_MD_CTX* ctx;
};

}  // namespace

std::string sha256_hex(std::string_view data) {
  DigestContext digest;
  digest.update(data.data(), data.size());
  return digest.hex();
}

std::string sha256_file_hex(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path.string() + "' to hash it", {}, ErrorKind::run);
  DigestContext digest;
  std::array<char, 1 << 16> buffer{};
  while (in) {
    in.read(buffer.data(), buffer.size());
    digest.update(buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  return digest.hex();
}

}  // namespace runner
