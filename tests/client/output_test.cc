// vocabctl's table output: cell widths in terminal columns, not bytes.
#include "client/cli/output.h"

#include <iostream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace vocabd::cli {
namespace {

TEST(DisplayWidthTest, CountsColumnsNotBytes) {
  EXPECT_EQ(DisplayWidth(""), 0u);
  EXPECT_EQ(DisplayWidth("Once"), 4u);
  EXPECT_EQ(DisplayWidth("\xE2\x96\x81Once"), 5u);       // U+2581 (SentencePiece's space), 3 bytes
  EXPECT_EQ(DisplayWidth("\xC3\xA9t\xC3\xA9"), 3u);      // "été", 5 bytes
  EXPECT_EQ(DisplayWidth("e\xCC\x81"), 1u);              // e + U+0301 combining acute
  EXPECT_EQ(DisplayWidth("\xE4\xB8\x96\xE7\x95\x8C"), 4u);  // U+4E16 U+754C, East Asian Wide
  EXPECT_EQ(DisplayWidth("\xEF\xBC\xA1"), 2u);           // U+FF21 fullwidth A
  EXPECT_EQ(DisplayWidth("\xF0\x9F\x98\x80"), 2u);       // U+1F600 (emoji, Wide)
  EXPECT_EQ(DisplayWidth("a\xE2\x80\x8B" "b"), 2u);      // U+200B zero width space (Cf)
  EXPECT_EQ(DisplayWidth("\xFF\xFE" "a"), 3u);           // invalid bytes: one column each
  EXPECT_EQ(DisplayWidth("\xE2\x96" "a"), 2u);           // truncated sequence: one column
}

TEST(PrintTableTest, AlignsColumnsByDisplayWidth) {
  std::ostringstream captured;
  std::streambuf* old = std::cout.rdbuf(captured.rdbuf());
  PrintTable({{"id", "piece", "x"}, {"403", "\xE2\x96\x81Once", "1"}, {"7", "ab", "2"}});
  std::cout.rdbuf(old);
  // "piece" and "▁Once" are both 5 columns: the third column starts at the
  // same column on every line.
  EXPECT_EQ(captured.str(),
            "id   piece  x\n"
            "403  \xE2\x96\x81Once  1\n"
            "7    ab     2\n");
}

}  // namespace
}  // namespace vocabd::cli
