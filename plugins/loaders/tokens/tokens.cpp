// Loader `tokens`: a flat binary file of token ids (uint16 or uint32, little
// endian, as nanoGPT's prepare scripts write them) cut into windows of
// seq_len + 1 tokens: the input is the first seq_len, the target the same
// window one token later. Window i starts at token i x stride. The last
// eval_fraction of the file is the eval split, the rest the train split, so
// the two never share a token.
//
// mode = "random" maps the file and gathers windows at random; mode =
// "stream" reads it front to back with ordinary buffered reads (a file
// larger than memory, or on storage that is slow to seek) and the host
// shuffles through its shuffle buffer.
#include <runner/sdk.hpp>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "../common/mapped_file.hpp"
#include "../common/formats/record_files.hpp"

namespace {

struct TokensOptions {
  std::string path;
  std::string dtype = "uint16";
  std::int64_t seq_len = 128;
  std::int64_t vocab = 0;
  double eval_fraction = 0.1;
  std::int64_t stride = 0;  // 0: seq_len
  std::string mode = "random";
};

using runner_loaders::token_at;

class Tokens final : public runner::Loader {
 public:
  Tokens(const TokensOptions& o, const runner::LoaderContext& context)
      : file_(o.path, "path"),
        width_(o.dtype == "uint32" ? 4 : 2),
        seq_len_(o.seq_len),
        vocab_(o.vocab),
        stride_(o.stride > 0 ? o.stride : o.seq_len),
        stream_(o.mode == "stream") {
    const std::int64_t total = runner_loaders::check_token_file(file_.data(), file_.size(), width_,
                                                                vocab_, o.dtype, o.path);
    const std::int64_t eval_tokens =
        static_cast<std::int64_t>(static_cast<double>(total) * o.eval_fraction);
    const bool train = context.split == runner::Split::train;
    first_ = train ? 0 : total - eval_tokens;
    const std::int64_t length = train ? total - eval_tokens : eval_tokens;
    if (length < seq_len_ + 1)
      throw runner::DataError("'" + o.path + "': the " + std::string(train ? "train" : "eval") +
                              " split has " + std::to_string(length) + " tokens, fewer than one "
                              "window of seq_len + 1 = " + std::to_string(seq_len_ + 1) +
                              (train ? "" : " (raise eval_fraction)"));
    windows_ = (length - seq_len_ - 1) / stride_ + 1;
    if (!stream_) file_.advise_random();
  }

  runner::DataSpec spec() const override { return {{seq_len_}, vocab_}; }
  std::int64_t size() const override { return windows_; }
  bool streaming() const override { return stream_; }

  runner::Example get(std::int64_t index) override {
    runner::Batch b = get_batch({index});
    return {b.inputs[0], b.targets[0]};
  }

  runner::Batch get_batch(const std::vector<std::int64_t>& indices) override {
    if (stream_) return runner::Loader::get_batch(indices);  // throws: no random access
    const auto n = static_cast<std::int64_t>(indices.size());
    runner::Batch b{torch::empty({n, seq_len_}, torch::kLong), torch::empty({n, seq_len_}, torch::kLong), n};
    std::int64_t* in = b.inputs.data_ptr<std::int64_t>();
    std::int64_t* out = b.targets.data_ptr<std::int64_t>();
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t w = indices[static_cast<std::size_t>(j)];
      if (w < 0 || w >= windows_)
        throw runner::DataError("window " + std::to_string(w) + " is outside the split's " +
                                std::to_string(windows_) + " windows");
      const std::int64_t start = first_ + w * stride_;
      for (std::int64_t k = 0; k < seq_len_; ++k) {
        in[j * seq_len_ + k] = token_at(file_.data(), width_, start + k);
        out[j * seq_len_ + k] = token_at(file_.data(), width_, start + k + 1);
      }
    }
    return b;
  }

  std::unique_ptr<runner::SampleStream> open(std::int64_t) override {
    if (!stream_) return runner::Loader::open(0);  // throws: mode = "random"
    return std::make_unique<Reader>(*this);
  }

 private:
  // The split's windows in order, read with buffered sequential reads.
  class Reader final : public runner::SampleStream {
   public:
    explicit Reader(const Tokens& t) : t_(t), in_(t.file_.path(), std::ios::binary) {
      if (!in_) throw runner::DataError("cannot open '" + t.file_.path() + "' to read it");
      in_.seekg(t.first_ * t.width_);
      base_ = t.first_;
    }
    std::optional<runner::Example> next() override {
      if (window_ == t_.windows_) return std::nullopt;
      const std::int64_t start = t_.first_ + window_ * t_.stride_;
      // Drop what lies before this window, read up to its end.
      const std::int64_t drop = std::min<std::int64_t>(start - base_, static_cast<std::int64_t>(buffer_.size()));
      buffer_.erase(buffer_.begin(), buffer_.begin() + drop);
      base_ += drop;
      if (base_ < start) skip(start - base_);
      while (static_cast<std::int64_t>(buffer_.size()) < t_.seq_len_ + 1) read_more();
      torch::Tensor tokens = torch::tensor(buffer_, torch::kLong).narrow(0, 0, t_.seq_len_ + 1);
      ++window_;
      return runner::Example{tokens.narrow(0, 0, t_.seq_len_).clone(),
                             tokens.narrow(0, 1, t_.seq_len_).clone()};
    }

   private:
    void read_more() {
      std::vector<std::uint8_t> chunk(static_cast<std::size_t>(4096 * t_.width_));
      in_.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(chunk.size()));
      const std::int64_t got = in_.gcount() / t_.width_;
      if (got == 0)
        throw runner::DataError("'" + t_.file_.path() + "' ended early while streaming it (was "
                                "it truncated after validation?)");
      for (std::int64_t i = 0; i < got; ++i) buffer_.push_back(token_at(chunk.data(), t_.width_, i));
    }
    void skip(std::int64_t tokens) {  // stride > seq_len + 1: tokens no window reads
      in_.seekg(tokens * t_.width_, std::ios::cur);
      base_ += tokens;
    }

    const Tokens& t_;
    std::ifstream in_;
    std::vector<std::int64_t> buffer_;  // tokens from base_ on
    std::int64_t base_ = 0;
    std::int64_t window_ = 0;
  };

  runner_loaders::MappedFile file_;
  std::int64_t width_, seq_len_, vocab_, stride_;
  bool stream_;
  std::int64_t first_ = 0;    // the split's first token
  std::int64_t windows_ = 0;  // windows in the split
};

void register_plugins(runner::Registrar& registrar) {
  using O = TokensOptions;
  runner::OptionBinder<O> options;
  options.field("path", &O::path, "flat binary file of token ids").path().required();
  options.field("dtype", &O::dtype, "width of a token id (little endian)").one_of({"uint16", "uint32"});
  options.field("seq_len", &O::seq_len, "tokens per sample (input and shifted target)")
      .range(1, 1 << 20);
  options.field("vocab", &O::vocab, "the vocabulary: every token id must be below it")
      .range(2, 1LL << 32)
      .required();
  options.field("eval_fraction", &O::eval_fraction,
                "the last fraction of the file, held out as the eval split")
      .range(0.0, 0.9);
  options.field("stride", &O::stride, "tokens between window starts; 0: seq_len (no overlap)")
      .range(0, 1 << 20);
  options.field("mode", &O::mode,
                "random: memory-mapped random access; stream: read in order (the host shuffles "
                "through data.shuffle_buffer)")
      .one_of({"random", "stream"});
  registrar.add_loader("tokens",
                       "token ids from a flat uint16/uint32 file in windows with next-token "
                       "targets; eval: the file's last eval_fraction",
                       options, [](const O& o, const runner::LoaderContext& ctx) {
                         return std::make_unique<Tokens>(o, ctx);
                       });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
