// write_file_atomic: replaces a file completely or not at all.
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/atomic_file.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

TEST(AtomicFile, WritesAndReplaces) {
  const std::string path = scratch_path("atomic_replace.bin");
  write_file_atomic(path, std::string_view("first version"));
  EXPECT_EQ(file_bytes(path), "first version");
  write_file_atomic(path, [](std::ostream& out) { out << "second"; });
  EXPECT_EQ(file_bytes(path), "second");
}

TEST(AtomicFile, FailingWriterLeavesOldFileAndNoTemp) {
  const std::string path = scratch_path("atomic_fail.bin");
  write_file_atomic(path, std::string_view("old contents"));
  const std::string msg = error_of([&] {
    write_file_atomic(path, [](std::ostream& out) {
      out << "half of the new file";
      throw std::runtime_error("disk on fire");
    });
  });
  EXPECT_TRUE(contains_all(msg, {path, "disk on fire"}));
  EXPECT_EQ(file_bytes(path), "old contents");
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_EQ(entry.path().string().find("atomic_fail.bin.tmp"), std::string::npos)
        << "temp file left behind: " << entry.path();
}

TEST(AtomicFile, UnwritableDirectoryIsNamed) {
  const std::string path = scratch_path("no_such_dir") + "/file.bin";
  EXPECT_TRUE(contains_all(error_of([&] { write_file_atomic(path, std::string_view("x")); }),
                           {path, "No such file or directory"}));
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace glass
