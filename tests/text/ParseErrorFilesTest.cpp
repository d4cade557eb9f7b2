// Runs tests/errors/parse_*.tile: each file's first line is `// expect: LINE:COL: error: MSG`,
// the exact error that parsing the file must throw.
#include <gtest/gtest.h>

#include "TextTestUtil.h"
#include "text/Text.h"

namespace tessera {
namespace {

using testing::read_file;
using testing::source_dir;
using testing::tile_files;

TEST(ParseErrorFiles, EachFileGivesItsExpectedError) {
  auto files = tile_files(source_dir() / "tests/errors", "parse_");
  EXPECT_GE(files.size(), 22u);
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    std::string text = read_file(path);
    const std::string tag = "// expect: ";
    ASSERT_EQ(text.rfind(tag, 0), 0u) << "first line must start with '" << tag << "'";
    std::string expect = text.substr(tag.size(), text.find('\n') - tag.size());
    std::string file = path.filename().string();
    try {
      parse_module(text, file);
      ADD_FAILURE() << "parsed without error; expected " << expect;
    } catch (const TesseraError& e) {
      EXPECT_EQ(std::string(e.what()), file + ":" + expect);
    }
  }
}

}  // namespace
}  // namespace tessera
