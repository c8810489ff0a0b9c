// runner-loader: samples/s of runner's data pipeline over a loader plugin,
// nothing else on the training thread (the loop only asks for batches), at
// each worker count given. The comparison with PyTorch's DataLoader is
// bench/loader_compare.py, which runs this program.
//
//   runner-loader --plugin cifar --option path=DIR [--option k=v ...]
//                 [--workers 0,1,2] [--batches 200] [--batch 128] [--prefetch 2]
//                 [--augment cifar|none] [--resize N] [--threads 1]
// --raw true times the loader's get_batch alone (no pipeline, no float
// scaling, no augmentation): "raw samples_per_s=X".
// --resize N adds the pipeline's resize [N] and center crop [N, N] before the
// augmentations (images decoded at full size, resized by the pipeline).
// Prints one line per worker count: "workers=W samples_per_s=X".
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "flags.hpp"
#include "runner/common/strings.hpp"
#include "runner/engine/pipeline.hpp"
#include "runner/host/host.hpp"

namespace {

constexpr const char* kProgram = "runner-loader";

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s --plugin NAME [--option KEY=VALUE ...] [--workers 0,1,2] "
               "[--batches N] [--batch N] [--prefetch N] [--augment cifar|none] [--resize N] "
               "[--threads N] [--raw true]\n",
               kProgram, problem.c_str(), kProgram);
  std::exit(2);
}

// KEY=VALUE as the option's declared type.
runner::OptionValue parse_value(const runner::OptionSpec& spec, const std::string& text) {
  switch (spec.type) {
    case runner::OptionType::string: return text;
    case runner::OptionType::integer: return bench::flag_integer(kProgram, spec.name, text, INT64_MIN);
    case runner::OptionType::number: return bench::flag_number(kProgram, spec.name, text, -1e300);
    case runner::OptionType::boolean: return text == "true";
    case runner::OptionType::integer_list: {
      std::vector<std::int64_t> items;
      for (const auto& item : runner::split(text, ','))
        items.push_back(bench::flag_integer(kProgram, spec.name, item, INT64_MIN));
      return items;
    }
    default: usage("option '" + spec.name + "' has a type this program cannot parse");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string plugin;
  std::vector<std::string> options;
  std::vector<std::int64_t> workers{0, 1, 2};
  std::int64_t batches = 200, batch = 128, prefetch = 2, threads = 1, resize = 0;
  std::string augment = "cifar";
  bool raw = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--plugin") plugin = value;
    else if (flag == "--option") options.push_back(value);
    else if (flag == "--workers") {
      workers.clear();
      for (const auto& w : runner::split(value, ','))
        workers.push_back(bench::flag_integer(kProgram, flag, w, 0));
    } else if (flag == "--batches") batches = bench::flag_integer(kProgram, flag, value, 1);
    else if (flag == "--batch") batch = bench::flag_integer(kProgram, flag, value, 1);
    else if (flag == "--prefetch") prefetch = bench::flag_integer(kProgram, flag, value, 1);
    else if (flag == "--threads") threads = bench::flag_integer(kProgram, flag, value, 1);
    else if (flag == "--augment") augment = value;
    else if (flag == "--raw") raw = value == "true";
    else if (flag == "--resize") resize = bench::flag_integer(kProgram, flag, value, 1);
    else usage("unknown flag " + flag);
  }
  if (plugin.empty()) usage("--plugin is required");
  if (augment != "cifar" && augment != "none") usage("--augment must be cifar or none");
  at::set_num_threads(static_cast<int>(threads));

  runner::PluginHost host;
  host.load(std::filesystem::path(argv[0]).parent_path().parent_path() / "lib" / "runner" / "plugins");
  const runner::PluginDescriptor* descriptor = host.find(runner::PluginKind::loader, plugin);
  if (descriptor == nullptr) usage("no loader plugin '" + plugin + "'");
  std::map<std::string, runner::OptionValue> values;
  for (const auto& spec : descriptor->schema.specs())
    if (spec.default_value) values[spec.name] = *spec.default_value;
  for (const auto& kv : options) {
    const auto eq = kv.find('=');
    const runner::OptionSpec* spec = eq == std::string::npos ? nullptr : descriptor->schema.find(kv.substr(0, eq));
    if (spec == nullptr) usage("--option " + kv + ": not KEY=VALUE of one of the plugin's options");
    values[spec->name] = parse_value(*spec, kv.substr(eq + 1));
  }
  const auto loader = host.make_loader(plugin, runner::Options(values), runner::LoaderContext{});

  runner::DataSettings settings;
  settings.batch_size = batch;
  settings.prefetch = prefetch;
  if (resize > 0) {
    settings.augment.resize = {resize};
    settings.augment.center_crop = {resize, resize};
  }
  if (augment == "cifar") {  // the standard CIFAR training recipe
    settings.augment.random_crop = {32};
    settings.augment.crop_padding = 4;
    settings.augment.hflip = 0.5;
    settings.augment.normalize_mean = {0.4914, 0.4822, 0.4465};
    settings.augment.normalize_std = {0.2470, 0.2435, 0.2616};
  }
  using Clock = std::chrono::steady_clock;
  if (raw) {  // the loader alone: get_batch over consecutive samples, this thread
    std::int64_t next = 0;
    auto batch_of = [&] {
      std::vector<std::int64_t> ids(static_cast<std::size_t>(batch));
      for (auto& id : ids) id = next++ % loader->size();
      return loader->get_batch(ids);
    };
    for (int i = 0; i < 2; ++i) (void)batch_of();
    const auto start = Clock::now();
    std::int64_t samples = 0;
    for (std::int64_t i = 0; i < batches; ++i) samples += batch_of().size;
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("raw samples_per_s=%.1f\n", static_cast<double>(samples) / seconds);
    return 0;
  }
  for (const std::int64_t w : workers) {
    settings.workers = w;
    runner::DataPipeline pipeline(*loader, settings, /*seed=*/1, 0, 1);
    for (int i = 0; i < 5; ++i) (void)pipeline.next();  // threads started, pages mapped
    const auto start = Clock::now();
    std::int64_t samples = 0;
    for (std::int64_t i = 0; i < batches; ++i) samples += pipeline.next().size;
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("workers=%lld samples_per_s=%.1f\n", static_cast<long long>(w),
                static_cast<double>(samples) / seconds);
    std::fflush(stdout);
  }
  return 0;
}
