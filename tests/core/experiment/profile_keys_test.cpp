// [profile]: the keys, their defaults and bounds, the errors at
// file:line:col, the sections it is valid in, and the trial identity (the
// same as before [profile] existed while profiling is off).
#include "core/experiment/experiment_fixture.hpp"

namespace runner {
namespace {

using test::kMinimal;

class ProfileKeysTest : public test::ExperimentFixture {};

TEST_F(ProfileKeysTest, OffByDefaultAndTheIdentityIsUnchanged) {
  const Experiment plain = load(kMinimal);
  EXPECT_EQ(plain.profile.steps, 0);
  EXPECT_FALSE(plain.profile.record_shapes);
  EXPECT_FALSE(plain.profile.enabled());
  EXPECT_EQ(plain.resolved_json().find("profile"), std::string::npos);
  // Written at their defaults, or with shapes but no steps: still off, the
  // same canonical JSON and hash as a file without the section.
  for (const std::string& section :
       {std::string("[profile]\n"), std::string("[profile]\nsteps = 0\n"),
        std::string("[profile]\nsteps = 0\nrecord_shapes = true\n")}) {
    const Experiment e = load(kMinimal + section);
    EXPECT_EQ(e.resolved_json(), plain.resolved_json()) << section;
    EXPECT_EQ(e.config_hash(), plain.config_hash()) << section;
  }
  EXPECT_EQ(plain.total_train_steps(), 110);  // 100 steps + 10 warm-up, nothing profiled
}

TEST_F(ProfileKeysTest, OnItJoinsTheIdentityAndTheStepCount) {
  const Experiment plain = load(kMinimal);
  const Experiment e = load(kMinimal + "[profile]\nsteps = 5\nrecord_shapes = true\n");
  EXPECT_EQ(e.profile.steps, 5);
  EXPECT_TRUE(e.profile.record_shapes);
  EXPECT_NE(e.resolved_json().find("\"profile\":{\"record_shapes\":true,\"steps\":5}"),
            std::string::npos)
      << e.resolved_json();
  EXPECT_NE(e.config_hash(), plain.config_hash());
  EXPECT_NE(load(kMinimal + "[profile]\nsteps = 5\n").config_hash(), e.config_hash());
  // The optimizer (and a schedule) see every step the run takes.
  EXPECT_EQ(e.total_train_steps(), 115);
}

TEST_F(ProfileKeysTest, SweepsAndSetOverrides) {
  const auto trials = expand(kMinimal + "[sweep]\n\"profile.steps\" = [0, 3]\n");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].experiment.profile.steps, 0);
  EXPECT_EQ(trials[1].experiment.profile.steps, 3);
  EXPECT_EQ(trials[0].experiment.config_hash(), load(kMinimal).config_hash());
  const auto set = expand(kMinimal, {"profile.steps=5", "profile.record_shapes=true"});
  EXPECT_EQ(set[0].experiment.profile.steps, 5);
  EXPECT_TRUE(set[0].experiment.profile.record_shapes);
}

TEST_F(ProfileKeysTest, InferRunsProfileToo) {
  const Experiment e = load("[experiment]\nkind = \"infer\"\n" + test::kModel +
                            "[profile]\nsteps = 2\n");
  EXPECT_EQ(e.profile.steps, 2);
  EXPECT_NE(e.resolved_json().find("\"profile\":{\"record_shapes\":false,\"steps\":2}"),
            std::string::npos);
}

TEST_F(ProfileKeysTest, ErrorsAtTheKey) {
  EXPECT_EQ(std::string(error_of(kMinimal + "[profile]\nsteps = -1\n").what()),
            at(9, 9) + "'profile.steps' must be between 0 and 1000, found -1");
  EXPECT_EQ(std::string(error_of(kMinimal + "[profile]\nsteps = 1001\n").what()),
            at(9, 9) + "'profile.steps' must be between 0 and 1000, found 1001");
  EXPECT_EQ(std::string(error_of(kMinimal + "[profile]\nsteps = \"5\"\n").what()),
            at(9, 9) + "'profile.steps' must be an integer, found a string");
  EXPECT_EQ(std::string(error_of(kMinimal + "[profile]\nsteps = 2.5\n").what()),
            at(9, 9) + "'profile.steps' must be an integer, found a float");
  EXPECT_EQ(std::string(error_of(kMinimal + "[profile]\nrecord_shapes = 1\n").what()),
            at(9, 17) + "'profile.record_shapes' must be a boolean, found an integer");
  const Error typo = error_of(kMinimal + "[profile]\nstep = 5\n");
  EXPECT_EQ(std::string(typo.what()),
            at(9, 1) + "unknown key 'step' in [profile]; did you mean 'steps'?");
  const Error set = expand_error(kMinimal, {"profile.steps=-3"});
  EXPECT_EQ(std::string(set.what()),
            "--set profile.steps=-3: 'profile.steps' must be between 0 and 1000, found -3");
}

TEST_F(ProfileKeysTest, KernelExperimentsRefuseTheSection) {
  catalog_.add(PluginKind::kernel, "scale", OptionSchema{});
  const Error e = error_of(
      "[experiment]\nkind = \"kernel\"\n[kernel]\nplugin = \"scale\"\nshape = [4]\n"
      "[profile]\nsteps = 5\n");
  EXPECT_EQ(std::string(e.what()), at(6, 1) + "section [profile] is not used by kernel experiments");
  EXPECT_EQ(e.hint(),
            "this experiment has kind = \"kernel\"; remove [profile] or set kind = \"train\" or "
            "\"infer\" in [experiment]");
}

}  // namespace
}  // namespace runner
