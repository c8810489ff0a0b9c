// The errors a loader throws about its data. No LibTorch here: the parsers of
// data files (plugins/loaders/common/formats) throw them too, and are fuzzed
// in a build without LibTorch (docs/reliability.md#fuzzing).
#pragma once

#include <stdexcept>

namespace runner {

/// A loader's data is wrong: a missing file, a truncated record, a bad magic
/// number, a label outside the classes. The message names the file and the
/// record or byte offset. Thrown by a factory, the host reports it before
/// any run starts (exit 2); thrown while reading, the run fails with it.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One sample cannot be read (a corrupt image). With [data] on_error =
/// "skip" the pipeline drops the sample from its batch and counts it; with
/// "fail" (the default) the run fails with this message.
class SampleError : public DataError {
 public:
  using DataError::DataError;
};

}  // namespace runner
