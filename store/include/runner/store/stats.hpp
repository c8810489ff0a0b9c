// Forwarding header, to be removed: the statistics moved to statistics.hpp
// (one module, docs/method.md). Kept only until every engine source includes
// statistics.hpp directly.
#pragma once

#include "runner/store/statistics.hpp"
