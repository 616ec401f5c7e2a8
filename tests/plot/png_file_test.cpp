// write_png_file: the bytes land in the file whole, replacing an old file,
// with no temporary left behind; bad arguments and failures are reported.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>

#include "plot_test_util.h"

namespace posenc::plot {
namespace {

using testing::argument_error;
using testing::read_bytes;
using testing::TempDir;

std::vector<unsigned char> small_png() {
  LineFigure f;
  f.series = {{{0, 1}, {0, 1}, ""}};
  f.width = f.height = 200;
  return render_lines(f);
}

TEST(PngFile, WritesAndReplacesAtomically) {
  TempDir dir;
  const std::string path = dir.file("figure.png");
  const std::vector<unsigned char> first = small_png();
  write_png_file(path, first);
  EXPECT_EQ(read_bytes(path), first);
  HeatmapFigure h;
  const std::vector<double> v{1, 2, 3, 4};
  h.values = v;
  h.rows = h.cols = 2;
  const std::vector<unsigned char> second = render_heatmap(h);
  write_png_file(path, second);
  EXPECT_EQ(read_bytes(path), second);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"figure.png"});
}

TEST(PngFile, ArgumentErrors) {
  const std::vector<unsigned char> png = small_png();
  EXPECT_EQ(argument_error([&] { write_png_file("", png); }), "[plot] path must not be empty, got an empty string");
  const std::vector<unsigned char> short_bytes{0x89, 'P', 'N'};
  EXPECT_EQ(argument_error([&] { write_png_file("/tmp/x.png", short_bytes); }),
            "[plot] png must start with the 8-byte PNG signature, got 3 bytes");
  std::vector<unsigned char> wrong = png;
  wrong[1] = 'J';
  EXPECT_EQ(argument_error([&] { write_png_file("/tmp/x.png", wrong); }),
            "[plot] png must start with the 8-byte PNG signature, got other bytes");
}

TEST(PngFile, FailuresNameThePathAndLeaveNothingBehind) {
  TempDir dir;
  const std::string missing = dir.file("missing") + "/figure.png";
  try {
    write_png_file(missing, small_png());
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "[plot] " + missing + ": cannot create a file in '" + dir.file("missing") + "': No such file or directory");
  }
  // The target is a directory: the rename fails, the temporary file goes.
  std::filesystem::create_directory(dir.file("taken.png"));
  try {
    write_png_file(dir.file("taken.png"), small_png());
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "[plot] " + dir.file("taken.png") + ": cannot replace the file: Is a directory");
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"taken.png"});
}

}  // namespace
}  // namespace posenc::plot
