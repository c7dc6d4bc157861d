#include "base/text.h"

#include <gtest/gtest.h>

namespace tune {
namespace {

TEST(Text, ValidUtf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80"));  // é, €, a rocket
  EXPECT_TRUE(IsValidUtf8(std::string("nul\0ok", 6)));
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));  // U+10FFFF
}

TEST(Text, InvalidUtf8) {
  for (const char* bad : {"\xff", "\xc3", "\xc3\x28", "\xc0\xaf" /* overlong '/' */, "\xe0\x80\xaf",
                          "\xed\xa0\x80" /* surrogate */, "\xf4\x90\x80\x80" /* > U+10FFFF */, "\x80",
                          "ok\xe2\x82"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
  }
}

TEST(Text, ToValidUtf8ReplacesEachBadByte) {
  EXPECT_EQ(ToValidUtf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(ToValidUtf8("\xc3\x28"), "\xef\xbf\xbd(");
  EXPECT_EQ(ToValidUtf8("\xe2\x82\xac"), "\xe2\x82\xac");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xf0\x9f\x9a")));
}

TEST(Text, CheckTextNamesTheFieldAndTheBound) {
  EXPECT_TRUE(CheckText("fine", "hello.workerName", 8).ok());
  auto st = CheckText("too long", "hello.workerName", 4);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "hello.workerName is 8 bytes (at most 4)");
  st = CheckText("ab\xff", "name", 100);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "name is not valid UTF-8 (byte 2)");
}

}  // namespace
}  // namespace tune
