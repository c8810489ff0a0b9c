// The cifar and mnist loaders on tiny files written here: values and labels
// read back exactly, the splits, and every refusal's message.
#include <thread>

#include "plugins/loaders/loader_fixture.hpp"

namespace runner::test {
namespace {

using Bytes = std::vector<std::uint8_t>;

// CIFAR records: record r has label(r) (CIFAR-100: coarse then fine) and
// pixel p = (r * 31 + p) % 256.
Bytes cifar_records(std::int64_t n, bool hundred, std::int64_t first = 0) {
  Bytes out;
  for (std::int64_t r = first; r < first + n; ++r) {
    if (hundred) out.push_back(static_cast<std::uint8_t>(r % 20));
    out.push_back(static_cast<std::uint8_t>(hundred ? r % 100 : r % 10));
    for (std::int64_t p = 0; p < 3072; ++p) out.push_back(static_cast<std::uint8_t>((r * 31 + p) % 256));
  }
  return out;
}

torch::Tensor cifar_image(std::int64_t r) {
  return (torch::arange(3072, torch::kLong) + r * 31).remainder(256).to(torch::kUInt8).view({3, 32, 32});
}

class CifarTest : public LoaderTest {
 protected:
  // CIFAR-10: five training files of 3, 2, 2, 1, 1 records and a test file of 4.
  std::string cifar10() {
    const std::int64_t counts[] = {3, 2, 2, 1, 1};
    std::int64_t first = 0;
    for (int b = 0; b < 5; ++b) {
      write("c10/data_batch_" + std::to_string(b + 1) + ".bin", cifar_records(counts[b], false, first));
      first += counts[b];
    }
    write("c10/test_batch.bin", cifar_records(4, false, 100));
    return (dir_ / "c10").string();
  }
};

TEST_F(CifarTest, ReadsEveryRecordOfTheFiveTrainingFilesInOrder) {
  auto loader = make("cifar", {{"path", cifar10()}});
  EXPECT_EQ(loader->size(), 9);
  EXPECT_EQ(loader->spec().input_shape, (std::vector<std::int64_t>{3, 32, 32}));
  EXPECT_EQ(loader->spec().num_classes, 10);
  for (std::int64_t r = 0; r < 9; ++r) {
    const Example e = loader->get(r);
    EXPECT_TRUE(e.input.equal(cifar_image(r))) << r;
    EXPECT_EQ(e.target.item<std::int64_t>(), r % 10);
  }
  const Batch b = loader->get_batch({8, 0, 4});
  EXPECT_TRUE(b.inputs[0].equal(cifar_image(8)));
  EXPECT_TRUE(b.inputs[2].equal(cifar_image(4)));
  EXPECT_EQ(b.targets[1].item<std::int64_t>(), 0);
}

TEST_F(CifarTest, TheEvalSplitIsTheTestFile) {
  auto loader = make("cifar", {{"path", cifar10()}}, Split::eval);
  EXPECT_EQ(loader->size(), 4);
  EXPECT_TRUE(loader->get(2).input.equal(cifar_image(102)));
  EXPECT_EQ(loader->get(2).target.item<std::int64_t>(), 2);
}

TEST_F(CifarTest, Cifar100HasFineAndCoarseLabels) {
  write("c100/train.bin", cifar_records(5, true, 95));
  write("c100/test.bin", cifar_records(1, true));
  const std::string path = (dir_ / "c100").string();
  auto fine = make("cifar", {{"path", path}, {"variant", std::string("cifar100")}});
  auto coarse = make("cifar", {{"path", path},
                               {"variant", std::string("cifar100")},
                               {"labels", std::string("coarse")}});
  EXPECT_EQ(fine->spec().num_classes, 100);
  EXPECT_EQ(coarse->spec().num_classes, 20);
  EXPECT_EQ(fine->get(4).target.item<std::int64_t>(), 99);
  EXPECT_EQ(coarse->get(4).target.item<std::int64_t>(), 99 % 20);
  EXPECT_TRUE(fine->get(4).input.equal(cifar_image(99)));
}

TEST_F(CifarTest, ConcurrentBatchesAreTheSame) {
  auto loader = make("cifar", {{"path", cifar10()}});
  const Batch expected = loader->get_batch({1, 3, 5, 7});
  std::vector<std::thread> threads;
  std::vector<bool> same(3);
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      bool ok = true;
      for (int i = 0; i < 50; ++i) ok = ok && loader->get_batch({1, 3, 5, 7}).inputs.equal(expected.inputs);
      same[static_cast<std::size_t>(t)] = ok;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(same, std::vector<bool>(3, true));
}

TEST_F(CifarTest, BadFilesAreRefusedNamingFileAndRecord) {
  const std::string path = cifar10();
  Bytes truncated = cifar_records(10, false);
  truncated.resize(truncated.size() - 3);
  const std::string file = write("c10/data_batch_2.bin", truncated);
  EXPECT_EQ(error_of("cifar", {{"path", path}}),
            "loader plugin 'cifar': '" + file +
                "' is truncated: 30727 bytes is not a whole number of 3073-byte records (9 whole, "
                "3070 bytes over)");
  Bytes bad_label = cifar_records(3, false);
  bad_label[2 * 3073] = 12;
  write("c10/data_batch_2.bin", bad_label);
  EXPECT_EQ(error_of("cifar", {{"path", path}}),
            "loader plugin 'cifar': '" + file + "': record 2 (byte 6146): label 12 is outside the "
                                                "10 classes");
  write("c10/data_batch_2.bin", {});
  EXPECT_EQ(error_of("cifar", {{"path", path}}), "loader plugin 'cifar': '" + file + "' is empty");
  std::filesystem::remove(file);
  EXPECT_EQ(error_of("cifar", {{"path", path}}),
            "option path: cannot open '" + file + "': No such file or directory");
  EXPECT_EQ(error_of("cifar", {{"path", path}, {"labels", std::string("coarse")}}),
            "option labels: CIFAR-10 has one label per image; \"coarse\" is CIFAR-100's "
            "(variant = \"cifar100\")");
}

// IDX: magic, dims, data.
Bytes idx(const std::vector<std::uint32_t>& dims, const Bytes& data, std::uint8_t type = 0x08) {
  Bytes out{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(d >> shift));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes pixels(std::int64_t n, std::int64_t first) {
  Bytes out;
  for (std::int64_t i = 0; i < n * 6; ++i) out.push_back(static_cast<std::uint8_t>((first * 6 + i) % 256));
  return out;
}

class MnistTest : public LoaderTest {
 protected:
  // 5 training images of 2x3 pixels and 2 test images.
  std::string mnist() {
    write("m/train-images-idx3-ubyte", idx({5, 2, 3}, pixels(5, 0)));
    write("m/train-labels-idx1-ubyte", idx({5}, {3, 1, 4, 1, 5}));
    write("m/t10k-images-idx3-ubyte", idx({2, 2, 3}, pixels(2, 40)));
    write("m/t10k-labels-idx1-ubyte", idx({2}, {9, 2}));
    return (dir_ / "m").string();
  }
};

TEST_F(MnistTest, ReadsImagesAndLabels) {
  auto loader = make("mnist", {{"path", mnist()}});
  EXPECT_EQ(loader->size(), 5);
  EXPECT_EQ(loader->spec().input_shape, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(loader->spec().num_classes, 10);
  const Batch b = loader->get_batch({4, 2});
  EXPECT_TRUE(b.inputs[0].equal(torch::arange(24, 30, torch::kLong).to(torch::kUInt8).view({1, 2, 3})));
  EXPECT_EQ(b.targets[0].item<std::int64_t>(), 5);
  EXPECT_EQ(b.targets[1].item<std::int64_t>(), 4);
  auto eval = make("mnist", {{"path", mnist()}}, Split::eval);
  EXPECT_EQ(eval->size(), 2);
  EXPECT_EQ(eval->get(0).target.item<std::int64_t>(), 9);
  EXPECT_TRUE(eval->get(1).input.equal(torch::arange(246, 252, torch::kLong).to(torch::kUInt8).view({1, 2, 3})));
}

TEST_F(MnistTest, BadFilesAreRefusedNamingFileAndOffset) {
  const std::string path = mnist();
  const std::string images = path + "/train-images-idx3-ubyte";
  const std::string labels = path + "/train-labels-idx1-ubyte";
  write("m/train-images-idx3-ubyte", {1, 0, 8, 3, 0});
  EXPECT_EQ(error_of("mnist", {{"path", path}}),
            "loader plugin 'mnist': '" + images +
                "' is not an IDX file: it does not start with two zero bytes");
  write("m/train-images-idx3-ubyte", idx({5, 2, 3}, pixels(5, 0), 0x0d));
  EXPECT_EQ(error_of("mnist", {{"path", path}}),
            "loader plugin 'mnist': '" + images +
                "': byte 2: IDX type code 0x0d is not 0x08 (unsigned bytes), the only type MNIST "
                "files use");
  write("m/train-images-idx3-ubyte", idx({5, 6}, pixels(5, 0)));
  EXPECT_EQ(error_of("mnist", {{"path", path}}),
            "loader plugin 'mnist': '" + images + "': byte 3: 2 dimensions, expected 3");
  write("m/train-images-idx3-ubyte", idx({5, 2, 4}, pixels(5, 0)));
  EXPECT_EQ(error_of("mnist", {{"path", path}}),
            "loader plugin 'mnist': '" + images +
                "': dimensions 5x2x4 need 56 bytes, the file has 46");
  write("m/train-images-idx3-ubyte", idx({4, 2, 3}, pixels(4, 0)));
  EXPECT_EQ(error_of("mnist", {{"path", path}}),
            "loader plugin 'mnist': '" + images + "' has 4 images but '" + labels + "' has 5 labels");
  write("m/train-images-idx3-ubyte", idx({5, 2, 3}, pixels(5, 0)));
  write("m/train-labels-idx1-ubyte", idx({5}, {3, 1, 4, 10, 5}));
  EXPECT_EQ(error_of("mnist", {{"path", path}}),
            "loader plugin 'mnist': '" + labels +
                "': record 3 (byte 11): label 10 is outside the 10 classes");
  std::filesystem::rename(labels, labels + ".gz");
  EXPECT_EQ(error_of("mnist", {{"path", path}}),
            "option path: '" + labels +
                "' is missing, but 'train-labels-idx1-ubyte.gz' is there: decompress it with gunzip");
}

}  // namespace
}  // namespace runner::test
