// xxHash64 against the algorithm's published reference values, the
// streaming form against the one-shot form for every way of cutting the
// input, and the digest the atomic writer reports against the file's.
#include "io/xxhash64.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/file_digest.h"
#include "temp_dir.h"

namespace tessel::io {
namespace {

TEST(XxHash64, MatchesReferenceVectors) {
  EXPECT_EQ(xxhash64("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(xxhash64("a", 1), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(xxhash64("abc", 3), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(xxhash64("Call me Ishmael.", 16), 0x6D04390FC9D61A90ULL);
  // 39 bytes: one 32-byte stripe, then the 4-byte and 1-byte tails.
  const char* text = "Nobody inspects the spammish repetition";
  EXPECT_EQ(xxhash64(text, std::strlen(text)), 0xFBCEA83C8A378BF1ULL);
  EXPECT_NE(xxhash64("abc", 3, 1), xxhash64("abc", 3, 0));
  EXPECT_EQ(hash_hex(0xEF46DB3751D8E999ULL), "ef46db3751d8e999");
  EXPECT_EQ(hash_hex(0x1ULL), "0000000000000001");
}

TEST(XxHash64, StreamingEqualsOneShotForAnySplit) {
  std::vector<unsigned char> data(300);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t length : {0u, 5u, 31u, 32u, 33u, 64u, 100u, 300u}) {
    const uint64_t whole = xxhash64(data.data(), length);
    for (size_t piece : {1u, 3u, 8u, 31u, 32u, 33u, 200u}) {
      XxHash64 h;
      for (size_t at = 0; at < length; at += piece) h.update(data.data() + at, std::min(piece, length - at));
      EXPECT_EQ(h.digest(), whole) << "length " << length << ", pieces of " << piece;
    }
  }
}

TEST(FileDigest, WriterReportsWhatTheFileHolds) {
  testing::TempDir dir;
  std::string content(100000, 'x');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i % 251);
  const auto path = dir.path() / "f.bin";
  const FileDigest written = write_file_atomically(path, content);
  EXPECT_EQ(written.bytes, content.size());
  EXPECT_EQ(written.xxh64, xxhash64(content.data(), content.size()));
  EXPECT_EQ(digest_file(path), written);
  EXPECT_THROW(digest_file(dir.path() / "missing"), Error);
}

}  // namespace
}  // namespace tessel::io
