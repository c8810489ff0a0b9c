// Descriptive statistics over measured samples (no LibTorch).
#pragma once

#include <string>
#include <vector>

#include "runner/store/store.hpp"

namespace runner::store {

/// A run whose step times have a coefficient of variation above this is
/// reported as noisy (torch.utils.benchmark warns on a similar spread).
inline constexpr double kNoisyCoefficientOfVariation = 0.10;

/// The warning for a noisy series, or "" when its spread is acceptable.
[[nodiscard]] std::string noise_warning(const Summary& summary);

/// Percentile by linear interpolation between closest ranks (NumPy's default,
/// "type 7"); `q` in [0, 100]. `sorted` must be sorted ascending and non-empty.
[[nodiscard]] double percentile_sorted(const std::vector<double>& sorted, double q);

/// n, mean, sample standard deviation (n-1), min, p50, p90, p99, max of `values`.
/// An empty input gives n = 0 and zeros.
[[nodiscard]] Summary summarize(const std::string& metric, const std::string& unit,
                                std::vector<double> values);

}  // namespace runner::store
