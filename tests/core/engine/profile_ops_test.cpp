// The per-operator table of a profile (aggregate_ops): calls and total time
// by name (and input shapes), self time from the nesting of events on one
// thread, CUDA time from the kernels each CPU event launched.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runner/engine/profile.hpp"

namespace runner {
namespace {

ProfiledEvent cpu(std::string name, std::int64_t start, std::int64_t end, std::uint64_t thread = 1,
                  std::uint64_t correlation = 0, std::string shapes = "") {
  ProfiledEvent e;
  e.name = std::move(name);
  e.start_ns = start;
  e.end_ns = end;
  e.thread = thread;
  e.correlation = correlation;
  e.input_shapes = std::move(shapes);
  return e;
}

ProfiledEvent kernel(std::int64_t start, std::int64_t end, std::uint64_t linked) {
  ProfiledEvent e;
  e.name = "sgemm_kernel";
  e.on_cuda = true;
  e.start_ns = start;
  e.end_ns = end;
  e.linked = linked;
  return e;
}

const store::OpStat& find(const std::vector<store::OpStat>& ops, const std::string& name,
                          const std::string& shapes = "") {
  for (const auto& op : ops)
    if (op.name == name && op.input_shapes == shapes) return op;
  ADD_FAILURE() << "no operator " << name << " " << shapes;
  static const store::OpStat none;
  return none;
}

TEST(ProfileOpsTest, SelfTimeIsTotalMinusDirectChildrenOnTheSameThread) {
  // linear [0, 100) holds addmm [10, 60) which holds mm [20, 50); a second
  // linear [200, 250) with its own addmm [210, 240). Another thread's event
  // inside [0, 100) is not a child.
  const auto ops = aggregate_ops({cpu("aten::linear", 0, 100), cpu("aten::addmm", 10, 60),
                                  cpu("aten::mm", 20, 50), cpu("aten::linear", 200, 250),
                                  cpu("aten::addmm", 210, 240), cpu("aten::relu", 5, 95, 2)});
  const auto& linear = find(ops, "aten::linear");
  EXPECT_EQ(linear.calls, 2);
  EXPECT_EQ(linear.total_cpu_ns, 150);
  EXPECT_EQ(linear.self_cpu_ns, 150 - 50 - 30);
  const auto& addmm = find(ops, "aten::addmm");
  EXPECT_EQ(addmm.calls, 2);
  EXPECT_EQ(addmm.total_cpu_ns, 80);
  EXPECT_EQ(addmm.self_cpu_ns, 80 - 30);  // only the direct child mm
  EXPECT_EQ(find(ops, "aten::mm").self_cpu_ns, 30);
  EXPECT_EQ(find(ops, "aten::relu").self_cpu_ns, 90);
  // By self CPU time, then total.
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].name, "aten::relu");
  EXPECT_EQ(ops[1].name, "aten::linear");
  for (const auto& op : ops) {
    EXPECT_LE(op.self_cpu_ns, op.total_cpu_ns);
    EXPECT_EQ(op.self_cuda_ns, 0);
    EXPECT_EQ(op.total_cuda_ns, 0);
  }
}

TEST(ProfileOpsTest, EventsStartingTogetherNestTheShorterInTheLonger) {
  const auto ops = aggregate_ops({cpu("aten::t", 0, 10), cpu("aten::transpose", 0, 6),
                                  cpu("aten::as_strided", 2, 4)});
  EXPECT_EQ(find(ops, "aten::t").self_cpu_ns, 4);
  EXPECT_EQ(find(ops, "aten::transpose").self_cpu_ns, 4);
  EXPECT_EQ(find(ops, "aten::as_strided").self_cpu_ns, 2);
}

TEST(ProfileOpsTest, InputShapesSplitAnOperator) {
  const auto ops = aggregate_ops({cpu("aten::mm", 0, 10, 1, 0, "[[2, 3], [3, 4]]"),
                                  cpu("aten::mm", 20, 25, 1, 0, "[[2, 3], [3, 4]]"),
                                  cpu("aten::mm", 30, 70, 1, 0, "[[8, 3], [3, 4]]")});
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(find(ops, "aten::mm", "[[2, 3], [3, 4]]").calls, 2);
  EXPECT_EQ(find(ops, "aten::mm", "[[2, 3], [3, 4]]").total_cpu_ns, 15);
  EXPECT_EQ(find(ops, "aten::mm", "[[8, 3], [3, 4]]").calls, 1);
  EXPECT_EQ(ops[0].input_shapes, "[[8, 3], [3, 4]]");
}

TEST(ProfileOpsTest, KernelsCountForTheOperatorThatLaunchedThem) {
  // linear > addmm > cudaLaunchKernel (correlation 7) -> a 30 ns kernel; the
  // runtime call passes its kernel to addmm (self), linear gets it in total.
  const auto ops = aggregate_ops({cpu("aten::linear", 0, 100), cpu("aten::addmm", 10, 60),
                                  cpu("cudaLaunchKernel", 20, 30, 1, 7), kernel(40, 70, 7),
                                  kernel(80, 90, 99)});  // a kernel with no known launcher
  const auto& addmm = find(ops, "aten::addmm");
  EXPECT_EQ(addmm.self_cuda_ns, 30);
  EXPECT_EQ(addmm.total_cuda_ns, 30);
  const auto& linear = find(ops, "aten::linear");
  EXPECT_EQ(linear.self_cuda_ns, 0);
  EXPECT_EQ(linear.total_cuda_ns, 30);
  EXPECT_EQ(find(ops, "cudaLaunchKernel").self_cuda_ns, 0);
  for (const auto& op : ops) EXPECT_NE(op.name, "sgemm_kernel");  // kernels are not CPU ops
}

TEST(ProfileOpsTest, NoEventsNoOperators) { EXPECT_TRUE(aggregate_ops({}).empty()); }

TEST(ProfileOpsTest, TracesGoNextToTheDatabase) {
  EXPECT_EQ(trace_directory("/data/runs/runner.db"), "/data/runs/runner.db.traces");
  EXPECT_EQ(trace_path("/data/runs/runner.db", "abc"), "/data/runs/runner.db.traces/run-abc.json");
}

}  // namespace
}  // namespace runner
