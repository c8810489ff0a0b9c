// The transformer_lm plugin against plain-PyTorch references of its two
// flavours (tests/oracle/transformer_lm_reference.py: nanoGPT's GPT and
// Hugging Face's LlamaForCausalLM, in their public names): the same names and
// shapes, the same logits and loss from the same weights, the same parameters
// after SGD steps, the same parameter count, FLOPs within 2 %; its evaluation
// metrics, option errors; and the synthetic_tokens loader.
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <runner/sdk.hpp>

#include "runner/common/error.hpp"
#include "runner/host/host.hpp"
#include "support/module_state.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/python_oracle.hpp"

namespace {

namespace fs = std::filesystem;
using Values = std::map<std::string, runner::OptionValue>;

const fs::path kBuiltins = fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins";

// float32 tolerances. Logits and loss: both sides run the same ATen kernels
// (the oracle's torch is the build's LibTorch) on one thread, so differences
// are summation-order noise. After 5 SGD steps the rounding compounds: a
// looser relative bound.
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;
constexpr double kStepRtol = 1e-3;

runner::ModelContext tokens(std::int64_t seq_len, std::int64_t vocab) {
  runner::ModelContext context;
  context.input_shape = {seq_len};
  context.num_classes = vocab;
  return context;
}

class TransformerLm : public ::testing::Test {
 public:
  void SetUp() override {
    torch::manual_seed(0);
    host_.load(kBuiltins);
  }
  std::unique_ptr<runner::Model> make(Values options, const runner::ModelContext& context) {
    return host_.make_model("transformer_lm", runner::Options(std::move(options)), context);
  }
  std::string library() const {
    return host_.library_of(runner::PluginKind::model, "transformer_lm").path.string();
  }
  std::string prefix() const {
    return "model plugin 'transformer_lm' (" + library() + ") failed: ";
  }
  // An option that does not fit (also checked before any run) names the option.
  std::string refused(const std::string& option) const {
    return "model plugin 'transformer_lm' (" + library() + ") refused option '" + option + "': ";
  }
  runner::PluginHost host_;
};

using runner::test::state_of;

std::map<std::string, torch::Tensor> tensors_of(const c10::IValue& dict) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& entry : dict.toGenericDict())
    out[entry.key().toStringRef()] = entry.value().toTensor();
  return out;
}

struct Reference {
  c10::IValue all;
  std::map<std::string, torch::Tensor> state, after;
  torch::Tensor get(const std::string& key) const {
    return all.toGenericDict().at(key).toTensor();
  }
  std::int64_t integer(const std::string& key) const {
    return all.toGenericDict().at(key).toInt();
  }
};

Reference reference(const std::vector<std::string>& args) {
  const fs::path out = fs::temp_directory_path() /
                       ("runner_transformer_lm_" + std::to_string(::getpid()) + ".pt");
  std::vector<std::string> all = args;
  all.insert(all.end(), {"--out", out.string()});
  const auto r = runner::test::run_oracle("transformer_lm_reference.py", all);
  EXPECT_EQ(r.code, 0) << r.output;
  std::ifstream in(out, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  fs::remove(out);
  Reference ref;
  ref.all = torch::pickle_load(bytes);
  ref.state = tensors_of(ref.all.toGenericDict().at("state"));
  ref.after = tensors_of(ref.all.toGenericDict().at("after"));
  return ref;
}

void expect_close(const torch::Tensor& actual, const torch::Tensor& expected, double rtol,
                  const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(actual.allclose(expected, rtol, kAtol))
      << what << ": max |difference| " << (actual - expected).abs().max().item<double>();
}

// Sizes shared by the reference's command line and the plugin's options:
// vocab 97, width 64, depth 2, heads 4, sequences of 16 tokens, 24 positions.
void check_parity(TransformerLm& test, const std::string& flavour) {
  RUNNER_REQUIRE_ORACLE("torch");
  const bool llama = flavour == "llama";
  std::vector<std::string> args{"--flavour", flavour, "--vocab", "97", "--width", "64",
                                "--depth", "2", "--heads", "4", "--seq", "16", "--max-seq", "24"};
  Values options{{"flavour", flavour},        {"width", std::int64_t{64}},
                 {"depth", std::int64_t{2}},  {"heads", std::int64_t{4}},
                 {"max_seq_len", std::int64_t{24}}};
  if (llama) {
    args.insert(args.end(), {"--kv-heads", "2", "--multiple-of", "32"});
    options["kv_heads"] = std::int64_t{2};
    options["multiple_of"] = std::int64_t{32};
  }
  const Reference ref = reference(args);
  at::set_num_threads(1);
  auto model = test.make(options, tokens(16, 97));
  torch::nn::Module& module = model->module();

  // Names and shapes: exactly the reference's state dict, whose tied
  // lm_head.weight the model names through tied_parameters().
  std::map<std::string, std::vector<std::int64_t>> ours, theirs;
  for (const auto& [name, t] : state_of(module)) ours[name] = t.sizes().vec();
  const auto tied = model->tied_parameters();
  for (const auto& [alias, name] : tied) ours[alias] = ours.at(name);
  for (const auto& [name, t] : ref.state) theirs[name] = t.sizes().vec();
  ASSERT_EQ(ours, theirs);
  EXPECT_EQ(tied.size(), llama ? 0U : 1U);
  EXPECT_EQ(model->parameter_count(), ref.integer("params"));
  const double flops = *model->flops_per_sample();
  const auto expected_flops = static_cast<double>(ref.integer("flops"));
  EXPECT_NEAR(flops / expected_flops, 1.0, 0.02) << flops << " vs " << expected_flops;
  EXPECT_EQ(*model->tokens_per_sample(), 16.0);

  {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : state_of(module)) tensor.copy_(ref.state.at(name));
  }
  runner::Batch batch{ref.get("ids"), ref.get("targets"), ref.get("ids").size(0)};
  module.eval();
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor logits = model->forward(batch);
    expect_close(logits, ref.get("logits"), kRtol, "eval-mode logits");
    const torch::Tensor loss = model->loss(logits, batch);
    expect_close(loss, ref.get("loss"), kRtol, "mean cross-entropy");
    // Evaluation: the loss summed over tokens, counted in tokens; perplexity
    // is exp of the mean.
    const runner::EvalTally tally = model->evaluate(logits, batch);
    EXPECT_EQ(tally.count, 3.0 * 16.0);
    const double mean = tally.sums.at("loss") / tally.count;
    EXPECT_NEAR(mean, ref.get("loss").item<double>(), 1e-5);
    const auto derived = model->finish_evaluation({{"loss", mean}});
    EXPECT_NEAR(derived.at("perplexity"), std::exp(ref.get("loss").item<double>()), 1e-3);
  }

  module.train();
  torch::optim::SGD sgd(module.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 5; ++step) {
    sgd.zero_grad();
    model->loss(model->forward(batch), batch).backward();
    sgd.step();
  }
  for (const auto& [name, tensor] : state_of(module))
    expect_close(tensor, ref.after.at(name), kStepRtol, name + " after 5 SGD steps");
  // The tied weight took the gradients of both its uses, as the reference's did.
  for (const auto& [alias, name] : tied)
    expect_close(state_of(module).at(name), ref.after.at(alias), kStepRtol,
                 alias + " after 5 SGD steps");
}

TEST_F(TransformerLm, Gpt2MatchesTheNanoGptShapedReference) { check_parity(*this, "gpt2"); }
TEST_F(TransformerLm, LlamaMatchesTheLlamaForCausalLmShapedReference) {
  check_parity(*this, "llama");
}

TEST_F(TransformerLm, TiesAndRotaryTablesAreNotExtraState) {
  auto gpt2 = make({{"flavour", std::string("gpt2")}, {"width", std::int64_t{32}}}, tokens(8, 50));
  EXPECT_EQ(gpt2->tied_parameters(),
            (std::map<std::string, std::string>{{"lm_head.weight", "transformer.wte.weight"}}));
  const auto state = state_of(gpt2->module());
  EXPECT_EQ(state.count("lm_head.weight"), 0U);
  EXPECT_EQ(state.at("transformer.wte.weight").sizes(), (std::vector<std::int64_t>{50, 32}));
  // The tied weight is counted once.
  std::int64_t total = 0;
  for (const auto& [name, t] : state) total += t.numel();
  EXPECT_EQ(gpt2->parameter_count(), total);

  auto llama =
      make({{"flavour", std::string("llama")}, {"width", std::int64_t{32}}}, tokens(8, 50));
  EXPECT_TRUE(llama->module().named_buffers().is_empty());
  EXPECT_TRUE(llama->tied_parameters().empty());
  EXPECT_EQ(state_of(llama->module()).at("lm_head.weight").sizes(),
            (std::vector<std::int64_t>{50, 32}));
}

TEST_F(TransformerLm, DefaultMlpWidthsFollowTheFlavours) {
  auto hidden = [&](const std::string& flavour, std::int64_t width, std::int64_t multiple_of) {
    auto model = make({{"flavour", flavour},
                       {"width", width},
                       {"heads", std::int64_t{2}},
                       {"depth", std::int64_t{1}},
                       {"multiple_of", multiple_of}},
                      tokens(8, 16));
    const auto state = state_of(model->module());
    return flavour == "gpt2" ? state.at("transformer.h.0.mlp.c_fc.weight").size(0)
                             : state.at("model.layers.0.mlp.gate_proj.weight").size(0);
  };
  EXPECT_EQ(hidden("gpt2", 40, 256), 160);  // 4 x width
  // Meta's Llama: int(2 x 4 x width / 3), rounded up to a multiple of multiple_of.
  EXPECT_EQ(hidden("llama", 40, 256), 256);  // 106 -> 256
  EXPECT_EQ(hidden("llama", 40, 32), 128);   // 106 -> 128
  EXPECT_EQ(hidden("llama", 48, 32), 128);   // 128 stays
  EXPECT_EQ(hidden("llama", 48, 1), 128);
  EXPECT_EQ(hidden("llama", 52, 1), 138);    // int(138.7)
}

TEST_F(TransformerLm, ExampleBatchesAreNextTokenPairs) {
  auto model =
      make({{"flavour", std::string("llama")}, {"width", std::int64_t{32}}}, tokens(12, 30));
  const runner::Batch batch = model->example_batch(5, torch::kCPU);
  EXPECT_EQ(batch.size, 5);
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{5, 12}));
  EXPECT_EQ(batch.inputs.scalar_type(), torch::kLong);
  EXPECT_TRUE(batch.inputs.narrow(1, 1, 11).equal(batch.targets.narrow(1, 0, 11)));
  EXPECT_LT(batch.inputs.max().item<std::int64_t>(), 30);
  const torch::Tensor logits = model->forward(batch);
  EXPECT_EQ(logits.sizes(), (std::vector<std::int64_t>{5, 12, 30}));
  // Causal: the logits at position p do not change when later tokens do.
  runner::Batch changed = batch;
  changed.inputs = batch.inputs.clone();
  changed.inputs.index_put_({torch::indexing::Slice(), 11}, (batch.inputs.select(1, 11) + 1) % 30);
  const torch::Tensor again = model->forward(changed);
  EXPECT_TRUE(again.narrow(1, 0, 11).allclose(logits.narrow(1, 0, 11), kRtol, kAtol));
  EXPECT_FALSE(again.select(1, 11).allclose(logits.select(1, 11), kRtol, kAtol));
}

// The ATen operators a forward dispatches, counted by name through a
// RecordFunction callback (a plain function pointer: the counts are global).
std::map<std::string, int>& op_counts() {
  static std::map<std::string, int> counts;
  return counts;
}

std::map<std::string, int> ops_of(const std::function<void()>& body) {
  op_counts().clear();
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                     -> std::unique_ptr<at::ObserverContext> {
        ++op_counts()[fn.name()];
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  body();
  at::removeCallback(handle);
  return op_counts();
}

// The eager reference's nn.Linear calls at::linear, which adds the bias
// inside the matrix product (addmm); torch::nn::Linear's C++ forward would run
// matmul and then add_ the bias, a second pass over every projection's output
// and what made gpt2 slower than eager (issue 30).
TEST_F(TransformerLm, Gpt2ProjectionsAreAddmmAsInEager) {
  const std::int64_t depth = 3;
  auto model = make({{"flavour", std::string("gpt2")},
                     {"width", std::int64_t{32}},
                     {"depth", depth},
                     {"heads", std::int64_t{2}}},
                    tokens(8, 20));
  const runner::Batch batch = model->example_batch(2, torch::kCPU);
  const auto ops = ops_of([&] { (void)model->forward(batch); });
  auto count = [&](const std::string& name) {
    const auto it = ops.find(name);
    return it == ops.end() ? 0 : it->second;
  };
  EXPECT_EQ(count("aten::addmm"), 4 * depth);  // c_attn, attn.c_proj, c_fc, mlp.c_proj
  EXPECT_EQ(count("aten::add_"), 0);
  EXPECT_EQ(count("aten::matmul"), 1);  // the tied head, which has no bias
  EXPECT_EQ(count("aten::linear"), 4 * depth + 1);
}

TEST_F(TransformerLm, DropoutActsOnlyInTraining) {
  for (const std::string flavour : {"gpt2", "llama"}) {
    auto model = make({{"flavour", flavour}, {"width", std::int64_t{32}}, {"dropout", 0.5}},
                      tokens(8, 20));
    const runner::Batch batch = model->example_batch(2, torch::kCPU);
    model->module().train();
    EXPECT_FALSE(model->forward(batch).equal(model->forward(batch))) << flavour;
    model->module().eval();
    EXPECT_TRUE(model->forward(batch).equal(model->forward(batch))) << flavour;
  }
}

TEST_F(TransformerLm, BadOptionsAndInputsAreClearErrors) {
  const std::string p = prefix();
  const std::string llama = "llama";
  EXPECT_THROW_MSG((void)make({{"flavour", llama}, {"heads", std::int64_t{4}},
                               {"kv_heads", std::int64_t{3}}},
                              tokens(16, 50)),
                   runner::Error,
                   refused("kv_heads") + "kv_heads = 3 does not divide heads = 4; each key/value head serves "
                       "heads / kv_heads query heads, so pick a divisor of heads (0 = heads)");
  EXPECT_THROW_MSG((void)make({{"flavour", std::string("gpt2")}, {"heads", std::int64_t{4}},
                               {"kv_heads", std::int64_t{2}}},
                              tokens(16, 50)),
                   runner::Error,
                   refused("kv_heads") + "kv_heads = 2 asks for grouped-query attention, which only the llama "
                       "flavour has; for gpt2 leave kv_heads at 0 (one key/value head per head)");
  EXPECT_THROW_MSG((void)make({{"width", std::int64_t{100}}, {"heads", std::int64_t{8}}},
                              tokens(16, 50)),
                   runner::Error,
                   refused("width") + "width = 100 is not divisible by heads = 8; each head takes width / heads "
                       "dimensions, so make width a multiple of heads");
  EXPECT_THROW_MSG((void)make({{"max_seq_len", std::int64_t{128}}}, tokens(256, 50)),
                   runner::Error,
                   refused("max_seq_len") + "seq_len = 256 is longer than max_seq_len = 128 (the positions the model "
                       "has); raise max_seq_len or shorten the sequences");
  EXPECT_THROW_MSG((void)make({{"flavour", llama}, {"width", std::int64_t{36}},
                               {"heads", std::int64_t{4}}},
                              tokens(16, 50)),
                   runner::Error,
                   refused("width") + "rotary position embeddings need an even head dimension, but width / "
                       "heads = 36 / 4 = 9; change width or heads");
  EXPECT_THROW_MSG((void)make({{"vocab", std::int64_t{40}}}, tokens(16, 50)), runner::Error,
                   refused("vocab") + "vocab = 40 is smaller than the loader's 50 tokens; raise it or leave it "
                       "at 0 (the loader's)");
  EXPECT_THROW_MSG((void)make({{"seq_len", std::int64_t{32}}}, tokens(16, 50)), runner::Error,
                   refused("seq_len") + "seq_len = 32 differs from the loader's sequences of 16 tokens; leave it "
                       "at 0 (the loader's) or change the loader's");
  runner::ModelContext images = tokens(0, 10);
  images.input_shape = {3, 32, 32};
  EXPECT_THROW_MSG((void)make({}, images), runner::Error,
                   p + "needs token sequences from the loader (input_shape [seq_len]), but it "
                       "declares [3, 32, 32]; use a token loader such as synthetic_tokens");
  EXPECT_THROW_MSG((void)make({}, runner::ModelContext{}), runner::Error,
                   refused("vocab") + "the vocabulary size is unknown: set vocab, or use a loader that "
                       "declares it (as num_classes), such as synthetic_tokens");
  EXPECT_THROW_MSG((void)make({{"vocab", std::int64_t{50}}}, runner::ModelContext{}),
                   runner::Error,
                   refused("seq_len") + "the sequence length is unknown: set seq_len, or use a loader of token "
                       "sequences (input_shape [seq_len]), such as synthetic_tokens");

  // Forward refuses what is not a batch of token ids (the plugin's message,
  // re-thrown by the host's wrapper with the plugin's name).
  auto model = make({{"width", std::int64_t{32}}}, tokens(16, 50));
  runner::Batch floats{torch::randn({2, 16}), torch::zeros({2, 16}, torch::kLong), 2};
  EXPECT_THROW_MSG((void)model->forward(floats), runner::Error,
                   "model plugin 'transformer_lm' (" + library() +
                       ") failed in forward: expects token ids as an int64 tensor [batch, seq], "
                       "got a Float tensor of shape [2, 16]; use a token loader such as "
                       "synthetic_tokens");
}

// The loader.

class SyntheticTokens : public ::testing::Test {
 protected:
  void SetUp() override { host_.load(kBuiltins); }
  std::unique_ptr<runner::Loader> make(std::uint64_t seed, runner::Split split,
                                       std::int64_t data_seed = 0) {
    runner::LoaderContext context;
    context.seed = seed;
    context.split = split;
    return host_.make_loader("synthetic_tokens",
                             runner::Options({{"vocab", std::int64_t{64}},
                                              {"seq_len", std::int64_t{32}},
                                              {"size", std::int64_t{200}},
                                              {"data_seed", data_seed}}),
                             context);
  }
  runner::PluginHost host_;
};

std::vector<std::int64_t> all_indices(const runner::Loader& loader) {
  std::vector<std::int64_t> indices(static_cast<std::size_t>(loader.size()));
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<std::int64_t>(i);
  return indices;
}

/// counts[a][b]: how often token b follows token a in the inputs' sequences.
torch::Tensor bigram_counts(const torch::Tensor& inputs, const torch::Tensor& targets,
                            std::int64_t vocab) {
  return torch::bincount(inputs.flatten() * vocab + targets.flatten(), {}, vocab * vocab)
      .view({vocab, vocab});
}

TEST_F(SyntheticTokens, DeclaresSequencesOfTheVocabularyAndIsDeterministic) {
  auto loader = make(7, runner::Split::train);
  const runner::DataSpec spec = loader->spec();
  EXPECT_EQ(spec.input_shape, (std::vector<std::int64_t>{32}));
  EXPECT_EQ(spec.num_classes, 64);
  EXPECT_EQ(loader->size(), 200);
  const runner::Batch a = loader->get_batch(all_indices(*loader));
  EXPECT_EQ(a.inputs.sizes(), (std::vector<std::int64_t>{200, 32}));
  EXPECT_EQ(a.inputs.scalar_type(), torch::kLong);
  EXPECT_GE(a.inputs.min().item<std::int64_t>(), 0);
  EXPECT_LT(a.inputs.max().item<std::int64_t>(), 64);
  auto inputs = [&](std::uint64_t seed, std::int64_t data_seed) {
    auto other = make(seed, runner::Split::train, data_seed);
    return other->get_batch(all_indices(*other)).inputs;
  };
  EXPECT_TRUE(a.inputs.equal(inputs(7, 0)));
  EXPECT_FALSE(a.inputs.equal(inputs(8, 0)));
  EXPECT_FALSE(a.inputs.equal(inputs(7, 1)));
}

TEST_F(SyntheticTokens, TargetsAreTheInputsShiftedByOne) {
  auto loader = make(3, runner::Split::train);
  const std::vector<std::int64_t> indices{5, 0, 199, 6, 5};
  const runner::Batch batch = loader->get_batch(indices);
  ASSERT_EQ(batch.size, 5);
  for (std::size_t j = 0; j < indices.size(); ++j) {
    const runner::Example e = loader->get(indices[j]);
    EXPECT_TRUE(batch.inputs[static_cast<std::int64_t>(j)].equal(e.input));
    EXPECT_TRUE(batch.targets[static_cast<std::int64_t>(j)].equal(e.target));
    EXPECT_TRUE(e.input.narrow(0, 1, 31).equal(e.target.narrow(0, 0, 31)));
  }
  // Consecutive samples are consecutive windows of one stream: sample 6
  // starts with sample 5's last target.
  EXPECT_EQ(loader->get(6).input[0].item<std::int64_t>(),
            loader->get(5).target[31].item<std::int64_t>());
}

TEST_F(SyntheticTokens, TheEvalSplitIsAnotherStreamOfTheSameChain) {
  auto train = make(11, runner::Split::train);
  auto eval = make(11, runner::Split::eval);
  const runner::Batch a = train->get_batch(all_indices(*train));
  const runner::Batch b = eval->get_batch(all_indices(*eval));
  // Disjoint: no held-out sequence is a training sequence.
  auto row = [](const torch::Tensor& inputs, std::int64_t i) {
    const torch::Tensor r = inputs[i].contiguous();
    return std::vector<std::int64_t>(r.data_ptr<std::int64_t>(),
                                     r.data_ptr<std::int64_t>() + r.numel());
  };
  std::set<std::vector<std::int64_t>> seen;
  for (std::int64_t i = 0; i < a.size; ++i) seen.insert(row(a.inputs, i));
  for (std::int64_t i = 0; i < b.size; ++i)
    EXPECT_EQ(seen.count(row(b.inputs, i)), 0U) << "eval sequence " << i << " is also in train";
  // The same chain: a token's most frequent successor in train is usually
  // its most frequent one in eval too (with 64 tokens, each seen ~100 times).
  const torch::Tensor train_next = bigram_counts(a.inputs, a.targets, 64).argmax(1);
  const torch::Tensor eval_next = bigram_counts(b.inputs, b.targets, 64).argmax(1);
  EXPECT_GT(train_next.eq(eval_next).sum().item<std::int64_t>(), 56);
  // ... and another run seed is another chain.
  auto other = make(12, runner::Split::train);
  const runner::Batch c = other->get_batch(all_indices(*other));
  const torch::Tensor other_next = bigram_counts(c.inputs, c.targets, 64).argmax(1);
  EXPECT_LT(other_next.eq(train_next).sum().item<std::int64_t>(), 16);
}

TEST_F(SyntheticTokens, TheNextTokenIsPredictable) {
  // Most of a token's successors are among its four likely ones: the
  // empirical conditional entropy is far below a uniform guess's log(64).
  auto loader = make(5, runner::Split::train);
  const runner::Batch batch = loader->get_batch(all_indices(*loader));
  const torch::Tensor counts = bigram_counts(batch.inputs, batch.targets, 64).to(torch::kDouble);
  const torch::Tensor p = counts / counts.sum(1, true).clamp_min(1);
  const torch::Tensor weight = counts.sum(1) / counts.sum();
  const double entropy =
      -(weight * (p * p.clamp_min(1e-30).log()).sum(1)).sum().item<double>();
  EXPECT_LT(entropy, 2.0) << "nats; log(64) = " << std::log(64.0);
  EXPECT_GT(entropy, 1.0);
}

TEST_F(SyntheticTokens, AModelLearnsItsChain) {
  // A small gpt2 trained by SGD on the loader's sequences gets well below the
  // uniform guess's loss, log(64), on the held-out split.
  torch::manual_seed(0);
  auto train = make(2, runner::Split::train);
  auto eval = make(2, runner::Split::eval);
  runner::ModelContext context;
  context.input_shape = train->spec().input_shape;
  context.num_classes = train->spec().num_classes;
  auto model = host_.make_model("transformer_lm",
                                runner::Options({{"width", std::int64_t{32}},
                                                 {"depth", std::int64_t{1}},
                                                 {"heads", std::int64_t{2}}}),
                                context);
  torch::optim::SGD sgd(model->module().parameters(), torch::optim::SGDOptions(0.5).momentum(0.9));
  for (std::int64_t step = 0; step < 60; ++step) {
    std::vector<std::int64_t> indices;
    for (std::int64_t i = 0; i < 16; ++i) indices.push_back((step * 16 + i) % train->size());
    const runner::Batch batch = train->get_batch(indices);
    sgd.zero_grad();
    model->loss(model->forward(batch), batch).backward();
    sgd.step();
  }
  model->module().eval();
  torch::NoGradGuard no_grad;
  const runner::Batch held_out = eval->get_batch(all_indices(*eval));
  const double loss = model->loss(model->forward(held_out), held_out).item<double>();
  EXPECT_LT(loss, 0.75 * std::log(64.0));
}

}  // namespace
