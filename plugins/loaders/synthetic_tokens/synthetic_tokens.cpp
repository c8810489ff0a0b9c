// Loader `synthetic_tokens`: language-model data from a seeded random Markov
// chain over `vocab` tokens. Each token has four likely successors (drawn at
// random, with probabilities 0.45, 0.25, 0.15 and 0.10) and, with
// probability 0.05, any token at all; so the next token is predictable
// (entropy about 1.6 nats against log(vocab) for a uniform guess) and a
// model's loss really goes down.
//
// The chain is a function of the run seed and data_seed. Each split walks
// its own stream of the chain (train and eval start from different
// generator seeds), cut into `size` consecutive, non-overlapping sequences:
// sample i's input is tokens [i * seq_len, (i + 1) * seq_len) of the stream
// and its target the same window one token later. Generated once at
// construction; batches are one gather.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <runner/sdk.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace {

struct TokensOptions {
  std::int64_t vocab = 256;
  std::int64_t seq_len = 128;
  std::int64_t size = 1024;
  std::int64_t data_seed = 0;
};

// Probabilities of a token's four successors; the rest (0.05) is spread
// uniformly over the vocabulary.
constexpr std::array<double, 4> kSuccessorShares{0.45, 0.25, 0.15, 0.10};

// splitmix64's finaliser: nearby seeds give unrelated generator states.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class SyntheticTokens final : public runner::Loader {
 public:
  SyntheticTokens(const TokensOptions& o, const runner::LoaderContext& context)
      : vocab_(o.vocab), seq_len_(o.seq_len), size_(o.size) {
    const std::uint64_t chain_seed = context.seed ^ static_cast<std::uint64_t>(o.data_seed);
    auto chain_generator = at::make_generator<at::CPUGeneratorImpl>(mix(chain_seed));
    const torch::Tensor successors = at::randint(
        vocab_, {vocab_, static_cast<std::int64_t>(kSuccessorShares.size())}, chain_generator,
        torch::kLong);

    // A different stream of the same chain per split.
    const std::uint64_t stream_salt = context.split == runner::Split::eval ? 2 : 1;
    auto stream_generator =
        at::make_generator<at::CPUGeneratorImpl>(mix(mix(chain_seed) + stream_salt));
    const std::int64_t length = size_ * seq_len_ + 1;
    // Two uniforms per step: which successor (or the uniform fallback), and
    // which token when falling back.
    const torch::Tensor draws =
        at::rand({length, 2}, stream_generator, torch::kFloat64).contiguous();
    const double* u = draws.data_ptr<double>();
    const std::int64_t* next = successors.data_ptr<std::int64_t>();
    stream_ = torch::empty({length}, torch::kLong);
    std::int64_t* out = stream_.data_ptr<std::int64_t>();
    auto uniform_token = [&](double v) {
      return std::min(static_cast<std::int64_t>(v * static_cast<double>(vocab_)), vocab_ - 1);
    };
    out[0] = uniform_token(u[1]);
    for (std::int64_t i = 1; i < length; ++i) {
      double pick = u[2 * i];
      std::int64_t token = -1;
      for (std::size_t s = 0; s < kSuccessorShares.size(); ++s) {
        if (pick < kSuccessorShares[s]) {
          token = next[out[i - 1] * static_cast<std::int64_t>(kSuccessorShares.size()) +
                       static_cast<std::int64_t>(s)];
          break;
        }
        pick -= kSuccessorShares[s];
      }
      out[i] = token >= 0 ? token : uniform_token(u[2 * i + 1]);
    }
    offsets_ = torch::arange(seq_len_, torch::kLong);
  }

  runner::DataSpec spec() const override { return {{seq_len_}, vocab_}; }
  std::int64_t size() const override { return size_; }

  runner::Example get(std::int64_t index) override {
    const torch::Tensor window = stream_.narrow(0, index * seq_len_, seq_len_ + 1);
    return {window.narrow(0, 0, seq_len_).clone(), window.narrow(0, 1, seq_len_).clone()};
  }

  runner::Batch get_batch(const std::vector<std::int64_t>& indices) override {
    // positions[j, k] = indices[j] * seq_len + k
    const torch::Tensor starts = torch::tensor(indices, torch::kLong).mul_(seq_len_);
    const torch::Tensor positions = starts.unsqueeze(1) + offsets_;
    return {stream_.take(positions), stream_.take(positions + 1),
            static_cast<std::int64_t>(indices.size())};
  }

 private:
  std::int64_t vocab_, seq_len_, size_;
  torch::Tensor stream_;   // size * seq_len + 1 tokens
  torch::Tensor offsets_;  // 0 .. seq_len - 1
};

void register_plugins(runner::Registrar& registrar) {
  using O = TokensOptions;
  runner::OptionBinder<O> options;
  options.field("vocab", &O::vocab, "number of distinct tokens (the model's vocabulary)")
      .range(2, 1 << 24);
  options.field("seq_len", &O::seq_len, "tokens per sample (input and shifted target)")
      .range(1, 1 << 20);
  options.field("size", &O::size, "number of sequences in the data set").range(1, 1LL << 32);
  options.field("data_seed", &O::data_seed, "mixed with the run seed to pick the chain")
      .range(0, std::nullopt);
  registrar.add_loader("synthetic_tokens",
                       "seeded token sequences from a random Markov chain (next-token targets); "
                       "the eval split is another stream of the same chain",
                       options, [](const O& o, const runner::LoaderContext& ctx) {
                         return std::make_unique<SyntheticTokens>(o, ctx);
                       });
}

}  // namespace

RUNNER_PLUGIN(register_plugins)
