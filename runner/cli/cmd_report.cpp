// placeholder replaced by the report command's implementation in progress
#include "commands.hpp"
#include "runner/common/error.hpp"
namespace runner::cli {
namespace {
int handle(const Args&, const Global&) { throw Error("runner report is being built"); }
}  // namespace
Command report_command() {
  CommandDef def;
  def.name = "report";
  def.summary = "(in progress)";
  def.usage = "runner report";
  return {def, &handle};
}
}  // namespace runner::cli
