// What the statistics sources share privately: input checks and the number
// formatting of their error messages, and the median of a sorted sample.
// Defined in descriptive.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace runner::store::detail {

// A number as a person would write it, for error messages
// ("1.5", not std::to_string's "1.500000").
std::string num(double v);

// Throws runner::Error naming `who` ("side A") when `values` is empty or holds
// a value that is not finite.
void require_values(const std::vector<double>& values, std::string_view who);

// Throws runner::Error unless 0 < alpha < 1. Defined in verdict.cpp.
void require_alpha(double alpha);

// Median of an ascending, non-empty vector.
double median_sorted(const std::vector<double>& sorted);

// Percentile q in [0, 100] (type 7, as percentile_sorted) of a non-empty
// `values` in linear time: only the two order statistics around the rank are
// placed. Reorders `values`.
double percentile_in_place(std::vector<double>& values, double q);

}  // namespace runner::store::detail
