// Bounds on what an experiment may make runner read and build (limits.hpp).
#include "limits.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace runner::experiment::detail {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

std::string megabytes(std::size_t bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }

}  // namespace

std::optional<ReadFailure> read_experiment_file(const std::filesystem::path& path,
                                                std::string& text) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the type is then
  // checked on the descriptor itself, so a file swapped in between is seen.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ReadFailure{std::strerror(errno), {}};
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) return ReadFailure{std::strerror(errno), {}};
  if (S_ISDIR(info.st_mode)) return ReadFailure{std::strerror(EISDIR), {}};
  if (!S_ISREG(info.st_mode))
    return ReadFailure{"not a regular file (" + kind_of(info.st_mode) + ")",
                       "an experiment is read from a regular file"};
  const ReadFailure too_big{"larger than " + megabytes(kMaxFileBytes),
                            "an experiment file may hold at most " + megabytes(kMaxFileBytes) +
                                "; split a long [[trial]] list into [sweep] axes or several files"};
  if (static_cast<std::size_t>(info.st_size) > kMaxFileBytes) return too_big;
  text.clear();
  text.reserve(static_cast<std::size_t>(info.st_size));
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ReadFailure{std::strerror(errno), {}};
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxFileBytes) return too_big;  // it grew while being read
  }
  return std::nullopt;
}

std::optional<TextProblem> find_text_problem(std::string_view text) {
  // The depth of a place in the document: the parts of the current [table]
  // header, one level per enclosing array or inline table plus the dotted
  // parts of the key that opened it, and the dotted parts of the key being
  // read. Dots in values (1.5, dates) and in quoted keys do not nest.
  struct Open {
    char bracket;         // '[' array, '{' inline table
    std::size_t levels;   // this level and the key parts that led to it
  };
  std::vector<Open> open;
  std::size_t table_levels = 0;  // from the last [header]
  std::size_t enclosing = 0;     // sum of open[i].levels
  std::size_t key_dots = 0;      // dotted parts of the current key, beyond the first
  bool in_key = true;            // reading a key (else a value)
  bool in_header = false;
  bool line_start = true;        // only whitespace so far on this line
  TextPosition pos;

  const std::size_t n = text.size();
  std::size_t i = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // a byte order mark, which toml++ skips
  auto advance = [&](std::size_t count) {
    for (std::size_t k = 0; k < count && i < n; ++k, ++i) {
      if (text[i] == '\n') {
        ++pos.line;
        pos.column = 1;
      } else {
        ++pos.column;
      }
    }
  };
  auto starts = [&](std::string_view what) { return text.substr(i, what.size()) == what; };
  auto too_deep = [&] {
    return table_levels + enclosing + key_dots + (in_header ? 1 : 0) > kMaxNesting;
  };
  auto deep = [&] {
    return TextProblem{pos,
                       "nested more than " + std::to_string(kMaxNesting) +
                           " levels deep (dotted key parts, arrays and inline tables)",
                       "an experiment needs a few levels; this is not one"};
  };

  // The last character that was not whitespace, outside strings and
  // comments ('\n' at the start of a line). A quote opens a string only where
  // a key or a value starts; inside a bare token (256'x, 0x."x") toml++ reads
  // it, and whatever follows, as part of the token. After a dot that is a
  // dotted key's next part, never in a value, where a dot is a number's.
  char prev = '\n';
  const auto may_open_string = [&] {
    if (prev == '.') return in_key || in_header;
    return std::string_view("=[{,\n").find(prev) != std::string_view::npos;
  };

  while (i < n) {
    const char c = text[i];
    if ((c == '"' || c == '\'') && may_open_string()) {
      prev = c;
      const bool basic = c == '"';
      const std::string_view triple = basic ? "\"\"\"" : "'''";
      if (starts(triple)) {
        advance(3);
        while (i < n && !starts(triple)) {
          if (!basic || text[i] != '\\') {
            advance(1);
            continue;
          }
          // toml++ asks whether the character after a backslash, and the
          // first one after a line-ending backslash's whitespace, is Unicode
          // whitespace: undefined behaviour for most non-ASCII characters.
          advance(1);
          const auto ascii_space = [&] {
            return i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n');
          };
          if (ascii_space()) {
            while (ascii_space()) advance(1);
            if (i < n && (static_cast<unsigned char>(text[i]) & 0x80U) != 0)
              return TextProblem{pos, "non-ASCII character right after a line-ending backslash",
                                 "toml++ cannot read this safely; start the continued text with "
                                 "an ASCII character"};
            continue;
          }
          if (i < n && (static_cast<unsigned char>(text[i]) & 0x80U) != 0)
            return TextProblem{pos, "invalid escape: a backslash before a non-ASCII character",
                               "escape a character as \\uXXXX, or drop the backslash"};
          advance(1);
        }
        advance(3);
      } else {
        advance(1);
        while (i < n && text[i] != c && text[i] != '\n') advance(basic && text[i] == '\\' ? 2 : 1);
        if (i < n && text[i] == c) advance(1);
      }
      line_start = false;
      continue;
    }
    if (c == '#') {
      while (i < n && text[i] != '\n') advance(1);
      continue;
    }
    if (c == '\n') {
      advance(1);
      line_start = true;
      prev = '\n';
      if (open.empty()) {
        in_key = true;
        in_header = false;
        key_dots = 0;
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      advance(1);
      continue;
    }
    if ((static_cast<unsigned char>(c) & 0x80U) != 0)
      return TextProblem{pos, "non-ASCII character outside a string or comment",
                         "keys and values other than strings are ASCII; quote the text"};
    prev = c;
    if (in_header) {
      if (c == '.') {
        ++key_dots;
        if (too_deep()) return deep();
      } else if (c == ']') {
        table_levels = key_dots + 1;
        key_dots = 0;
        in_header = false;
        in_key = true;
        while (i < n && text[i] == ']') advance(1);
        line_start = false;
        continue;
      }
      advance(1);
      continue;
    }
    if (in_key) {
      if (c == '[' && line_start && open.empty()) {
        while (i < n && text[i] == '[') advance(1);
        in_header = true;
        key_dots = 0;
        line_start = false;
        continue;
      }
      if (c == '.') {
        ++key_dots;
        if (too_deep()) return deep();
      } else if (c == '=') {
        in_key = false;
      } else if (c == '}' && !open.empty() && open.back().bracket == '{') {
        // An empty inline table, or one ending after a trailing key.
        enclosing -= open.back().levels;
        open.pop_back();
        key_dots = 0;
      }
      advance(1);
      line_start = false;
      continue;
    }
    // A value. Anything but a bracket, a brace or a comma starts a bare token
    // (a number, a date, true, or garbage), which toml++ reads up to ASCII
    // whitespace, a comma, a closing bracket or brace, or a comment, asking
    // of every character whether it is whitespace: quotes and brackets inside
    // it open nothing, and a non-ASCII character in it is refused.
    if (std::string_view("[{]},").find(c) == std::string_view::npos) {
      while (i < n && std::string_view(" \t\r\n]},#").find(text[i]) == std::string_view::npos) {
        if ((static_cast<unsigned char>(text[i]) & 0x80U) != 0)
          return TextProblem{pos, "non-ASCII character outside a string or comment",
                             "keys and values other than strings are ASCII; quote the text"};
        prev = text[i];
        advance(1);
      }
      line_start = false;
      continue;
    }
    if (c == '[' || c == '{') {
      open.push_back({c, key_dots + 1});
      enclosing += key_dots + 1;
      key_dots = 0;
      if (too_deep()) return deep();
      in_key = c == '{';
    } else if ((c == ']' || c == '}') && !open.empty()) {
      enclosing -= open.back().levels;
      open.pop_back();
      key_dots = 0;
    } else if (c == ',' && !open.empty() && open.back().bracket == '{') {
      in_key = true;
      key_dots = 0;
    }
    advance(1);
    line_start = false;
  }
  return std::nullopt;
}

}  // namespace runner::experiment::detail
