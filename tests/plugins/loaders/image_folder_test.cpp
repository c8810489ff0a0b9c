// The image_folder loader against Pillow and torchvision: the same pixels
// from the same files (libjpeg-turbo and libpng on both sides), the classes
// in sorted order, resizing on decode close to torchvision's resize of the
// full decode, and every refusal's message.
#include <torch/serialize.h>

#include <fstream>
#include <iterator>

#include "plugins/loaders/loader_fixture.hpp"
#include "support/python_oracle.hpp"

namespace runner::test {
namespace {

namespace fs = std::filesystem;

class ImageFolderTest : public LoaderTest {
 protected:
  // The oracle's tree and decodes, made once for the whole suite.
  static void SetUpTestSuite() {
    if (!oracle_missing("torch,torchvision,PIL").empty()) return;
    tree_ = new fs::path(fs::temp_directory_path() /
                         ("runner_image_folder_ref_" + std::to_string(::getpid())));
    fs::remove_all(*tree_);
    const auto r = run_oracle("image_folder_reference.py", {"--out", tree_->string()});
    ASSERT_EQ(r.code, 0) << r.output;
    std::ifstream in(*tree_ / "reference.pt", std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    reference_ = new c10::Dict<c10::IValue, c10::IValue>(torch::pickle_load(bytes).toGenericDict());
  }
  static void TearDownTestSuite() {
    if (tree_ != nullptr) fs::remove_all(*tree_);
    delete tree_;
    delete reference_;
    tree_ = nullptr;
    reference_ = nullptr;
  }
  void SetUp() override {
    LoaderTest::SetUp();
    if (reference_ == nullptr) GTEST_SKIP() << oracle_missing("torch,torchvision,PIL");
  }

  static torch::Tensor ref(const std::string& key) { return reference_->at(key).toTensor(); }
  // A writable copy of the oracle's `folder` under the test's own folder.
  std::string copy(const std::string& folder) const {
    fs::copy(*tree_ / folder, dir_ / folder, fs::copy_options::recursive);
    return (dir_ / folder).string();
  }
  static std::string tree(const std::string& folder) { return (*tree_ / folder).string(); }

  static std::int64_t max_diff(const torch::Tensor& a, const torch::Tensor& b) {
    return (a.to(torch::kInt) - b.to(torch::kInt)).abs().max().item<std::int64_t>();
  }
  static double mean_diff(const torch::Tensor& a, const torch::Tensor& b) {
    return (a.to(torch::kFloat) - b.to(torch::kFloat)).abs().mean().item<double>();
  }

  static fs::path* tree_;
  static c10::Dict<c10::IValue, c10::IValue>* reference_;
};

fs::path* ImageFolderTest::tree_ = nullptr;
c10::Dict<c10::IValue, c10::IValue>* ImageFolderTest::reference_ = nullptr;

TEST_F(ImageFolderTest, DecodesJpegAndPngAsPillowDoesWithClassesInSortedOrder) {
  auto loader = make("image_folder", {{"path", tree("train")}});
  EXPECT_EQ(loader->size(), 4);
  EXPECT_EQ(loader->spec().num_classes, 2);
  EXPECT_EQ(loader->spec().input_shape, (std::vector<std::int64_t>{3, 37, 53}));
  const char* files[] = {"train/ant/0.jpg", "train/ant/1.png", "train/bee/2.png", "train/bee/3.jpg"};
  for (std::int64_t i = 0; i < 4; ++i) {
    const Example e = loader->get(i);
    EXPECT_EQ(e.target.item<std::int64_t>(), i / 2) << files[i];
    EXPECT_EQ(e.input.dtype(), torch::kUInt8);
    // Both libjpeg-turbos use the same integer IDCT and upsampling.
    EXPECT_EQ(max_diff(e.input, ref(files[i])), 0) << files[i];
  }
  const Batch b = loader->get_batch({3, 1});
  EXPECT_TRUE(b.inputs[0].equal(loader->get(3).input));
  EXPECT_EQ(b.targets[1].item<std::int64_t>(), 0);
}

TEST_F(ImageFolderTest, GrayscaleIsTheLumaOfEachImage) {
  auto loader = make("image_folder", {{"path", tree("train")}, {"channels", std::int64_t{1}}});
  EXPECT_EQ(loader->spec().input_shape, (std::vector<std::int64_t>{1, 37, 53}));
  // A grayscale PNG is its own pixels; an RGB file's luma is computed with
  // the codec's coefficients (JPEG's Y plane, libpng's), PIL's with its own:
  // at most a level or two apart.
  EXPECT_EQ(max_diff(loader->get(2).input, ref("train/bee/2.png:L")), 0);
  const char* files[] = {"train/ant/0.jpg", "train/ant/1.png", "train/bee/3.jpg"};
  const std::int64_t ids[] = {0, 1, 3};
  for (int i = 0; i < 3; ++i) EXPECT_LE(max_diff(loader->get(ids[i]).input, ref(std::string(files[i]) + ":L")), 2) << files[i];
}

TEST_F(ImageFolderTest, ResizingOnDecodeIsCloseToResizingTheFullDecode) {
  auto loader = make("image_folder", {{"path", tree("big")},
                                      {"short_side", std::int64_t{40}},
                                      {"crop", std::vector<std::int64_t>{40}}});
  EXPECT_EQ(loader->spec().input_shape, (std::vector<std::int64_t>{3, 40, 40}));
  // 160x120 and 120x150 JPEGs are decoded at 4/8 and 3/8 of their size (the
  // DCT does the first part of the downscaling), then resized on the full
  // image's sampling grid: not the same arithmetic as torchvision's, so close
  // rather than equal (measured: mean 0.76 levels, at most 4).
  const char* files[] = {"big/ant/0.jpg", "big/bee/1.jpg"};
  for (std::int64_t i = 0; i < 2; ++i) {
    const torch::Tensor image = loader->get(i).input;
    const torch::Tensor expected = ref(std::string(files[i]) + ":40");
    EXPECT_LT(mean_diff(image, expected), 1.5) << files[i];
    EXPECT_LE(max_diff(image, expected), 8) << files[i];
  }
}

TEST_F(ImageFolderTest, TheEvalSplitReadsEvalPathWithTheTrainingClasses) {
  auto loader = make("image_folder", {{"path", tree("train")}, {"eval_path", tree("eval")}},
                     Split::eval);
  EXPECT_EQ(loader->size(), 2);
  EXPECT_EQ(max_diff(loader->get(0).input, ref("eval/ant/9.png")), 0);
  EXPECT_EQ(loader->get(1).target.item<std::int64_t>(), 1);
  EXPECT_EQ(max_diff(loader->get(1).input, ref("eval/bee/8.jpg")), 0);

  EXPECT_EQ(error_of("image_folder", {{"path", tree("train")}}, Split::eval),
            "loader plugin 'image_folder': no eval split: set eval_path to a folder of held-out "
            "images with the same class folders");
  const std::string eval = copy("eval");
  fs::create_directories(fs::path(eval) / "cow");
  EXPECT_EQ(error_of("image_folder", {{"path", tree("train")}, {"eval_path", eval}}, Split::eval),
            "loader plugin 'image_folder': '" + eval + "' has 3 class folders that are not those of '" +
                tree("train") + "' (2): the eval split needs the same classes, in the same order");
}

TEST_F(ImageFolderTest, AFileThatIsNoImageIsRefusedOrSkipped) {
  const std::string root = copy("train");
  write("train/bee/notes.txt", {'h', 'i', '\n'});
  const std::string notes = root + "/bee/notes.txt";
  EXPECT_EQ(error_of("image_folder", {{"path", root}}),
            "loader plugin 'image_folder': '" + notes +
                "' is neither a JPEG nor a PNG (by its first bytes); remove it, or set "
                "data.on_error = \"skip\"");
  auto loader = make("image_folder", {{"path", root}}, Split::train, /*skip=*/true);
  EXPECT_EQ(loader->size(), 4);
  EXPECT_EQ(loader->skipped(), 1);
}

TEST_F(ImageFolderTest, ACorruptImageIsASampleErrorWhenRead) {
  const std::string root = copy("train");
  // Cut the JPEG in half: libjpeg alone would fill the rest with grey.
  const fs::path jpeg = fs::path(root) / "bee" / "3.jpg";
  fs::resize_file(jpeg, fs::file_size(jpeg) / 2);
  // Damage the PNG's pixel data (its header stays readable).
  const fs::path png = fs::path(root) / "ant" / "1.png";
  {
    std::fstream f(png, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(png) / 2));
    const std::string junk(64, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto loader = make("image_folder", {{"path", root}});
  EXPECT_EQ(loader->get(0).target.item<std::int64_t>(), 0);  // the rest still reads
  try {
    (void)loader->get(3);
    ADD_FAILURE() << "a truncated JPEG was read";
  } catch (const PluginSampleError& e) {
    EXPECT_EQ(std::string(e.what()), "loader plugin 'image_folder': '" + jpeg.string() +
                                         "' is not a readable JPEG: Premature end of JPEG file");
  }
  try {
    (void)loader->get(1);
    ADD_FAILURE() << "a damaged PNG was read";
  } catch (const PluginSampleError& e) {
    const std::string prefix = "loader plugin 'image_folder': '" + png.string() + "' is not a readable PNG: ";
    EXPECT_EQ(std::string(e.what()).substr(0, prefix.size()), prefix);
  }
}

TEST_F(ImageFolderTest, ImagesOfDifferentSizesNeedResizingAndCropping) {
  const std::string root = copy("train");
  fs::copy_file(*tree_ / "big" / "ant" / "0.jpg", fs::path(root) / "ant" / "5.jpg");
  auto loader = make("image_folder", {{"path", root}});
  try {
    (void)loader->get(2);
    ADD_FAILURE() << "an image of another size was read";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "loader plugin 'image_folder': '" + root + "/ant/5.jpg' is 160x120 but '" + root +
                  "/ant/0.jpg' is 53x37: set short_side and crop so every image has one size");
  }
  EXPECT_EQ(error_of("image_folder", {{"path", root}, {"short_side", std::int64_t{20}},
                                      {"crop", std::vector<std::int64_t>{24, 30}}}),
            "loader plugin 'image_folder': '" + root +
                "/ant/0.jpg' is 28x20 after resizing, smaller than crop 30x24; raise short_side");
  auto fitted = make("image_folder", {{"path", root}, {"short_side", std::int64_t{20}},
                                      {"crop", std::vector<std::int64_t>{20}}});
  EXPECT_EQ(fitted->get_batch({0, 1, 2, 3, 4}).inputs.sizes(), (torch::IntArrayRef{5, 3, 20, 20}));
}

TEST_F(ImageFolderTest, FoldersWithoutClassesOrImagesAreRefused) {
  EXPECT_EQ(error_of("image_folder", {{"path", (dir_ / "none").string()}}),
            "option path: '" + (dir_ / "none").string() + "' is not a folder");
  fs::create_directories(dir_ / "flat");
  EXPECT_EQ(error_of("image_folder", {{"path", (dir_ / "flat").string()}}),
            "loader plugin 'image_folder': '" + (dir_ / "flat").string() + "' has no class folders (it needs " +
                (dir_ / "flat").string() + "/<class>/<image>)");
  fs::create_directories(dir_ / "flat" / "ant");
  EXPECT_EQ(error_of("image_folder", {{"path", (dir_ / "flat").string()}}),
            "loader plugin 'image_folder': '" + (dir_ / "flat").string() + "' has no JPEG or PNG images");
  EXPECT_EQ(error_of("image_folder", {{"path", tree("train")}, {"channels", std::int64_t{2}}}),
            "option channels: must be 1 or 3, found 2");
}

}  // namespace
}  // namespace runner::test
