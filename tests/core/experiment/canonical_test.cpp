// Trial hashes identify trials in every existing database (resume, merge,
// compare, rerun): the canonical JSON of a configuration must not change by a
// byte. The expected texts and hashes below were recorded from the
// hand-written JSON writer of commit 206220a, before runner switched to
// nlohmann-json: they are the old implementation's output, not the output of
// the code under test. A failure means existing databases would no longer
// recognise their trials; fix the writer rather than the record. (Re-record
// an example only when a built-in plugin's options change on purpose, which
// changes the identity of its trials anyway.)
//
// The configurations: every file in experiments/, against the built-in
// plugins, and crafted ones that reach every corner of the number and string
// formatting, against a fake "probe" model that declares an unconstrained
// option of every type.
#include <gtest/gtest.h>

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "experiment_fixture.hpp"
#include "runner/common/sha256.hpp"
#include "runner/experiment/config_toml.hpp"
#include "runner/host/host.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

struct Recorded {
  const char* hash;  ///< config_hash()
  const char* json;  ///< resolved_json()
};

struct Case {
  const char* name;               ///< test name; for the examples, the file in experiments/
  const char* toml;               ///< the experiment file (crafted cases)
  std::vector<Recorded> trials;   ///< one per trial, in expansion order
};

// Test names show the case's name, not its bytes.
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

OptionSchema probe_schema() {
  OptionSchema probe;
  probe.boolean("flag", false, "a boolean");
  probe.integer("count", 0, "an integer");
  probe.integers("counts", {}, "integers");
  probe.number("x", 0.5, "a number");
  probe.numbers("xs", {}, "numbers");
  probe.string("text", "", "a string");
  probe.integer("B", 1, "sorts before lowercase");
  probe.integer("a_b", 2, "'_' sorts before 'b'");
  probe.integer("ab", 3, "after a_b");
  probe.integer("\xc3\xa9", 4, "non-ASCII sorts last");
  return probe;
}

const Case kCrafted[] = {
    {"Floats",
     R"toml([model]
plugin = "probe"
x = -0.0
xs = [0.1, 1e-5, 1e-4, 0.001, 2.5e-3, 1e300, 3.0, 100.0, 1e5, 123456.789, 1e15, 1e16,
      1e20, 1e21, 1e22, 0.30000000000000004, 5e-324, 1.7976931348623157e308, -1.5,
      9007199254740993, 7, -2]
[data]
plugin = "synthetic"
[optimizer]
plugin = "adam"
lr = 1e-4
betas = [0.9, 0.999]
[train]
steps = 5
)toml",
     {
       {"1b12eb60a8d5e11308809c6ac802053dc75550a35ee03ec710efd5bff0bf5c82",
        R"({"data":{"batch_size":32,"drop_last":true,"options":{"label":"",)"
        R"("shape":[8],"size":1024},"plugin":"synthetic","shuffle":true},)"
        R"("device":{"interop_threads":0,"threads":0,"type":"cpu"},)"
        R"("kind":"train","model":{"options":{"B":1,"a_b":2,"ab":3,)"
        R"("count":0,"counts":[],"flag":false,"text":"","x":-0.0,)"
        R"("xs":[0.1,1e-05,1e-04,0.001,0.0025,1e+300,3.0,100.0,)"
        R"(1e+05,123456.789,1e+15,1e+16,1e+20,1e+21,1e+22,0.30000000000000004,)"
        R"(5e-324,1.7976931348623157e+308,-1.5,9007199254740992.0,)"
        R"(7.0,-2.0],"é":4},"plugin":"probe"},"optimizer":{"options":{"betas":[0)"
        R"(.9,0.999],"lr":1e-04},"plugin":"adam"},"seed":0,"train":{"steps":5,)"
        R"("warmup":10}})"},
     }},
    {"Integers",
     R"toml([experiment]
seed = 9223372036854775807
[device]
threads = 64
interop_threads = 3
[model]
plugin = "probe"
count = -9223372036854775808
counts = [9223372036854775807, 0, -1, 1, 4096]
x = 3
xs = []
B = -7
"é" = 0
[data]
plugin = "synthetic"
batch_size = 1000000
size = 123456789
shape = [1]
[optimizer]
plugin = "sgd"
lr = 1
[train]
steps = 1
warmup = 0
)toml",
     {
       {"b56d06624c8226fe901a403aaca031685fe69ef287d9955b06e47d4eec03b9e6",
        R"({"data":{"batch_size":1000000,"drop_last":true,"options":{"label":"",)"
        R"("shape":[1],"size":123456789},"plugin":"synthetic",)"
        R"("shuffle":true},"device":{"interop_threads":3,"threads":64,)"
        R"("type":"cpu"},"kind":"train","model":{"options":{"B":-7,)"
        R"("a_b":2,"ab":3,"count":-9223372036854775808,"counts":[9223372036854775)"
        R"(807,0,-1,1,4096],"flag":false,"text":"","x":3.0,"xs":[],)"
        R"("é":0},"plugin":"probe"},"optimizer":{"options":{"lr":1.0,)"
        R"("momentum":0.0},"plugin":"sgd"},"seed":9223372036854775807,)"
        R"("train":{"steps":1,"warmup":0}})"},
     }},
    {"Strings",
     R"toml([model]
plugin = "probe"
text = "quote \" backslash \\ slash / tab \t newline \n return \r backspace \b formfeed \f nul \u0000 unit separator \u001F delete \u007F e-acute é euro € emoji 😀 line separator \u2028 bom \uFEFF"
[data]
plugin = "synthetic"
label = 'C:\path\ "quoted" {json: [1]}'
[optimizer]
plugin = "adam"
[train]
steps = 5
)toml",
     {
       {"ce307d3f40542b66dc49241f7496bfdbaea983db381a823e8a93c15bc80c76a2",
        R"({"data":{"batch_size":32,"drop_last":true,"options":{"label":"C:\\path)"
        R"(\\ \"quoted\" {json: [1]}","shape":[8],"size":1024},)"
        R"("plugin":"synthetic","shuffle":true},"device":{"interop_threads":0,)"
        R"("threads":0,"type":"cpu"},"kind":"train","model":{"options":{"B":1,)"
        R"("a_b":2,"ab":3,"count":0,"counts":[],"flag":false,)"
        R"("text":"quote \" backslash \\ slash / tab \t newline \n return \r back)"
        R"(space \b formfeed \f nul \u0000 unit separator \u001f delete )" "\x7f" R"( e-acute)"
        R"( é euro € emoji 😀 line separator )" "\xe2\x80\xa8" R"( bom )" "\xef\xbb\xbf" R"(",)"
        R"("x":0.5,"xs":[],"é":4},"plugin":"probe"},"optimizer":{"options":{"bet)"
        R"(as":[0.9,0.999],"lr":0.001},"plugin":"adam"},"seed":0,)"
        R"("train":{"steps":5,"warmup":10}})"},
     }},
    {"Booleans",
     R"toml([model]
plugin = "probe"
flag = true
[data]
plugin = "synthetic"
shuffle = false
drop_last = false
[optimizer]
plugin = "sgd"
lr = 0.5
[train]
steps = 5
)toml",
     {
       {"cd51aaf03c2cc0adf4a7f2cbdc36e6391c58765b4e6b99f984b0c8f4eca71cff",
        R"({"data":{"batch_size":32,"drop_last":false,"options":{"label":"",)"
        R"("shape":[8],"size":1024},"plugin":"synthetic","shuffle":false},)"
        R"("device":{"interop_threads":0,"threads":0,"type":"cpu"},)"
        R"("kind":"train","model":{"options":{"B":1,"a_b":2,"ab":3,)"
        R"("count":0,"counts":[],"flag":true,"text":"","x":0.5,)"
        R"("xs":[],"é":4},"plugin":"probe"},"optimizer":{"options":{"lr":0.5,)"
        R"("momentum":0.0},"plugin":"sgd"},"seed":0,"train":{"steps":5,)"
        R"("warmup":10}})"},
     }},
    {"DistributedWithAHookAndAutoWarmup",
     R"toml([model]
plugin = "probe"
[data]
plugin = "synthetic"
[optimizer]
plugin = "adam"
[train]
steps = 5
warmup = "auto"
[distributed]
world_size = 4
backend = "gloo"
bucket_mb = 12.5
timeout = "2m"
[comm_hook]
plugin = "compressed_allreduce"
dtype = "bf16"
)toml",
     {
       {"a6f21ced0aa692129d8b05ced20e03d4110a5c40576cbeed344e5c6c2265f173",
        R"({"comm_hook":{"options":{"dtype":"bf16"},"plugin":"compressed_allreduc)"
        R"(e"},"data":{"batch_size":32,"drop_last":true,"options":{"label":"","sh)"
        R"(ape":[8],"size":1024},"plugin":"synthetic","shuffle":true},"device":{")"
        R"(interop_threads":0,"threads":0,"type":"cpu"},"distributed":{"backend":)"
        R"("gloo","broadcast_buffers":true,"bucket_mb":12.5,"find_unused_paramete)"
        R"(rs":false,"first_bucket_mb":1.0,"gradient_as_bucket_view":false,"reduc)"
        R"(er":"ddp","static_graph":false,"world_size":4},"kind":"train","model":)"
        R"({"options":{"B":1,"a_b":2,"ab":3,"count":0,"counts":[],"flag":false,"t)"
        R"(ext":"","x":0.5,"xs":[],"é":4},"plugin":"probe"},"optimizer":{"options)"
        R"(":{"betas":[0.9,0.999],"lr":0.001},"plugin":"adam"},"seed":0,"train":{)"
        R"("steps":5,"warmup":"auto"}})"},
     }},
    {"DistributedDefaults",
     R"toml([model]
plugin = "probe"
[data]
plugin = "synthetic"
[optimizer]
plugin = "adam"
[distributed]
bucket_mb = 1
)toml",
     {
       {"16b63574fd37ce556a1a47a5fe888bca44330bcceb081e7da4745ca5d3a8ff03",
        R"({"comm_hook":{"options":{},"plugin":"allreduce"},"data":{"batch_size":)"
        R"(32,"drop_last":true,"options":{"label":"","shape":[8],"size":1024},"pl)"
        R"(ugin":"synthetic","shuffle":true},"device":{"interop_threads":0,"threa)"
        R"(ds":0,"type":"cpu"},"distributed":{"backend":"gloo","broadcast_buffers)"
        R"(":true,"bucket_mb":1.0,"find_unused_parameters":false,"first_bucket_mb)"
        R"(":1.0,"gradient_as_bucket_view":false,"reducer":"ddp","static_graph":f)"
        R"(alse,"world_size":2},"kind":"train","model":{"options":{"B":1,"a_b":2,)"
        R"("ab":3,"count":0,"counts":[],"flag":false,"text":"","x":0.5,"xs":[],"é)"
        R"(":4},"plugin":"probe"},"optimizer":{"options":{"betas":[0.9,0.999],"lr)"
        R"(":0.001},"plugin":"adam"},"seed":0,"train":{"steps":100,"warmup":10}})"},
     }},
    {"Infer",
     R"toml([experiment]
kind = "infer"
seed = 5
[device]
type = "auto"
threads = 2
interop_threads = 1
[model]
plugin = "probe"
[infer]
batches = 3
warmup = "auto"
mode = "no_grad"
)toml",
     {
       {"008e481b9d5447f6339fb2591179f52ba08b38bdb47576432c159bf59b7db14b",
        R"({"device":{"interop_threads":1,"threads":2,"type":"auto"},)"
        R"("infer":{"batches":3,"mode":"no_grad","warmup":"auto"},)"
        R"("kind":"infer","model":{"options":{"B":1,"a_b":2,"ab":3,)"
        R"("count":0,"counts":[],"flag":false,"text":"","x":0.5,)"
        R"("xs":[],"é":4},"plugin":"probe"},"seed":5})"},
     }},
    {"InferWithData",
     R"toml([experiment]
kind = "infer"
[model]
plugin = "probe"
[data]
plugin = "synthetic"
batch_size = 4
)toml",
     {
       {"f6d0f0317c0b61a2cc34a3653fa324b84e62be55161f50db7ba9f34a4c448c7c",
        R"({"data":{"batch_size":4,"drop_last":true,"options":{"label":"",)"
        R"("shape":[8],"size":1024},"plugin":"synthetic","shuffle":true},)"
        R"("device":{"interop_threads":0,"threads":0,"type":"cpu"},)"
        R"("infer":{"batches":100,"mode":"inference","warmup":10},)"
        R"("kind":"infer","model":{"options":{"B":1,"a_b":2,"ab":3,)"
        R"("count":0,"counts":[],"flag":false,"text":"","x":0.5,)"
        R"("xs":[],"é":4},"plugin":"probe"},"seed":0})"},
     }},
    {"Sweep",
     R"toml([model]
plugin = "probe"
text = "a"
[data]
plugin = "synthetic"
[optimizer]
plugin = "adam"
[sweep]
"model.x" = [1e-4, 2]
)toml",
     {
       {"bd6d42dabaca31e7aa525e6dc5e9f80e83923aecd67d7fe6e00d6896f8673f7c",
        R"({"data":{"batch_size":32,"drop_last":true,"options":{"label":"",)"
        R"("shape":[8],"size":1024},"plugin":"synthetic","shuffle":true},)"
        R"("device":{"interop_threads":0,"threads":0,"type":"cpu"},)"
        R"("kind":"train","model":{"options":{"B":1,"a_b":2,"ab":3,)"
        R"("count":0,"counts":[],"flag":false,"text":"a","x":1e-04,)"
        R"("xs":[],"é":4},"plugin":"probe"},"optimizer":{"options":{"betas":[0.9)"
        R"(,0.999],"lr":0.001},"plugin":"adam"},"seed":0,"train":{"steps":100,)"
        R"("warmup":10}})"},
       {"fefeee780f8590e648bc8a251ddf3d4291f5fe5d196c192d5c7448227630f031",
        R"({"data":{"batch_size":32,"drop_last":true,"options":{"label":"",)"
        R"("shape":[8],"size":1024},"plugin":"synthetic","shuffle":true},)"
        R"("device":{"interop_threads":0,"threads":0,"type":"cpu"},)"
        R"("kind":"train","model":{"options":{"B":1,"a_b":2,"ab":3,)"
        R"("count":0,"counts":[],"flag":false,"text":"a","x":2.0,)"
        R"("xs":[],"é":4},"plugin":"probe"},"optimizer":{"options":{"betas":[0.9)"
        R"(,0.999],"lr":0.001},"plugin":"adam"},"seed":0,"train":{"steps":100,)"
        R"("warmup":10}})"},
     }},
};

const Case kExamples[] = {
    {"quickstart.toml", "",
     {
       {"26746e4276bc00cf121f06cf9b5d8b239f1138f17959d5a573c8aa5abf88ad80",
        R"({"data":{"batch_size":32,"drop_last":true,"options":{"classes":10,)"
        R"("data_seed":0,"label_noise":0.0,"shape":[32],"size":4096},)"
        R"("plugin":"synthetic","shuffle":true},"device":{"interop_threads":0,)"
        R"("threads":1,"type":"cpu"},"kind":"train","model":{"options":{"activati)"
        R"(on":"relu","dropout":0.0,"hidden":[64,64]},"plugin":"mlp"},)"
        R"("optimizer":{"options":{"lr":0.05,"momentum":0.9,"nesterov":false,)"
        R"("weight_decay":0.0},"plugin":"sgd"},"seed":0,"train":{"steps":1000,)"
        R"("warmup":20}})"},
     }},
    {"data_parallel.toml", "",
     {
       {"9d9deb2cfc962f172997f13208efc65923601c2d871a8b7cc9a6af7b62cad82c",
        R"({"comm_hook":{"options":{},"plugin":"allreduce"},"data":{"batch_size":)"
        R"(64,"drop_last":true,"options":{"classes":10,"data_seed":0,"label_noise)"
        R"(":0.0,"shape":[64],"size":4096},"plugin":"synthetic","shuffle":true},")"
        R"(device":{"interop_threads":0,"threads":1,"type":"cpu"},"distributed":{)"
        R"("backend":"gloo","broadcast_buffers":true,"bucket_mb":25.0,"find_unuse)"
        R"(d_parameters":false,"first_bucket_mb":1.0,"gradient_as_bucket_view":fa)"
        R"(lse,"reducer":"ddp","static_graph":false,"world_size":2},"kind":"train)"
        R"(","model":{"options":{"activation":"relu","dropout":0.0,"hidden":[256,)"
        R"(256]},"plugin":"mlp"},"optimizer":{"options":{"lr":0.05,"momentum":0.9)"
        R"(,"nesterov":false,"weight_decay":0.0},"plugin":"sgd"},"seed":0,"train")"
        R"(:{"steps":3000,"warmup":30}})"},
       {"15b7dc5361d895a3dd4aedb6a961ec2b19194870193fa4eb88f6a5542990c787",
        R"({"comm_hook":{"options":{},"plugin":"fp16_compress"},"data":{"batch_si)"
        R"(ze":64,"drop_last":true,"options":{"classes":10,"data_seed":0,"label_n)"
        R"(oise":0.0,"shape":[64],"size":4096},"plugin":"synthetic","shuffle":tru)"
        R"(e},"device":{"interop_threads":0,"threads":1,"type":"cpu"},"distribute)"
        R"(d":{"backend":"gloo","broadcast_buffers":true,"bucket_mb":25.0,"find_u)"
        R"(nused_parameters":false,"first_bucket_mb":1.0,"gradient_as_bucket_view)"
        R"(":false,"reducer":"ddp","static_graph":false,"world_size":2},"kind":"t)"
        R"(rain","model":{"options":{"activation":"relu","dropout":0.0,"hidden":[)"
        R"(256,256]},"plugin":"mlp"},"optimizer":{"options":{"lr":0.05,"momentum")"
        R"(:0.9,"nesterov":false,"weight_decay":0.0},"plugin":"sgd"},"seed":0,"tr)"
        R"(ain":{"steps":3000,"warmup":30}})"},
     }},
};

void expect_recorded(const std::vector<Trial>& trials, const Case& c) {
  ASSERT_EQ(trials.size(), c.trials.size()) << c.name;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    SCOPED_TRACE(std::string(c.name) + ", trial " + std::to_string(i + 1));
    EXPECT_EQ(trials[i].experiment.resolved_json(), c.trials[i].json);
    EXPECT_EQ(trials[i].experiment.config_hash(), c.trials[i].hash);
  }
}

class CanonicalJsonTest : public test::ExperimentFixture,
                          public ::testing::WithParamInterface<Case> {
 protected:
  void SetUp() override {
    ExperimentFixture::SetUp();
    catalog_.add(PluginKind::model, "probe", probe_schema());
  }
};

TEST_P(CanonicalJsonTest, KeepsTheRecordedJsonAndHash) {
  expect_recorded(expand(GetParam().toml), GetParam());
}

// `runner report` shows each trial's configuration written back as TOML
// (config_toml): read as an experiment file, it resolves to the same
// configuration, byte for byte, so the same trial identity.
TEST_P(CanonicalJsonTest, WrittenBackAsTomlItResolvesToTheSameConfiguration) {
  for (const Trial& trial : expand(GetParam().toml)) {
    const std::string toml = config_toml(trial.experiment.resolved_json());
    const std::vector<Trial> again = expand(toml);
    ASSERT_EQ(again.size(), 1u) << toml;
    EXPECT_EQ(again[0].experiment.resolved_json(), trial.experiment.resolved_json()) << toml;
    EXPECT_EQ(again[0].experiment.config_hash(), trial.experiment.config_hash());
  }
}

INSTANTIATE_TEST_SUITE_P(Recorded, CanonicalJsonTest, ::testing::ValuesIn(kCrafted),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(CanonicalJsonOfExamples, EveryExampleKeepsItsRecordedJsonAndHash) {
  PluginHost host;
  host.load(fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins");
  for (const Case& c : kExamples)
    expect_recorded(
        expand_trials(*parse_experiment_file(fs::path(RUNNER_SOURCE_DIR) / "experiments" / c.name),
                      host),
        c);
}

class ConfigTomlOfExamples : public test::ExperimentFixture {};

TEST_F(ConfigTomlOfExamples, EveryExampleTrialWrittenBackAsTomlResolvesToItself) {
  PluginHost host;
  host.load(fs::path(RUNNER_BINARY_DIR) / "lib" / "runner" / "plugins");
  for (const Case& c : kExamples) {
    for (const Trial& trial : expand_trials(
             *parse_experiment_file(fs::path(RUNNER_SOURCE_DIR) / "experiments" / c.name), host)) {
      SCOPED_TRACE(c.name);
      const std::string toml = config_toml(trial.experiment.resolved_json());
      const fs::path file = write(toml, "again.toml");
      const std::vector<Trial> again = expand_trials(*parse_experiment_file(file), host);
      ASSERT_EQ(again.size(), 1u) << toml;
      EXPECT_EQ(again[0].experiment.resolved_json(), trial.experiment.resolved_json()) << toml;
    }
  }
}

}  // namespace
}  // namespace runner
