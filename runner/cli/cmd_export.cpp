// placeholder replaced by the export command's implementation in progress
#include "commands.hpp"
#include "runner/common/error.hpp"
namespace runner::cli {
namespace {
int handle(const Args&, const Global&) { throw Error("runner export is being built"); }
}  // namespace
Command export_command() {
  CommandDef def;
  def.name = "export";
  def.summary = "(in progress)";
  def.usage = "runner export";
  return {def, &handle};
}
}  // namespace runner::cli
