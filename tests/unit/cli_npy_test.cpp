// .npy reading and writing for the command line: round trips of every dtype and version, and
// every way a file can be malformed.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "convjit/numeric.hpp"
#include "tools/npy.hpp"
#include "tools/tensor_data.hpp"

namespace convjit::cli {
namespace {

NpyArray make_f32(std::vector<std::int64_t> shape, const std::vector<float>& values) {
  NpyArray a;
  a.dtype = NpyDType::kFloat32;
  a.shape = std::move(shape);
  a.data.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

/// A hand-built file: magic, version, header length of the version's width, header, data.
std::string build_file(int major, const std::string& header, const std::string& data) {
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  const auto len = static_cast<std::uint32_t>(header.size());
  const int width = major == 1 ? 2 : 4;
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string expect_error(const std::string& bytes) {
  try {
    parse_npy(bytes, "t.npy");
  } catch (const NpyError& e) {
    return e.what();
  }
  ADD_FAILURE() << "parse_npy accepted a malformed file";
  return "";
}

TEST(CliNpy, RoundTripEveryDtype) {
  for (NpyDType dtype : {NpyDType::kFloat16, NpyDType::kFloat32, NpyDType::kFloat64}) {
    NpyArray a;
    a.dtype = dtype;
    a.shape = {2, 3, 1, 4};
    a.data.resize(24 * static_cast<std::size_t>(npy_dtype_size(dtype)));
    for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<std::byte>(i * 7 + 1);
    const std::string bytes = serialize_npy(a);
    const NpyArray b = parse_npy(bytes, "mem");
    EXPECT_EQ(b.dtype, dtype);
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(b.data, a.data);
  }
}

TEST(CliNpy, HeaderIsAlignedAndNumpyShaped) {
  const std::string bytes = serialize_npy(make_f32({3}, {1, 2, 3}));
  ASSERT_EQ(bytes[6], 1);  // version 1.0 for small headers
  const std::size_t header_len = static_cast<unsigned char>(bytes[8]) |
                                 (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = bytes.substr(10, header_len);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(header.find("'shape': (3,)"), std::string::npos);
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos);
  EXPECT_EQ(bytes.size(), 10 + header_len + 12);
}

TEST(CliNpy, ScalarAndEmptyArrays) {
  const NpyArray scalar = parse_npy(serialize_npy(make_f32({}, {2.5f})), "mem");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.elements(), 1);
  const NpyArray empty = parse_npy(serialize_npy(make_f32({2, 0, 3}, {})), "mem");
  EXPECT_EQ(empty.shape, (std::vector<std::int64_t>{2, 0, 3}));
  EXPECT_TRUE(empty.data.empty());
}

TEST(CliNpy, ReadsVersions2And3AndLooseHeaders) {
  const std::string data(8, '\0');
  for (int major : {2, 3}) {
    const NpyArray a = parse_npy(
        build_file(major, "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}\n", data), "v");
    EXPECT_EQ(a.shape, (std::vector<std::int64_t>{2}));
    EXPECT_EQ(a.dtype, NpyDType::kFloat32);
  }
  // Double quotes, no trailing comma or newline, Python 2 long dimensions.
  const NpyArray b = parse_npy(
      build_file(1, "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (1L, 1L)}",
                 std::string(8, '\0')),
      "v");
  EXPECT_EQ(b.shape, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(b.dtype, NpyDType::kFloat64);
}

TEST(CliNpy, WritesVersion2ForHugeHeaders) {
  NpyArray a;
  a.dtype = NpyDType::kFloat64;
  a.shape.assign(25000, 1);  // a header longer than 65535 bytes needs version 2.0
  a.data.resize(8);
  const std::string bytes = serialize_npy(a);
  EXPECT_EQ(bytes[6], 2);
  const NpyArray b = parse_npy(bytes, "mem");
  EXPECT_EQ(b.shape.size(), 25000u);
}

TEST(CliNpy, RejectsMalformedFiles) {
  const std::string f4 = std::string(8, '\0');
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  EXPECT_NO_THROW(parse_npy(build_file(1, good, f4), "t.npy"));

  EXPECT_NE(expect_error("PK\x03\x04 not numpy").find("not a .npy file"), std::string::npos);
  EXPECT_NE(expect_error(build_file(4, good, f4)).find("version 4.0"), std::string::npos);
  EXPECT_NE(expect_error(std::string("\x93NUMPY\x01\x00\x05", 9)).find("truncated"),
            std::string::npos);
  // Header length claims more bytes than the file has.
  EXPECT_NE(expect_error(build_file(1, good, "").substr(0, 30)).find("truncated"),
            std::string::npos);
  // Data shorter and longer than the shape says.
  EXPECT_NE(expect_error(build_file(1, good, std::string(7, '\0'))).find("truncated"),
            std::string::npos);
  EXPECT_NE(expect_error(build_file(1, good, std::string(12, '\0'))).find("does not match"),
            std::string::npos);
  EXPECT_NE(expect_error(build_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}",
                                    f4))
                .find("Fortran"),
            std::string::npos);
  EXPECT_NE(expect_error(build_file(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}",
                                    f4))
                .find("unsupported dtype '<i4'"),
            std::string::npos);
  EXPECT_NE(expect_error(build_file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}",
                                    f4))
                .find("big-endian"),
            std::string::npos);
  EXPECT_NE(expect_error(build_file(1, "{'descr': '<f4', 'shape': (2,)}", f4)).find("keys"),
            std::string::npos);
  EXPECT_NE(expect_error(build_file(1,
                                    "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), "
                                    "'extra': 1}",
                                    f4))
                .find("'extra'"),
            std::string::npos);
  EXPECT_NE(expect_error(build_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
                                    f4))
                .find("non-negative"),
            std::string::npos);
  EXPECT_NE(expect_error(build_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)",
                                    f4))
                .find("malformed"),
            std::string::npos);
  // Dimensions whose product overflows must be refused, not wrapped into a small allocation.
  EXPECT_NE(expect_error(build_file(1,
                                    "{'descr': '<f4', 'fortran_order': False, 'shape': "
                                    "(4294967296, 4294967296, 4)}",
                                    f4))
                .find("64 bits"),
            std::string::npos);
  EXPECT_NE(expect_error(build_file(1,
                                    "{'descr': '<f4', 'fortran_order': False, 'shape': "
                                    "(99999999999999999999,)}",
                                    f4))
                .find("int64"),
            std::string::npos);
}

TEST(CliNpy, FileRoundTripAndMissingFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("convjit_cli_npy_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".npy");
  const NpyArray a = make_f32({2, 2}, {1, -2, 3.5f, 0});
  write_npy(path.string(), a);
  const NpyArray b = read_npy(path.string());
  EXPECT_EQ(b.shape, a.shape);
  EXPECT_EQ(b.data, a.data);
  std::filesystem::remove(path);
  EXPECT_THROW(read_npy(path.string()), NpyError);
}

TEST(CliTensorData, SixteenBitConversionsRoundToNearestEven) {
  EXPECT_EQ(convjit::float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(convjit::float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(convjit::float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(convjit::float_to_half(65520.0f), 0x7c00);             // rounds up to infinity
  EXPECT_EQ(convjit::float_to_half(1.0f + 0x1p-11f), 0x3c00);      // tie to even (down)
  EXPECT_EQ(convjit::float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie to even (up)
  EXPECT_EQ(convjit::float_to_half(0x1p-24f), 0x0001);             // smallest subnormal
  EXPECT_EQ(convjit::float_to_half(0x1p-26f), 0x0000);
  EXPECT_EQ(convjit::half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(convjit::half_to_float(0x7bff), 65504.0f);
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {  // every finite half survives a round trip
    ASSERT_EQ(convjit::float_to_half(convjit::half_to_float(static_cast<std::uint16_t>(h))), h);
  }
  EXPECT_EQ(convjit::float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(convjit::float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80);      // tie to even (down)
  EXPECT_EQ(convjit::float_to_bfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie to even (up)
  EXPECT_EQ(convjit::bfloat16_to_float(0x3f80), 1.0f);
}

TEST(CliTensorData, NpyToTensorConvertsAndWidensBFloat16) {
  const NpyArray a = make_f32({1, 3}, {1.0f, 1.0f + 0x1p-8f + 0x1p-12f, -3.0f});
  const Tensor bf = tensor_from_npy(a, DType::kBFloat16);
  EXPECT_EQ(bf.shape(), a.shape);
  EXPECT_EQ(bf.data_as<std::uint16_t>()[1], 0x3f81);  // rounded on load, above the tie
  const NpyArray back = npy_from_tensor(bf);
  EXPECT_EQ(back.dtype, NpyDType::kFloat32);  // NumPy has no bfloat16
  EXPECT_EQ(reinterpret_cast<const float*>(back.data.data())[2], -3.0f);

  const Tensor half = tensor_from_npy(a, DType::kHalf);
  EXPECT_EQ(npy_from_tensor(half).dtype, NpyDType::kFloat16);
  const Tensor f64 = tensor_from_npy(a, DType::kFloat64);
  EXPECT_EQ(f64.data_as<double>()[2], -3.0);
}

TEST(CliTensorData, RandomFillIsReproducibleAndBounded) {
  Tensor a(DType::kFloat32, {4, 5});
  Tensor b(DType::kFloat32, {4, 5});
  fill_random(a, 7);
  fill_random(b, 7);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0);
  for (std::int64_t i = 0; i < a.elements(); ++i) {
    EXPECT_GE(a.data_as<float>()[i], -1.0f);
    EXPECT_LE(a.data_as<float>()[i], 1.0f);
  }
  fill_random(b, 8);
  EXPECT_NE(std::memcmp(a.data(), b.data(), a.bytes()), 0);
}

}  // namespace
}  // namespace convjit::cli
