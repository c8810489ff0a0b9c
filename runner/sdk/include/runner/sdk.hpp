// The runner plugin SDK: include this one header in a plugin library.
//
// Start with plugin.hpp (entry macro and registrar), then the header of the
// kind you implement: model.hpp, optimizer.hpp, loader.hpp, kernel.hpp,
// comm_hook.hpp. Options are declared with options.hpp. docs/plugins.md is
// the authoring guide.
#pragma once

#include "runner/comm_hook.hpp"
#include "runner/kernel.hpp"
#include "runner/loader.hpp"
#include "runner/model.hpp"
#include "runner/optimizer.hpp"
#include "runner/options.hpp"
#include "runner/plugin.hpp"
#include "runner/version.hpp"
