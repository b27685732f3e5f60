#include "lib/core/json_limits.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vocabd {
namespace {

using ::testing::HasSubstr;

TEST(JsonNestingDepthTest, CountsObjectsAndArraysOnly) {
  EXPECT_EQ(JsonNestingDepth(""), 0);
  EXPECT_EQ(JsonNestingDepth("12"), 0);
  EXPECT_EQ(JsonNestingDepth("{}"), 1);
  EXPECT_EQ(JsonNestingDepth("[1, [2, [3]], {}]"), 3);
  EXPECT_EQ(JsonNestingDepth(R"({"a": [1], "b": {"c": [[]]}})"), 4);
}

TEST(JsonNestingDepthTest, BracketsInsideStringsDoNotCount) {
  EXPECT_EQ(JsonNestingDepth(R"({"a": "[[[{{{"})"), 1);
  // An escaped quote does not end the string; an escaped backslash does not
  // escape the quote after it.
  EXPECT_EQ(JsonNestingDepth(R"(["\"[[[", "\\", [1]])"), 2);
}

TEST(JsonNestingDepthTest, UnbalancedTextIsScannedWithoutGoingNegative) {
  EXPECT_EQ(JsonNestingDepth("]]]][["), 2);
  EXPECT_EQ(JsonNestingDepth(std::string(70000, '[')), 70000);
}

TEST(CheckJsonDepthTest, RefusesAboveTheLimitNamingDepthLimitAndOffset) {
  EXPECT_TRUE(CheckJsonDepth("[[[]]]", 3, "body").ok());
  const absl::Status s = CheckJsonDepth(R"({"v": [[[[]]]]})", 3, "body");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("body: JSON nesting depth 5 is above the limit of 3 (first exceeded at "
                        "byte 8)"));
}

}  // namespace
}  // namespace vocabd
