// The npy loader on files NumPy wrote (every dtype it keeps or converts,
// format version 2, labels checked against classes, every refusal) and the
// tokens loader on files written here (uint16 and uint32 ids, windows and
// their next-token targets, stride, the eval split's disjoint tail, the
// stream mode's order, and every refusal).
#include "plugins/loaders/loader_fixture.hpp"
#include "support/python_oracle.hpp"

namespace runner::test {
namespace {

namespace fs = std::filesystem;

class NpyTest : public LoaderTest {
 protected:
  static void SetUpTestSuite() {
    if (!oracle_missing("numpy").empty()) return;
    folder_ = new fs::path(fs::temp_directory_path() / ("runner_npy_files_" + std::to_string(::getpid())));
    const auto r = run_oracle("npy_files.py", {"--out", folder_->string()});
    ASSERT_EQ(r.code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    if (folder_ != nullptr) fs::remove_all(*folder_);
    delete folder_;
    folder_ = nullptr;
  }
  void SetUp() override {
    LoaderTest::SetUp();
    if (folder_ == nullptr) GTEST_SKIP() << oracle_missing("numpy");
  }
  static std::string file(const std::string& name) { return (*folder_ / name).string(); }
  static fs::path* folder_;
};

fs::path* NpyTest::folder_ = nullptr;

TEST_F(NpyTest, KeepsUint8AndFloat32AndWidensTheRest) {
  auto images = make("npy", {{"inputs", file("images.npy")}, {"labels", file("labels.npy")},
                             {"classes", std::int64_t{4}}});
  EXPECT_EQ(images->size(), 6);
  EXPECT_EQ(images->spec().input_shape, (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(images->spec().num_classes, 4);
  const Batch b = images->get_batch({5, 0, 3});
  const torch::Tensor all = (torch::arange(6 * 60, torch::kLong) * 7).remainder(256).to(torch::kUInt8).view({6, 3, 4, 5});
  EXPECT_EQ(b.inputs.dtype(), torch::kUInt8);
  EXPECT_TRUE(b.inputs.equal(all.index_select(0, torch::tensor({5, 0, 3}))));
  EXPECT_EQ(b.targets.dtype(), torch::kLong);
  EXPECT_TRUE(b.targets.equal(torch::tensor({0, 3, 1}, torch::kLong)));

  auto floats = make("npy", {{"inputs", file("floats.npy")}, {"labels", file("labels_i32.npy")}});
  const Example e = floats->get(4);
  EXPECT_EQ(e.input.dtype(), torch::kFloat32);
  EXPECT_TRUE(e.input.equal((torch::arange(24, 30, torch::kDouble) / 8 - 2).to(torch::kFloat).view({2, 3})));
  EXPECT_EQ(e.target.item<std::int64_t>(), 2);

  auto ids = make("npy", {{"inputs", file("ids.npy")}, {"labels", file("targets.npy")}});
  const Example id = ids->get(1);
  EXPECT_EQ(id.input.dtype(), torch::kLong);
  EXPECT_TRUE(id.input.equal(torch::tensor({-2, -1, 0}, torch::kLong)));
  EXPECT_EQ(id.target.dtype(), torch::kFloat32);  // a regression target
  EXPECT_EQ(id.target.item<float>(), 0.5F);

  auto v2 = make("npy", {{"inputs", file("inputs_v2.npy")}});  // no labels: no targets
  EXPECT_TRUE(v2->get(2).input.equal((torch::arange(8, 12, torch::kFloat) / 3)));
  EXPECT_FALSE(v2->get(2).target.defined());
}

TEST_F(NpyTest, TheEvalSplitReadsTheEvalFiles) {
  auto loader = make("npy", {{"inputs", file("images.npy")},
                             {"eval_inputs", file("floats.npy")},
                             {"eval_labels", file("labels.npy")}},
                     Split::eval);
  EXPECT_EQ(loader->spec().input_shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(loader->get(0).target.item<std::int64_t>(), 3);
  EXPECT_EQ(error_of("npy", {{"inputs", file("images.npy")}}, Split::eval),
            "loader plugin 'npy': no eval split: set eval_inputs (and eval_labels) to hold-out files");
}

TEST_F(NpyTest, BadFilesAreRefusedNamingTheFile) {
  const auto refused = [&](const std::string& inputs, const std::string& labels = "",
                           std::int64_t classes = 0) {
    std::map<std::string, OptionValue> values{{"inputs", inputs}, {"classes", classes}};
    if (!labels.empty()) values["labels"] = labels;
    return error_of("npy", values);
  };
  EXPECT_EQ(refused(file("images.npy"), file("bad_labels.npy"), 4),
            "loader plugin 'npy': '" + file("bad_labels.npy") +
                "': record 3 (byte 152): label 7 is outside the 4 classes");
  EXPECT_EQ(refused(file("images.npy"), file("targets.npy"), 4),
            "loader plugin 'npy': '" + file("targets.npy") + "': classes = 4 needs integer labels");
  EXPECT_EQ(refused(file("images.npy"), file("short.npy")),
            "loader plugin 'npy': '" + file("short.npy") + "' has shape (5,) but '" +
                file("images.npy") + "' has 6 samples: labels need shape (6,)");
  EXPECT_EQ(refused(file("images.npy"), file("floats.npy")),
            "loader plugin 'npy': '" + file("floats.npy") + "' has shape (6, 2, 3) but '" +
                file("images.npy") + "' has 6 samples: labels need shape (6,)");
  EXPECT_EQ(refused(file("fortran.npy")),
            "loader plugin 'npy': '" + file("fortran.npy") +
                "' is in Fortran order; save it with np.save(path, np.ascontiguousarray(array))");
  EXPECT_EQ(refused(file("big_endian.npy")),
            "loader plugin 'npy': '" + file("big_endian.npy") +
                "': dtype '>f4' is not supported; supported: <f4, <f8, <i2, <i4, <i8, |b1, |i1, |u1");
  EXPECT_EQ(refused(file("scalar.npy")),
            "loader plugin 'npy': '" + file("scalar.npy") + "' holds a scalar; it needs one row per sample");
  EXPECT_EQ(refused((dir_ / "none.npy").string()),
            "option inputs: cannot open '" + (dir_ / "none.npy").string() + "': No such file or directory");

  // Damaged copies: cut short, not an .npy at all, a hostile shape.
  std::ifstream in(file("images.npy"), std::ios::binary);
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = write("cut.npy", std::vector<std::uint8_t>(bytes.begin(), bytes.end() - 10));
  EXPECT_EQ(refused(cut), "loader plugin 'npy': '" + cut +
                              "': shape (6, 3, 4, 5) needs 360 bytes of data after the 128-byte "
                              "header, the file has 350");
  const std::string text = write("text.npy", {'a', ',', 'b', '\n', '1', ',', '2', '\n', '3', '\n'});
  EXPECT_EQ(refused(text), "loader plugin 'npy': '" + text +
                               "' is not a .npy file: it does not start with \\x93NUMPY");
  std::string header(bytes.begin() + 10, bytes.begin() + 128);
  const auto shape_at = header.find("(6, 3, 4, 5)");
  ASSERT_NE(shape_at, std::string::npos) << header;
  auto with_shape = [&](const std::string& name, const std::string& shape) {
    std::string h = header;
    h.replace(shape_at, 12, shape);
    h.resize(118, ' ');
    h.back() = '\n';
    const std::string all =
        std::string(bytes.begin(), bytes.begin() + 10) + h + std::string(bytes.begin() + 128, bytes.end());
    return write(name, std::vector<std::uint8_t>(all.begin(), all.end()));
  };
  const std::string huge = with_shape("huge.npy", "(4294967296, 4294967296, 16)");
  EXPECT_EQ(refused(huge), "loader plugin 'npy': '" + huge +
                               "': shape (4294967296, 4294967296, 16) needs more than 2^64 bytes of "
                               "data after the 128-byte header, the file has 360");
  const std::string negative = with_shape("negative.npy", "(-6, 60)");
  EXPECT_EQ(refused(negative),
            "loader plugin 'npy': '" + negative + "': the header's shape (-6, 60) is not a tuple of sizes");
}

// Token files: token i is (i * step + 3) % modulus.
std::vector<std::uint8_t> token_file(std::int64_t n, int width, std::int64_t modulus,
                                     std::int64_t step = 7) {
  std::vector<std::uint8_t> out;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t t = (i * step + 3) % modulus;
    for (int b = 0; b < width; ++b) out.push_back(static_cast<std::uint8_t>(t >> (8 * b)));
  }
  return out;
}
torch::Tensor tokens_from(std::int64_t first, std::int64_t n, std::int64_t modulus,
                          std::int64_t step = 7) {
  return (torch::arange(first, first + n, torch::kLong) * step + 3).remainder(modulus);
}

using TokensTest = LoaderTest;

TEST_F(TokensTest, WindowsAndTheirNextTokenTargets) {
  const std::string path = write("t16.bin", token_file(100, 2, 1000));
  auto loader = make("tokens", {{"path", path}, {"seq_len", std::int64_t{8}}, {"vocab", std::int64_t{1000}}});
  // 90 training tokens (the last 10 % are eval): windows of 9 at 0, 8, ..., 80.
  EXPECT_EQ(loader->size(), 11);
  EXPECT_EQ(loader->spec().input_shape, (std::vector<std::int64_t>{8}));
  EXPECT_EQ(loader->spec().num_classes, 1000);
  const Batch b = loader->get_batch({10, 0});
  EXPECT_TRUE(b.inputs[0].equal(tokens_from(80, 8, 1000)));
  EXPECT_TRUE(b.targets[0].equal(tokens_from(81, 8, 1000)));
  EXPECT_TRUE(b.inputs[1].equal(tokens_from(0, 8, 1000)));

  auto eval = make("tokens", {{"path", path}, {"seq_len", std::int64_t{4}}, {"vocab", std::int64_t{1000}}},
                   Split::eval);
  EXPECT_EQ(eval->size(), 2);  // tokens 90..99: windows of 5 at 90 and 94
  EXPECT_TRUE(eval->get(1).input.equal(tokens_from(94, 4, 1000)));
  EXPECT_TRUE(eval->get(1).target.equal(tokens_from(95, 4, 1000)));

  auto overlapping = make("tokens", {{"path", path}, {"seq_len", std::int64_t{8}},
                                     {"vocab", std::int64_t{1000}}, {"stride", std::int64_t{3}}});
  EXPECT_EQ(overlapping->size(), 28);  // starts 0, 3, ..., 81
  EXPECT_TRUE(overlapping->get(27).input.equal(tokens_from(81, 8, 1000)));
}

TEST_F(TokensTest, Uint32IdsBeyondSixteenBits) {
  const std::string path = write("t32.bin", token_file(60, 4, 100000, 70001));
  auto loader = make("tokens", {{"path", path}, {"dtype", std::string("uint32")},
                                {"seq_len", std::int64_t{5}}, {"vocab", std::int64_t{100000}},
                                {"eval_fraction", 0.0}});
  EXPECT_EQ(loader->size(), 11);
  const torch::Tensor window = loader->get(9).input;
  EXPECT_TRUE(window.equal(tokens_from(45, 5, 100000, 70001)));
  EXPECT_GT(window.max().item<std::int64_t>(), 65535);  // all 32 bits read
}

TEST_F(TokensTest, StreamModeYieldsTheSameWindowsInFileOrder) {
  const std::string path = write("t16.bin", token_file(100, 2, 1000));
  for (const std::int64_t stride : {std::int64_t{0}, std::int64_t{3}, std::int64_t{12}}) {
    const std::map<std::string, OptionValue> options{
        {"path", path}, {"seq_len", std::int64_t{8}}, {"vocab", std::int64_t{1000}}, {"stride", stride}};
    auto random = make("tokens", options);
    auto values = options;
    values["mode"] = std::string("stream");
    auto stream = make("tokens", values);
    EXPECT_TRUE(stream->streaming());
    EXPECT_FALSE(random->streaming());
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      auto samples = stream->open(epoch);
      std::int64_t n = 0;
      while (auto e = samples->next()) {
        EXPECT_TRUE(e->input.equal(random->get(n).input)) << "stride " << stride << " window " << n;
        EXPECT_TRUE(e->target.equal(random->get(n).target)) << "stride " << stride << " window " << n;
        ++n;
      }
      EXPECT_EQ(n, random->size()) << "stride " << stride;
    }
  }
}

TEST_F(TokensTest, BadFilesAndOptionsAreRefused) {
  const std::string odd = write("odd.bin", std::vector<std::uint8_t>(101, 1));
  EXPECT_EQ(error_of("tokens", {{"path", odd}, {"vocab", std::int64_t{1000}}}),
            "loader plugin 'tokens': '" + odd +
                "': 101 bytes is not a whole number of 2-byte tokens (dtype = \"uint16\")");
  const std::string path = write("t16.bin", token_file(100, 2, 1000));
  EXPECT_EQ(error_of("tokens", {{"path", path}, {"vocab", std::int64_t{500}}}),
            "loader plugin 'tokens': '" + path + "': token 71 (byte 142) is 500, outside the vocabulary of 500");
  EXPECT_EQ(error_of("tokens", {{"path", path}, {"vocab", std::int64_t{1000}}, {"seq_len", std::int64_t{95}}}),
            "loader plugin 'tokens': '" + path +
                "': the train split has 90 tokens, fewer than one window of seq_len + 1 = 96");
  EXPECT_EQ(error_of("tokens", {{"path", path}, {"vocab", std::int64_t{1000}}, {"seq_len", std::int64_t{10}}},
                     Split::eval),
            "loader plugin 'tokens': '" + path +
                "': the eval split has 10 tokens, fewer than one window of seq_len + 1 = 11 (raise "
                "eval_fraction)");
  const std::string empty = write("empty.bin", {});
  EXPECT_EQ(error_of("tokens", {{"path", empty}, {"vocab", std::int64_t{1000}}}),
            "loader plugin 'tokens': '" + empty +
                "': the train split has 0 tokens, fewer than one window of seq_len + 1 = 129");
  EXPECT_EQ(error_of("tokens", {{"path", dir_.string()}, {"vocab", std::int64_t{1000}}}),
            "option path: '" + dir_.string() + "' is not a regular file");
  auto random = make("tokens", {{"path", path}, {"vocab", std::int64_t{1000}}, {"seq_len", std::int64_t{8}}});
  EXPECT_THROW((void)random->open(0), Error);
}

}  // namespace
}  // namespace runner::test
