// `convjit bench` argument handling and its shapes file: every mistake is a usage error with a
// message (an unknown flag, dtype, format or shape name, a malformed or non-positive number),
// never a silently different benchmark (`--only nosuchshape` used to run nothing and exit 0,
// `--min-time-ms abc` to become 0).
#include "tools/bench/bench_options.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "tools/bench/bench_shapes.hpp"
#include "tools/cli_args.hpp"

namespace convjit::bench {
namespace {

using cli::UsageError;

BenchOptions parse(std::vector<std::string_view> words) { return parse_bench_options(words); }

// The message of the UsageError `words` raise ("" when they parse).
std::string error_of(std::vector<std::string_view> words) {
  try {
    parse(words);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(BenchOptions, DefaultsAndEveryFlag) {
  const BenchOptions d = parse({"--shapes", "s.txt"});
  EXPECT_EQ(d.shapes_path, "s.txt");
  EXPECT_EQ(d.dtypes, (std::vector<DType>{DType::kFloat32, DType::kBFloat16}));
  EXPECT_EQ(d.threads, (std::vector<int>{1, 2}));
  EXPECT_EQ(d.format, OutputFormat::kTable);
  EXPECT_DOUBLE_EQ(d.min_time_ms, 200);
  EXPECT_FALSE(d.no_peers);

  const BenchOptions o = parse(
      {"--shapes=n.txt", "--only", "a,b", "--dtype", "f16,bfloat16,float64,f32", "--threads",
       "1,2,16", "--format", "json", "--min-time-ms", "2.5", "--markdown", "t.md", "--no-peers"});
  EXPECT_EQ(o.only, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.dtypes,
            (std::vector<DType>{DType::kHalf, DType::kBFloat16, DType::kFloat64, DType::kFloat32}));
  EXPECT_EQ(o.threads, (std::vector<int>{1, 2, 16}));
  EXPECT_EQ(o.format, OutputFormat::kJson);
  EXPECT_DOUBLE_EQ(o.min_time_ms, 2.5);
  EXPECT_EQ(o.markdown_path, "t.md");
  EXPECT_TRUE(o.no_peers);
  EXPECT_EQ(parse({"--shapes", "s", "--format", "csv"}).format, OutputFormat::kCsv);
  EXPECT_EQ(parse({"--shapes", "s", "--peer-lib", "/a.so,/b.so"}).peer_libs,
            (std::vector<std::string>{"/a.so", "/b.so"}));
  EXPECT_TRUE(parse({"--help"}).help);  // no --shapes needed for help
}

TEST(BenchOptions, DtypesAreSpelledAsConvjitRunSpellsThem) {
  // The short names and every name `convjit run --dtype` takes; a repeat counts once.
  EXPECT_EQ(parse({"--shapes", "s", "--dtype", "half,float16,f16"}).dtypes,
            std::vector<DType>{DType::kHalf});
  EXPECT_EQ(parse({"--shapes", "s", "--dtype", "float,float32"}).dtypes,
            std::vector<DType>{DType::kFloat32});
  EXPECT_EQ(parse({"--shapes", "s", "--dtype", "double"}).dtypes,
            std::vector<DType>{DType::kFloat64});
  // The old flag stays an alias.
  EXPECT_EQ(parse({"--shapes", "s", "--dtypes", "bf16"}).dtypes,
            std::vector<DType>{DType::kBFloat16});
  EXPECT_EQ(short_dtype_name(DType::kBFloat16), "bf16");
  EXPECT_EQ(short_dtype_name(DType::kHalf), "f16");
}

TEST(BenchOptions, MistakesAreUsageErrors) {
  EXPECT_NE(error_of({}).find("--shapes FILE is required"), std::string::npos);
  EXPECT_NE(error_of({"--shapes", "s", "--min-time-ms", "abc"}).find("not a finite number"),
            std::string::npos);
  EXPECT_NE(error_of({"--shapes", "s", "--min-time-ms", "0"}).find("not a positive time"),
            std::string::npos);
  EXPECT_NE(error_of({"--shapes", "s", "--min-time-ms", "-3"}), "");
  EXPECT_NE(error_of({"--shapes", "s", "--threads", "abc"}), "");
  EXPECT_NE(error_of({"--shapes", "s", "--threads", "0"}).find("not a thread count"),
            std::string::npos);
  EXPECT_NE(error_of({"--shapes", "s", "--threads", "1,,2"}), "");
  EXPECT_NE(error_of({"--shapes", "s", "--threads", "2x"}), "");
  EXPECT_NE(error_of({"--shapes", "s", "--dtype", "f8"}).find("not a dtype"), std::string::npos);
  EXPECT_NE(error_of({"--shapes", "s", "--dtype", "f32,"}).find("empty item"), std::string::npos);
  EXPECT_NE(error_of({"--shapes", "s", "--dtype", "f32", "--dtypes", "bf16"}), "");
  EXPECT_NE(error_of({"--shapes", "s", "--format", "xml"}).find("not table, csv or json"),
            std::string::npos);
  EXPECT_NE(error_of({"--shapes", "s", "--frobnicate"}), "");
  EXPECT_NE(error_of({"--shapes", "s", "stray"}), "");
  EXPECT_NE(error_of({"--shapes", "s", "--only"}), "");                      // missing value
  EXPECT_NE(error_of({"--shapes", "s", "--only", "a", "--only", "b"}), "");  // repeated
  EXPECT_NE(error_of({"--shapes", "s", "--no-peers", "--peer-lib", "x.so"}), "");
}

BenchShape named(const std::string& name) {
  BenchShape s;
  s.name = name;
  return s;
}

TEST(BenchOptions, OnlyNamesMustExist) {
  const std::vector<BenchShape> shapes{named("a"), named("b"), named("c")};
  EXPECT_EQ(select_shapes(shapes, {}).size(), 3u);
  const std::vector<BenchShape> picked = select_shapes(shapes, {"c", "a"});
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked[0].name, "a");  // the file's order
  EXPECT_EQ(picked[1].name, "c");
  try {
    select_shapes(shapes, {"a", "nosuchshape"});
    ADD_FAILURE() << "an unknown shape name was accepted";
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("nosuchshape"), std::string::npos) << message;
    EXPECT_NE(message.find("a, b, c"), std::string::npos) << message;
  }
}

class ShapesFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "convjit-shapes-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& text) {
    const std::string path = (dir_ / "shapes.txt").string();
    std::ofstream(path) << text;
    return path;
  }
  std::string error_of(const std::string& text) {
    try {
      load_shapes(write(text));
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(ShapesFile, ParsesRowsAndComments) {
  const std::vector<BenchShape> shapes =
      load_shapes(write("# a comment\n\n"
                        "tiny conv 1 5 6 3 4 3 3 2 SAME 1\n"
                        "  dw_tiny dw 2 4 4 3 2 3 3 1 VALID 1   \n"));
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0].name, "tiny");
  EXPECT_FALSE(shapes[0].depthwise);
  EXPECT_EQ(shapes[0].out_h(), 3);
  EXPECT_EQ(shapes[0].out_w(), 3);
  EXPECT_TRUE(shapes[1].depthwise);
  EXPECT_EQ(shapes[1].oc(), 6);
  EXPECT_FALSE(shapes[1].same_padding);
}

TEST_F(ShapesFile, RefusesMalformedRows) {
  EXPECT_NE(error_of("a conv 1 5 5 3 4 3 3 1 SAME\n").find("expected 12 fields"),
            std::string::npos);
  EXPECT_NE(error_of("a conv 1 5 5 3 4 3 3 1 SAME 1 extra\n").find("expected 12 fields"),
            std::string::npos);
  EXPECT_NE(error_of("a conv 1 5x 5 3 4 3 3 1 SAME 1\n").find("H '5x' is not a positive integer"),
            std::string::npos);
  EXPECT_NE(error_of("a conv 1 5 5 3 4 3 3 0 SAME 1\n").find("stride"), std::string::npos);
  EXPECT_NE(error_of("a conv 1 5 5 3 4 3 3 1e2 SAME 1\n"), "");
  EXPECT_NE(error_of("a conv -1 5 5 3 4 3 3 1 SAME 1\n"), "");
  EXPECT_NE(error_of("a conv 1 5 5 3 4 3 3 1 FULL 1\n").find("pad 'FULL'"), std::string::npos);
  EXPECT_NE(error_of("a pool 1 5 5 3 4 3 3 1 SAME 1\n").find("kind 'pool'"), std::string::npos);
  EXPECT_NE(error_of("a conv 1 5 5 3 4 3 3 1 SAME 1\na conv 1 5 5 3 4 3 3 1 SAME 1\n")
                .find("appears twice"),
            std::string::npos);
  EXPECT_NE(error_of("a conv 1 2 2 3 4 3 3 1 VALID 1\n").find("does not fit"), std::string::npos);
  const std::string missing = error_of("");  // an empty file parses (and the bench refuses it)
  EXPECT_EQ(missing, "");
  EXPECT_THROW(load_shapes((dir_ / "nope.txt").string()), std::runtime_error);
  // The message names the file and line.
  EXPECT_NE(error_of("# c\nb conv 1 5 5 3 4 3 3 x SAME 1\n").find("shapes.txt:2"),
            std::string::npos);
}

}  // namespace
}  // namespace convjit::bench
