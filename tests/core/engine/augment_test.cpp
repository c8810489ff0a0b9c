// The augmentations of [data]: torchvision's results for the deterministic
// ones (resize, center crop, scaling, normalisation), the random crop and
// flip checked against every window they could have taken, seeding per
// sample and epoch, the evaluation variant, and each refusal's message.
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <unistd.h>

#include "runner/engine/augment.hpp"
#include "support/expect_throw_msg.hpp"
#include "support/python_oracle.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

torch::Tensor images(std::int64_t batch, std::int64_t h, std::int64_t w) {
  return (torch::arange(batch * 3 * h * w, torch::kLong).mul_(37) % 251)
      .to(torch::kUInt8)
      .view({batch, 3, h, w});
}

std::vector<std::int64_t> ids(std::int64_t n) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = i;
  return out;
}

TEST(AugmentParity, DeterministicAugmentationsMatchTorchvision) {
  RUNNER_REQUIRE_ORACLE("torch,torchvision");
  const fs::path out = fs::temp_directory_path() / ("augment_ref_" + std::to_string(::getpid()) + ".pt");
  const auto r = test::run_oracle("augment_reference.py", {"--out", out.string()});
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(out, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(out);
  const c10::Dict<c10::IValue, c10::IValue> ref = torch::pickle_load(bytes).toGenericDict();
  auto at = [&](const char* key) { return ref.at(key).toTensor(); };
  const torch::Tensor x = at("images");
  auto run = [&](AugmentSettings s) { return Augmenter(s, 0, true).apply(x, ids(4), 0); };
  auto scaled = [](const torch::Tensor& u8) { return u8.to(torch::kFloat32).div(255); };

  AugmentSettings resize_short;
  resize_short.resize = {9};
  // Same kernel (uint8 antialiased bilinear) on both sides: identical.
  EXPECT_TRUE(run(resize_short).equal(scaled(at("resize_short"))));
  AugmentSettings resize_exact;
  resize_exact.resize = {20, 8};
  EXPECT_TRUE(run(resize_exact).equal(scaled(at("resize_exact"))));
  AugmentSettings crop;
  crop.center_crop = {6, 9};
  EXPECT_TRUE(run(crop).equal(scaled(at("center_crop"))));
  EXPECT_TRUE(run(AugmentSettings{}).equal(scaled(x)));  // nothing on: only the scaling
  AugmentSettings normalize;
  normalize.normalize_mean = {0.4914, 0.4822, 0.4465};
  normalize.normalize_std = {0.2470, 0.2435, 0.2616};
  EXPECT_TRUE(torch::allclose(run(normalize), at("normalized"), 0, 1e-6));
  AugmentSettings chain = normalize;
  chain.resize = {9};
  chain.center_crop = {8, 8};
  EXPECT_TRUE(torch::allclose(run(chain), at("resize_crop_normalize"), 0, 1e-6));
}

TEST(Augment, Uint8ImagesBecomeFloatInTheUnitIntervalOtherDtypesStay) {
  const torch::Tensor x = images(2, 4, 4);
  const Augmenter none(AugmentSettings{}, 0, true);
  EXPECT_FALSE(none.active());
  const torch::Tensor y = none.apply(x, ids(2), 0);
  EXPECT_EQ(y.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(y.equal(x.to(torch::kFloat32).div(255)));
  const torch::Tensor tokens = torch::arange(8, torch::kLong).view({2, 4});
  EXPECT_TRUE(none.apply(tokens, ids(2), 0).equal(tokens));
  EXPECT_EQ(none.apply(tokens, ids(2), 0).scalar_type(), torch::kLong);
}

// Every crop the padded image allows, flipped or not; true when `y` is one.
bool is_a_window_of(const torch::Tensor& x, const torch::Tensor& y, std::int64_t pad,
                    bool& flipped, std::pair<std::int64_t, std::int64_t>& where) {
  const torch::Tensor padded = torch::constant_pad_nd(x, {pad, pad, pad, pad}, 0);
  for (std::int64_t i = 0; i + y.size(1) <= padded.size(1); ++i)
    for (std::int64_t j = 0; j + y.size(2) <= padded.size(2); ++j) {
      const torch::Tensor window = padded.narrow(1, i, y.size(1)).narrow(2, j, y.size(2));
      where = {i, j};
      if (window.equal(y)) {
        flipped = false;
        return true;
      }
      if (window.flip(2).equal(y)) {
        flipped = true;
        return true;
      }
    }
  return false;
}

TEST(Augment, ARandomCropIsAWindowOfThePaddedImageAndVariesBySample) {
  AugmentSettings s;
  s.random_crop = {5, 6};
  s.crop_padding = 2;
  s.hflip = 0.5;
  const torch::Tensor x = images(32, 7, 9).to(torch::kFloat32);  // floats: no scaling
  const torch::Tensor y = Augmenter(s, 11, true).apply(x, ids(32), 0);
  ASSERT_EQ(y.sizes(), (std::vector<std::int64_t>{32, 3, 5, 6}));
  std::set<std::pair<std::int64_t, std::int64_t>> offsets;
  int flips = 0;
  for (std::int64_t b = 0; b < 32; ++b) {
    bool flipped = false;
    std::pair<std::int64_t, std::int64_t> where;
    ASSERT_TRUE(is_a_window_of(x[b], y[b], 2, flipped, where)) << "sample " << b;
    offsets.insert(where);
    flips += flipped ? 1 : 0;
  }
  EXPECT_GT(offsets.size(), 5u);  // 7 x 8 possible offsets
  EXPECT_GT(flips, 4);
  EXPECT_LT(flips, 28);
}

TEST(Augment, ChoicesAreAFunctionOfSeedEpochAndSampleOnly) {
  AugmentSettings s;
  s.random_crop = {4};
  s.crop_padding = 2;
  s.hflip = 0.5;
  const torch::Tensor x = images(8, 6, 6);
  const Augmenter a(s, 5, true);
  const torch::Tensor y = a.apply(x, ids(8), 3);
  // Sample 6 alone, or in another batch position, is augmented the same way.
  EXPECT_TRUE(a.apply(x.narrow(0, 6, 1), {6}, 3).equal(y.narrow(0, 6, 1)));
  EXPECT_TRUE(a.apply(x.flip(0), {7, 6, 5, 4, 3, 2, 1, 0}, 3).flip(0).equal(y));
  // Another epoch, another seed: other choices.
  EXPECT_FALSE(a.apply(x, ids(8), 4).equal(y));
  EXPECT_FALSE(Augmenter(s, 6, true).apply(x, ids(8), 3).equal(y));
  EXPECT_NE(sample_seed(5, 3, 6), sample_seed(5, 3, 7));
  EXPECT_NE(sample_seed(5, 3, 6), sample_seed(5, 4, 6));
}

TEST(Augment, EvaluationCropsTheCenterAndNeverFlips) {
  AugmentSettings s;
  s.random_crop = {4, 4};
  s.crop_padding = 1;
  s.hflip = 1.0;
  const torch::Tensor x = images(3, 6, 6).to(torch::kFloat32);
  const torch::Tensor y = Augmenter(s, 5, false).apply(x, ids(3), 0);
  EXPECT_TRUE(y.equal(x.narrow(2, 1, 4).narrow(3, 1, 4)));
  // Training with hflip = 1 and a whole-image crop: every sample mirrored.
  AugmentSettings flip;
  flip.hflip = 1.0;
  EXPECT_TRUE(Augmenter(flip, 5, true).apply(x, ids(3), 0).equal(x.flip(3)));
}

TEST(Augment, OutputShapes) {
  AugmentSettings s;
  s.resize = {16};
  EXPECT_EQ(Augmenter(s, 0, true).output_shape({3, 32, 48}), (std::vector<std::int64_t>{3, 16, 24}));
  EXPECT_EQ(Augmenter(s, 0, true).output_shape({3, 50, 20}), (std::vector<std::int64_t>{3, 40, 16}));
  s.center_crop = {12};
  s.random_crop = {10, 14};
  s.crop_padding = 1;
  EXPECT_EQ(Augmenter(s, 0, true).output_shape({1, 32, 32}), (std::vector<std::int64_t>{1, 10, 14}));
  EXPECT_EQ(Augmenter(AugmentSettings{}, 0, true).output_shape({64}), (std::vector<std::int64_t>{64}));
}

void expect_refusal(const AugmentSettings& s, const std::vector<std::int64_t>& shape,
                    const std::string& key, const std::string& message) {
  try {
    (void)Augmenter(s, 0, true).output_shape(shape);
    ADD_FAILURE() << "expected AugmentError: " << message;
  } catch (const AugmentError& e) {
    EXPECT_EQ(e.key(), key);
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(Augment, SettingsThatCannotApplyAreRefusedNamingTheirKey) {
  AugmentSettings crop;
  crop.random_crop = {4};
  expect_refusal(crop, {64}, "random_crop",
                 "data.random_crop needs image samples [channels, height, width]; the loader's "
                 "samples are [64]");
  AugmentSettings center;
  center.center_crop = {40, 30};
  expect_refusal(center, {3, 32, 32}, "center_crop",
                 "data.center_crop [40, 30] is larger than the samples [32, 32]");
  crop.random_crop = {37};
  crop.crop_padding = 2;
  expect_refusal(crop, {3, 32, 32}, "random_crop",
                 "data.random_crop [37, 37] is larger than the padded samples [36, 36]");
  AugmentSettings half;
  half.normalize_mean = {0.5};
  expect_refusal(half, {3, 8, 8}, "normalize_std",
                 "data.normalize_mean and data.normalize_std go together; normalize_std is missing");
  AugmentSettings mismatch;
  mismatch.normalize_mean = {0.5, 0.5};
  mismatch.normalize_std = {0.5, 0.5};
  expect_refusal(mismatch, {3, 8, 8}, "normalize_mean",
                 "data.normalize_mean has 2 values but the samples have 3 channels (shape [3, 8, 8])");
  mismatch.normalize_std = {0.5};
  expect_refusal(mismatch, {3, 8, 8}, "normalize_std",
                 "data.normalize_std has 1 value but normalize_mean has 2 values");
  AugmentSettings zero;
  zero.normalize_mean = {0.5};
  zero.normalize_std = {0.0};
  expect_refusal(zero, {3, 8, 8}, "normalize_std", "data.normalize_std must be > 0, found 0");
}

}  // namespace
}  // namespace runner
