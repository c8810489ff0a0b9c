// Descriptive statistics over measured samples (no LibTorch).
#pragma once

#include <string>
#include <vector>

#include "runner/store/store.hpp"

namespace runner::store {

/// Percentile by linear interpolation between closest ranks (NumPy's default,
/// "type 7"); `q` in [0, 100]. `sorted` must be sorted ascending and non-empty.
[[nodiscard]] double percentile_sorted(const std::vector<double>& sorted, double q);

/// n, mean, sample standard deviation (n-1), min, p50, p90, p99, max of `values`.
/// An empty input gives n = 0 and zeros.
[[nodiscard]] Summary summarize(const std::string& metric, const std::string& unit,
                                std::vector<double> values);

}  // namespace runner::store
