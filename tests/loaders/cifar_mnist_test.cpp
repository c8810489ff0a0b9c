// Tests of the cifar_mnist loaders (being written).
#include <gtest/gtest.h>
