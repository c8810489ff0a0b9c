// The runner plugin SDK: include this one header in a plugin library.
//
// Start with plugin.hpp (entry macro and registrar) and options.hpp (typed
// options), then the header of the kind you implement: model.hpp (or
// classification.hpp for a classifier), optimizer.hpp (and param_groups.hpp
// for an optimizer that wraps a LibTorch one), loader.hpp,
// comm_hook.hpp (not included here: it brings in c10d's headers; a comm
// hook plugin includes it itself). abi.hpp is the record the host checks before it loads a
// library. docs/plugins.md is the authoring guide.
#pragma once

#include "runner/abi.hpp"
#include "runner/classification.hpp"
#include "runner/kernel.hpp"
#include "runner/loader.hpp"
#include "runner/model.hpp"
#include "runner/optimizer.hpp"
#include "runner/options.hpp"
#include "runner/param_groups.hpp"
#include "runner/plugin.hpp"
#include "runner/version.hpp"
