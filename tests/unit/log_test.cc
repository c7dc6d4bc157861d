// base/log.h: levels, the text and JSON forms, and hostile field values.
#include "base/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace tune::log {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override { SetStreamForTesting(&out_); }
  void TearDown() override {
    SetStreamForTesting(nullptr);
    ASSERT_TRUE(Configure("info", "text").ok());
  }
  std::ostringstream out_;
};

TEST_F(LogTest, JsonLinesCarryTimeLevelComponentMessageAndFields) {
  ASSERT_TRUE(Configure("info", "json").ok());
  Info("coordinator", "leased a unit", {{"sweep", "nightly-3"}, {"unit", "42"}, {"configs", uint64_t{16}},
                                        {"seconds", 0.25}, {"retry", true}});
  // A peer's text cannot break the line or the JSON.
  Warn("worker", "refused\nresults", {{"error", "bad \"quote\"\n\xff\xfe end"}, {"worker", "w\\1"}});
  const auto lines = Lines(out_.str());
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  auto first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["level"], "info");
  EXPECT_EQ(first["component"], "coordinator");
  EXPECT_EQ(first["message"], "leased a unit");
  EXPECT_EQ(first["sweep"], "nightly-3");
  EXPECT_EQ(first["unit"], "42");  // given as text, stays text
  // Numbers given as numbers are JSON numbers.
  EXPECT_TRUE(first["configs"].is_number_unsigned()) << first["configs"];
  EXPECT_EQ(first["configs"], 16);
  EXPECT_TRUE(first["seconds"].is_number_float()) << first["seconds"];
  EXPECT_DOUBLE_EQ(first["seconds"].get<double>(), 0.25);
  EXPECT_EQ(first["retry"], "true");
  EXPECT_TRUE(std::regex_match(first["time"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d)")))
      << first["time"];
  auto second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(second["level"], "warning");
  EXPECT_EQ(second["message"], "refused\nresults");
  EXPECT_EQ(second["worker"], "w\\1");
  EXPECT_NE(second["error"].get<std::string>().find("bad \"quote\""), std::string::npos);
}

TEST_F(LogTest, TextLinesQuoteValuesAndKeepToOneLine) {
  ASSERT_TRUE(Configure("debug", "text").ok());
  Write(Level::kDebug, "worker", "unit", {{"op", "gemm"}, {"shape", "M=1,N=2"}, {"error", "two words\nand a line"}});
  const auto lines = Lines(out_.str());
  ASSERT_EQ(lines.size(), 1u) << out_.str();
  EXPECT_NE(lines[0].find(" debug worker: unit op=gemm shape=\"M=1,N=2\" error=\"two words\\nand a line\""),
            std::string::npos)
      << lines[0];
}

TEST_F(LogTest, LinesBelowTheLevelAreNotWritten) {
  ASSERT_TRUE(Configure("warn", "text").ok());
  EXPECT_FALSE(Enabled(Level::kInfo));
  EXPECT_TRUE(Enabled(Level::kError));
  Info("coordinator", "quiet");
  Write(Level::kDebug, "coordinator", "quieter");
  Error("coordinator", "loud");
  const auto lines = Lines(out_.str());
  ASSERT_EQ(lines.size(), 1u) << out_.str();
  EXPECT_NE(lines[0].find("loud"), std::string::npos);
}

TEST_F(LogTest, ConfigureRefusesWhatItDoesNotKnowAndKeepsTheRest) {
  EXPECT_FALSE(Configure("verbose", "").ok());
  EXPECT_FALSE(Configure("", "xml").ok());
  ASSERT_TRUE(Configure("error", "").ok());
  EXPECT_FALSE(Enabled(Level::kWarn));
  ASSERT_TRUE(Configure("", "json").ok());  // the level stays
  EXPECT_FALSE(Enabled(Level::kWarn));
}

}  // namespace
}  // namespace tune::log
