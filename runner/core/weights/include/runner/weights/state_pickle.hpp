// The pickle of a torch.save file (data.pkl), checked and rewritten so that
// LibTorch's unpickler returns a state dict. No LibTorch here: bytes in,
// bytes out.
//
// Why a rewrite: torch.save(model.state_dict(), path) pickles a
// collections.OrderedDict, and LibTorch's Unpickler::readGlobal maps that
// global to a callable that leaves None, before any type resolver is asked
// (it expects OrderedDict only as a tensor's empty backward hooks). The
// SETITEMS that fills the dict then fails with "Expected GenericDict but got
// None" (pytorch/pytorch#100741, #95362, #37213; the fix, #139750, is not in
// LibTorch 2.14). Renaming the global to builtins.dict does not help: an
// unknown global goes to the type resolver, whose object loader can only
// build TorchScript objects, never a dict. So the rewrite works on opcodes,
// never by searching bytes (a tensor name or a string may hold any bytes):
// every opcode is decoded with its argument, and
//   - "GLOBAL collections OrderedDict" with its memo puts and gets is
//     dropped, and the "() REDUCE" that calls it becomes EMPTY_DICT;
//   - BUILD on such a dict (which sets the `_metadata` attribute Python
//     attaches to a state dict) becomes NEWOBJ, which LibTorch implements as
//     "pop the top of the stack": the attribute is dropped, the dict stays;
//   - LONG1 integers shorter than 8 bytes (Python writes the fewest bytes,
//     LibTorch reads only 8) are widened to 8.
// On the way the pickle is checked so that LibTorch's unpickler, which
// trusts its input, only sees what torch.save writes for a dict of tensors:
// known opcodes and globals, a stack that never underflows or crosses a
// mark, memo indices that exist, storage descriptions of a known dtype and a
// size the file can hold, and containers nested at most 64 deep (the
// unpickler's values free recursively).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace runner::weights::detail {

/// A refused pickle: what() says what is wrong ("its data.pkl ..."), hint() what to do.
class PickleError : public std::runtime_error {
 public:
  PickleError(const std::string& what, std::string hint)
      : std::runtime_error(what), hint_(std::move(hint)) {}
  [[nodiscard]] const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

/// The deepest nesting of lists, tuples and dicts accepted.
inline constexpr int kMaxPickleDepth = 64;

/// Checks `pickle` (a data.pkl) and rewrites it for torch::jit::Unpickler
/// (see above). A storage may hold at most `max_storage_bytes` (the file's
/// size). Throws PickleError.
[[nodiscard]] std::string rewrite_state_pickle(std::string_view pickle,
                                               std::uint64_t max_storage_bytes);

}  // namespace runner::weights::detail
