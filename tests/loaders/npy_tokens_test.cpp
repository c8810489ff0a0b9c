// Tests of the npy_tokens loaders (being written).
#include <gtest/gtest.h>
