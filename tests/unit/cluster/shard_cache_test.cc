// The node's content-addressed cache: a blob written is read back verified; a blob whose bytes
// changed on disk, or whose size is wrong, is reported (DataLoss) and deleted; a write never leaves
// a partial blob under its final name (temporaries live in tmp/ and are swept at start-up).
#include "node/shard_cache.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/sha256.h"
#include "tests/unit/temp_dir.h"

namespace sparkserve::node {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(ShardCache, WritesAndReadsVerifiedBlobs) {
  test_support::TempDir dir("shard_cache");
  ShardCache cache(dir.path());
  ASSERT_TRUE(cache.Init().ok());
  const std::string data(100000, 'x');
  const std::string sha = proto::Sha256(std::string_view(data));
  EXPECT_TRUE(absl::IsNotFound(cache.Read(sha, data.size()).status()));
  ASSERT_TRUE(cache.Write(sha, Bytes(data)).ok());
  absl::StatusOr<CachedBlob> blob = cache.Read(sha, data.size());
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(blob->data), blob->size), data);
  EXPECT_EQ(cache.PathOf(sha).parent_path().parent_path(), dir.path() / "blobs");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() / "tmp"));  // the temporary was renamed into place
}

TEST(ShardCache, CorruptedOrTruncatedBlobsAreReportedAndRemoved) {
  test_support::TempDir dir("shard_cache_bad");
  ShardCache cache(dir.path());
  ASSERT_TRUE(cache.Init().ok());
  const std::string data(4096, 'a');
  const std::string sha = proto::Sha256(std::string_view(data));
  ASSERT_TRUE(cache.Write(sha, Bytes(data)).ok());
  {  // one byte flipped in place
    std::fstream f(cache.PathOf(sha), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1234);
    f.put('b');
  }
  absl::StatusOr<CachedBlob> bad = cache.Read(sha, data.size());
  EXPECT_TRUE(absl::IsDataLoss(bad.status())) << bad.status();
  EXPECT_FALSE(std::filesystem::exists(cache.PathOf(sha)));
  EXPECT_TRUE(absl::IsNotFound(cache.Read(sha, data.size()).status()));
  // Rewritten, then cut short (a crash of some other writer): the size gives it away.
  ASSERT_TRUE(cache.Write(sha, Bytes(data)).ok());
  std::filesystem::resize_file(cache.PathOf(sha), 100);
  EXPECT_TRUE(absl::IsDataLoss(cache.Read(sha, data.size()).status()));
}

TEST(ShardCache, LeftoverTemporariesAreSweptAndNeverRead) {
  test_support::TempDir dir("shard_cache_tmp");
  std::filesystem::create_directories(dir.path() / "tmp");
  std::ofstream(dir.path() / "tmp" / "half-written") << "partial";
  ShardCache cache(dir.path());
  ASSERT_TRUE(cache.Init().ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() / "tmp"));
}

}  // namespace
}  // namespace sparkserve::node
