// EXPECT_THROW_MSG(statement, ExceptionType, "exact message"): checks the
// exception type and its full what() text, not only that something threw.
#pragma once

#include <gtest/gtest.h>

#include <string>

#define EXPECT_THROW_MSG(statement, exception_type, expected_message)               \
  do {                                                                              \
    bool runner_thrown_ = false;                                                    \
    try {                                                                           \
      statement;                                                                    \
    } catch (const exception_type& runner_e_) {                                     \
      runner_thrown_ = true;                                                        \
      EXPECT_EQ(std::string(runner_e_.what()), std::string(expected_message));      \
    }                                                                               \
    EXPECT_TRUE(runner_thrown_) << "expected " #statement " to throw " #exception_type; \
  } while (false)
