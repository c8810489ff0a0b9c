// Tests of the image_folder loaders (being written).
#include <gtest/gtest.h>
