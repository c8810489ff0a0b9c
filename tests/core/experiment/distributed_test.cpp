// [distributed] and [comm_hook]: keys, defaults, the default hook, what is
// refused (with file:line:col), and how they enter a trial's identity.
#include <gtest/gtest.h>

#include <string>

#include "experiment_fixture.hpp"

namespace runner {
namespace {

using test::kMinimal;

class DistributedTest : public test::ExperimentFixture {};

TEST_F(DistributedTest, ASectionTurnsItOnWithDefaultsAndTheAllreduceHook) {
  const Experiment plain = load(kMinimal);
  EXPECT_FALSE(plain.distributed.enabled);
  EXPECT_FALSE(plain.comm_hook.has_value());

  const Experiment e = load(kMinimal + "[distributed]\n");
  EXPECT_TRUE(e.distributed.enabled);
  EXPECT_EQ(e.distributed.world_size, 2);
  EXPECT_EQ(e.distributed.backend, "gloo");
  EXPECT_EQ(e.distributed.bucket_mb, 25.0);
  EXPECT_EQ(e.distributed.timeout_s, 60.0);
  ASSERT_TRUE(e.comm_hook.has_value());
  EXPECT_EQ(e.comm_hook->plugin, "allreduce");
}

TEST_F(DistributedTest, EveryKeyAndAHookWithOptionsAreRead) {
  const Experiment e = load(kMinimal +
                            "[distributed]\nworld_size = 4\nbucket_mb = 0.5\ntimeout = \"2m\"\n"
                            "[comm_hook]\nplugin = \"compressed_allreduce\"\ndtype = \"bf16\"\n");
  EXPECT_EQ(e.distributed.world_size, 4);
  EXPECT_EQ(e.distributed.bucket_mb, 0.5);
  EXPECT_EQ(e.distributed.timeout_s, 120.0);
  ASSERT_TRUE(e.comm_hook.has_value());
  EXPECT_EQ(e.comm_hook->plugin, "compressed_allreduce");
  EXPECT_EQ(e.comm_hook->options.string("dtype"), "bf16");
}

TEST_F(DistributedTest, DdpsOptionsAreReadAndEnterTheIdentity) {
  const Experiment defaults = load(kMinimal + "[distributed]\n");
  EXPECT_EQ(defaults.distributed.reducer, "ddp");
  EXPECT_EQ(defaults.distributed.first_bucket_mb, 1.0);
  EXPECT_FALSE(defaults.distributed.find_unused_parameters);
  EXPECT_FALSE(defaults.distributed.gradient_as_bucket_view);
  EXPECT_FALSE(defaults.distributed.static_graph);
  EXPECT_TRUE(defaults.distributed.broadcast_buffers);
  const Experiment e = load(kMinimal +
                            "[distributed]\nreducer = \"after_backward\"\nfirst_bucket_mb = 0.25\n"
                            "find_unused_parameters = true\ngradient_as_bucket_view = true\n"
                            "static_graph = true\nbroadcast_buffers = false\n");
  EXPECT_EQ(e.distributed.reducer, "after_backward");
  EXPECT_EQ(e.distributed.first_bucket_mb, 0.25);
  EXPECT_TRUE(e.distributed.find_unused_parameters);
  EXPECT_TRUE(e.distributed.gradient_as_bucket_view);
  EXPECT_TRUE(e.distributed.static_graph);
  EXPECT_FALSE(e.distributed.broadcast_buffers);
  for (const std::string key : {"reducer = \"after_backward\"", "first_bucket_mb = 2",
                                "find_unused_parameters = true", "gradient_as_bucket_view = true",
                                "static_graph = true", "broadcast_buffers = false"})
    EXPECT_NE(load(kMinimal + "[distributed]\n" + key + "\n").config_hash(), defaults.config_hash())
        << key;
  EXPECT_THROW_MSG(load(kMinimal + "[distributed]\nreducer = \"ring\"\n"), Error,
                   at(9, 11) + "'distributed.reducer' must be one of \"ddp\", \"after_backward\", "
                               "found \"ring\"");
}

TEST_F(DistributedTest, AHookWithoutDistributedIsRefused) {
  const Error e = error_of(kMinimal + "[comm_hook]\nplugin = \"allreduce\"\n");
  EXPECT_EQ(std::string(e.what()), at(8, 1) + "section [comm_hook] needs a [distributed] section");
  EXPECT_EQ(e.hint(),
            "a communication hook reduces gradients across ranks: add [distributed] with "
            "world_size = N, or remove [comm_hook]");
}

TEST_F(DistributedTest, InferExperimentsCannotBeDistributed) {
  const Error e = error_of("[experiment]\nkind = \"infer\"\n" + test::kModel +
                           "[distributed]\nworld_size = 2\n");
  EXPECT_EQ(std::string(e.what()),
            at(5, 1) + "section [distributed] is only used by train experiments");
}

TEST_F(DistributedTest, NcclNeedsCudaWhileGlooTakesEitherDevice) {
  const Error nccl = error_of(kMinimal + "[distributed]\nbackend = \"nccl\"\n");
  EXPECT_EQ(std::string(nccl.what()),
            at(9, 1) + "[distributed] backend \"nccl\" does not work with device.type = \"cpu\"");
  EXPECT_EQ(nccl.hint(),
            "use backend = \"gloo\" for device.type = \"cpu\" (gloo: CPU and CUDA tensors, nccl: "
            "CUDA tensors)");
  // The default backend (gloo) on a CUDA device: Gloo reduces CUDA tensors
  // too (the GPU check kit's two ranks on one GPU, docs/gpu.md).
  EXPECT_NO_THROW(load("[device]\ntype = \"cuda\"\n" + kMinimal + "[distributed]\n"));
}

TEST_F(DistributedTest, BadValuesAreRefusedWhereTheyAre) {
  EXPECT_THROW_MSG(load(kMinimal + "[distributed]\nworld_size = 0\n"), Error,
                   at(9, 14) + "'distributed.world_size' must be between 1 and 64, found 0");
  EXPECT_THROW_MSG(load(kMinimal + "[distributed]\nbackend = \"mpi\"\n"), Error,
                   at(9, 11) +
                       "'distributed.backend' must be one of \"gloo\", \"nccl\", found \"mpi\"");
  EXPECT_THROW_MSG(load(kMinimal + "[distributed]\nbucket_mb = 0\n"), Error,
                   at(9, 13) + "'distributed.bucket_mb' must be between 0.001 and 4096, found 0");
}

TEST_F(DistributedTest, WithoutTheDefaultHookLoadedTheSectionSaysWhatToDo) {
  test::FakeCatalog bare = test::standard_catalog();
  test::FakeCatalog without;  // the standard plugins, no comm hook
  for (const auto kind : {PluginKind::model, PluginKind::loader, PluginKind::optimizer})
    for (const auto& name : bare.names(kind)) without.add(kind, name, bare.find(kind, name)->schema);
  const Error e = error_of(kMinimal + "[distributed]\n", &without);
  EXPECT_EQ(std::string(e.what()),
            at(8, 1) +
                "[distributed] without [comm_hook] uses the comm_hook plugin 'allreduce', which "
                "is not loaded");
}

TEST_F(DistributedTest, ItEntersTheTrialsIdentityOnlyWhenPresent) {
  const Experiment plain = load(kMinimal);
  EXPECT_EQ(plain.resolved_json().find("distributed"), std::string::npos);
  EXPECT_EQ(plain.resolved_json().find("comm_hook"), std::string::npos);
  const Experiment two = load(kMinimal + "[distributed]\nworld_size = 2\n");
  const Experiment four = load(kMinimal + "[distributed]\nworld_size = 4\n");
  const std::string json = two.resolved_json();
  EXPECT_NE(json.find("\"distributed\":{\"backend\":\"gloo\",\"broadcast_buffers\":true,"
                      "\"bucket_mb\":25.0,\"find_unused_parameters\":false,"
                      "\"first_bucket_mb\":1.0,\"gradient_as_bucket_view\":false,"
                      "\"reducer\":\"ddp\",\"static_graph\":false,\"world_size\":2}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"comm_hook\":{\"options\":{},\"plugin\":\"allreduce\"}"), std::string::npos)
      << json;
  EXPECT_NE(two.config_hash(), four.config_hash());
  EXPECT_NE(two.config_hash(), plain.config_hash());
  // The collective time limit does not change what is measured.
  EXPECT_EQ(two.config_hash(),
            load(kMinimal + "[distributed]\nworld_size = 2\ntimeout = 5\n").config_hash());
}

TEST_F(DistributedTest, TheHookAndWorldSizeCanBeSwept) {
  const auto trials = expand(kMinimal +
                             "[distributed]\n"
                             "[sweep]\n\"distributed.world_size\" = [1, 2]\n"
                             "\"comm_hook.plugin\" = [\"allreduce\", \"compressed_allreduce\"]\n");
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[3].label, "distributed.world_size=2 comm_hook.plugin=\"compressed_allreduce\"");
  EXPECT_EQ(trials[3].experiment.comm_hook->plugin, "compressed_allreduce");
  EXPECT_EQ(trials[3].experiment.distributed.world_size, 2);
}

}  // namespace
}  // namespace runner
