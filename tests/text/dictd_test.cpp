// The dictd format (index + dictzip'd text) and GCIDE's markup, on entries
// written here the way dict-gcide ships them.
#include "posenc/text/dictd.h"

#include <zlib.h>

#include "text_test_support.h"

namespace posenc::text {
namespace {

using test::expect_error;

// dictd's base 64, written independently: digits, most significant first.
std::string b64(int64_t v) {
  const std::string digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  do {
    out.insert(out.begin(), digits[static_cast<size_t>(v % 64)]);
    v /= 64;
  } while (v > 0);
  return out;
}

void write_gzip(const std::filesystem::path& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

TEST(Dictd, Numbers) {
  EXPECT_EQ(dictd_number("A"), 0);
  EXPECT_EQ(dictd_number("/"), 63);
  EXPECT_EQ(dictd_number("BA"), 64);
  EXPECT_EQ(dictd_number("IBT"), 8 * 4096 + 1 * 64 + 19);  // GCIDE's offset of "Abacus"
  for (int64_t v : {1, 63, 64, 4095, 123456789}) EXPECT_EQ(dictd_number(b64(v)), v);
  expect_error<std::invalid_argument>([] { dictd_number("A-B"); },
                                      "[corpus] dictd numbers use A-Z a-z 0-9 + /, got 'A-B'");
  expect_error<std::invalid_argument>([] { dictd_number(""); }, "[corpus] a dictd number must have digits, got ''");
}

TEST(Dictd, EntriesMetadataAndSharedTexts) {
  const std::string dict = "database info\nAbacus text\nCat text\n";
  const std::string index = "00-database-info\t" + b64(0) + "\t" + b64(14) + "\n" +  //
                            "Abacus\t" + b64(14) + "\t" + b64(12) + "\n" +             //
                            "Abaci\t" + b64(14) + "\t" + b64(12) + "\n" +              // the same text
                            "Cat\t" + b64(26) + "\t" + b64(9) + "\n";
  const std::vector<DictEntry> e = parse_dictd(index, dict, "t.index");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].headword, "Abacus");
  EXPECT_EQ(e[0].text, "Abacus text\n");
  EXPECT_EQ(e[1].headword, "Cat");
  EXPECT_EQ(e[1].text, "Cat text\n");
}

TEST(Dictd, MalformedIndexLines) {
  expect_error<std::runtime_error>([] { parse_dictd("Abacus\tA\n", "x", "t.index"); },
                                   "[corpus] t.index:1: an index line is 'headword TAB offset TAB length'");
  expect_error<std::runtime_error>([] { parse_dictd("a\tA\tB\nb\tA\t*\n", "xyz", "t.index"); },
                                   "[corpus] t.index:2: dictd numbers use A-Z a-z 0-9 + /, got '*'");
  expect_error<std::runtime_error>([] { parse_dictd("Abacus\tB\tD\n", "xyz", "t.index"); },
                                   "[corpus] t.index:1: entry 'Abacus' at 1 + 3 runs past the dictionary's 3 bytes");
}

TEST(Dictd, CleansGcideMarkup) {
  const std::string raw =
      "Abacus \\Ab\"a*cus\\ ([a^]b\"[.a]*k[u^]s), n.; E. pl. {Abacuses}; L.\n"
      "   pl. {Abaci} (-s[imac]). [L. abacus, abax, Gr. 'a`bax]\n"
      "   1. A table or tray strewn with sand, anciently used for\n"
      "      drawing, calculating, etc. [Obs.]\n"
      "      [1913 Webster]\n"
      "\n"
      "   2. A calculating table or frame.\n"
      "      [1913 Webster +PJC]\n";
  EXPECT_EQ(clean_gcide(raw),
            "Abacus, n.; E. pl. Abacuses; L. pl. Abaci (-s). [L. abacus, abax, Gr. 'a`bax] 1. A table or tray "
            "strewn with sand, anciently used for drawing, calculating, etc. 2. A calculating table or frame.");
  EXPECT_EQ(clean_gcide(""), "");
  EXPECT_EQ(clean_gcide("  plain   words \n"), "plain words");
}

TEST(Dictd, ReadsGzipAndNamesTheMissingPackage) {
  test::ScratchDir dir;
  const std::string dict = "Abacus \\Ab\"a*cus\\, n. A frame.\n   [1913 Webster]\n";
  write_gzip(dir.path() / "g.dict.dz", dict);
  dir.write("g.index", "Abacus\tA\t" + b64(static_cast<int64_t>(dict.size())) + "\n");
  const std::vector<DictEntry> e = read_gcide(dir.path() / "g.index", dir.path() / "g.dict.dz");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].text, "Abacus, n. A frame.");
  expect_error<std::runtime_error>([&] { read_gcide(dir.path() / "none.index", dir.path() / "g.dict.dz"); },
                                   "[corpus] " + (dir.path() / "none.index").string() +
                                       ": not found; install Debian's dict-gcide (bash scripts/setup.sh)");
  dir.write("bad.dict.dz", "not gzip at all");
  try {
    read_gcide(dir.path() / "g.index", dir.path() / "bad.dict.dz");
    ADD_FAILURE() << "a non-gzip dictionary was read";
  } catch (const std::runtime_error& err) {
    EXPECT_EQ(std::string(err.what()).rfind("[corpus] " + (dir.path() / "bad.dict.dz").string() +
                                                ": not a valid gzip file (",
                                            0),
              0u)
        << err.what();
  }
}

}  // namespace
}  // namespace posenc::text
