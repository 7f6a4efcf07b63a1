// Safetensors: round trips in every dtype, the on-disk layout, and a clear error for every kind of
// broken file.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "nn/safetensors.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// Writes a file by hand: header length, header text, data bytes.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

std::string error_loading(const std::string& path) {
  return error_of([&] { load_safetensors(path); });
}

TEST(SafeTensors, RoundTripsEveryDTypeShapeAndMetadata) {
  Generator gen(1);
  const Tensor matrix = randn({3, 5}, gen);
  const NamedTensors tensors = {
      {"f32", matrix},
      {"f32.transposed", transpose(matrix, 0, 1)},  // a non-contiguous view is saved row-major
      {"bf16", cast(randn({7}, gen), DType::bf16)},
      {"i32", from_vector<int32_t>({1, -2, 3, 2147483647}, {2, 2})},
      {"f64", randn({4}, gen, 0, 1, DType::f64)},
      {"scalar", full({}, 2.5)},
      {"empty", zeros({0, 3})},
  };
  const std::string path = scratch_path("roundtrip.safetensors");
  save_safetensors(path, tensors, {{"step", "12"}, {"note", "hello"}});
  const SafeTensorsFile file = load_safetensors(path);
  ASSERT_EQ(file.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, expected] = tensors[i];
    const auto& [got_name, got] = file.tensors[i];
    EXPECT_EQ(got_name, name);  // file order is the order given
    EXPECT_EQ(got.dtype(), expected.dtype()) << name;
    EXPECT_EQ(got.shape(), expected.shape()) << name;
    // (An empty tensor has no values to read back; to_vector on one trips UBSan in
    // Tensor::copy_to_host, which memcpy's 0 bytes to a null pointer.)
    if (expected.numel() == 0) continue;
    if (expected.dtype() == DType::i32)
      EXPECT_EQ(to_vector<int32_t>(got), to_vector<int32_t>(expected));
    else
      EXPECT_EQ(values(got), values(expected)) << name;  // bit-exact
  }
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"step", "12"}, {"note", "hello"}}));
  EXPECT_TRUE(file.contains("bf16"));
  EXPECT_TRUE(contains_all(error_of([&] { file.at("nope"); }), {path, "'nope'"}));
}

TEST(SafeTensors, HeaderIsPaddedSoDataIsEightByteAligned) {
  const std::string path = scratch_path("aligned.safetensors");
  save_safetensors(path, {{"a", zeros({3})}});
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})");
  EXPECT_EQ(std::filesystem::file_size(path), 8 + n + 12);
}

TEST(SafeTensors, SaveRejectsBadNames) {
  const std::string path = scratch_path("bad_names.safetensors");
  EXPECT_TRUE(contains_all(error_of([&] {
                             save_safetensors(path, {{"x", zeros({1})}, {"x", zeros({1})}});
                           }),
                           {path, "'x' appears twice"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             save_safetensors(path, {{"__metadata__", zeros({1})}});
                           }),
                           {"invalid tensor name"}));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafeTensors, MissingShortAndOversizedHeaderFiles) {
  const std::string missing = scratch_path("does_not_exist.safetensors");
  EXPECT_TRUE(contains_all(error_loading(missing), {missing, "cannot open"}));

  const std::string tiny = scratch_path("tiny.safetensors");
  std::ofstream(tiny, std::ios::binary) << "abcd";
  EXPECT_TRUE(contains_all(error_loading(tiny), {tiny, "4 bytes, too short"}));

  const std::string huge = scratch_path("huge_header.safetensors");
  write_raw(huge, "{}", "");
  std::fstream f(huge, std::ios::binary | std::ios::in | std::ios::out);
  const uint64_t n = 1000;
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.close();
  EXPECT_TRUE(contains_all(error_loading(huge), {huge, "header length 1000 exceeds the 2 bytes"}));
}

TEST(SafeTensors, ForeignAndMalformedHeaders) {
  const std::string path = scratch_path("malformed.safetensors");
  struct Case {
    std::string header, data, expected;
  };
  const std::string f32x3 = std::string(12, '\0');
  const Case cases[] = {
      {"PK\x03\x04 this is a zip", "", "not valid JSON"},
      {"[1, 2]", "", "not a JSON object"},
      {R"({"t":{"dtype":"F16","shape":[3],"data_offsets":[0,6]}})", f32x3,
       "tensor 't': unsupported dtype 'F16'"},
      {R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", f32x3,
       "F32[3] needs 12 bytes but data_offsets span 8"},
      {R"({"t":{"dtype":"F32","shape":[-3],"data_offsets":[0,12]}})", f32x3,
       "non-negative integers"},
      {R"({"t":{"dtype":"F32","shape":[3]}})", f32x3, "no \"data_offsets\" pair"},
      {R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}})", f32x3,
       "bytes [12, 24) run past the 12-byte data section"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       f32x3, "tensor 'b' bytes [4, 12) overlap tensor 'a' bytes [0, 8)"},
      {R"({"__metadata__":{"step":3}})", "", "__metadata__ value of 'step' is not a string"},
  };
  for (const Case& c : cases) {
    write_raw(path, c.header, c.data);
    EXPECT_TRUE(contains_all(error_loading(path), {path, c.expected})) << c.header;
  }
}

TEST(SafeTensors, TruncatedFileIsReported) {
  const std::string path = scratch_path("truncated.safetensors");
  save_safetensors(path, {{"a", zeros({4})}, {"b", zeros({16})}});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 5);
  EXPECT_TRUE(contains_all(error_loading(path), {path, "tensor 'b'", "truncated"}));
}

}  // namespace
}  // namespace glass
