#include "tensor/layout.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace tessel::tensor {
namespace {

TEST(Layout, Prints) {
  EXPECT_EQ(Layout::replicate().to_string(), "Replicate");
  EXPECT_EQ(Layout::partial().to_string(), "Partial");
  EXPECT_EQ(Layout::shard(0).to_string(), "Shard(0)");
  EXPECT_EQ(Layout::shard(-1).to_string(), "Shard(-1)");
}

TEST(Layout, Equality) {
  EXPECT_EQ(Layout::shard(1), Layout::shard(1));
  EXPECT_NE(Layout::shard(1), Layout::shard(0));
  EXPECT_NE(Layout::shard(0), Layout::replicate());
  EXPECT_NE(Layout::replicate(), Layout::partial());
  EXPECT_EQ(Layout::partial(), Layout::partial());
  EXPECT_NE(Layout::shard(-1), Layout::shard(2));
  EXPECT_EQ(Layout::shard(-1).normalized(3), Layout::shard(2).normalized(3));
}

TEST(Layout, Kinds) {
  EXPECT_TRUE(Layout::shard(2).is_shard());
  EXPECT_EQ(Layout::shard(2).dim(), 2);
  EXPECT_TRUE(Layout::replicate().is_replicate());
  EXPECT_TRUE(Layout::partial().is_partial());
  EXPECT_EQ(Layout::partial().kind(), Layout::Kind::Partial);
  EXPECT_THROW(Layout::replicate().dim(), Error);
}

TEST(Layout, Normalizes) {
  EXPECT_EQ(Layout::shard(-1).normalized(3).dim(), 2);
  EXPECT_EQ(Layout::shard(-3).normalized(3).dim(), 0);
  EXPECT_EQ(Layout::shard(1).normalized(3).dim(), 1);
  EXPECT_EQ(Layout::replicate().normalized(2), Layout::replicate());
  EXPECT_THROW(Layout::shard(3).normalized(3), Error);
  EXPECT_THROW(Layout::shard(-4).normalized(3), Error);
}

TEST(Layout, ParsesWhatItPrints) {
  for (const Layout& l : {Layout::replicate(), Layout::partial(), Layout::shard(0), Layout::shard(3),
                          Layout::shard(-1)}) {
    EXPECT_EQ(Layout::parse(l.to_string()), l) << l.to_string();
  }
  for (const char* bad : {"", "Shard", "Shard()", "Shard(x)", "Shard(1", "shard(1)", "Replicated",
                          "Shard(1)x", "Shard(1.5)"}) {
    EXPECT_THROW(Layout::parse(bad), Error) << bad;
  }
  try {
    Layout::parse("Sharded(0)");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Sharded(0)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Replicate"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel::tensor
