#include <gtest/gtest.h>
TEST(Gpu, Placeholder) { SUCCEED(); }
