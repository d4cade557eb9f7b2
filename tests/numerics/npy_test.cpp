// NumPy .npy files (runtime/Npy.h): the bytes NumPy itself writes, round trips of every dtype,
// and hostile files, each a located error and never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "runtime/Npy.h"
#include "support/Diagnostic.h"

using namespace tessera;
using ::testing::HasSubstr;

namespace {

// The error message of parsing `bytes`, or "" when it parses.
std::string npy_error(const std::string& bytes) {
  try {
    parse_npy(bytes, "t.npy");
  } catch (const TesseraError& e) {
    return e.what();
  }
  return "";
}

// A file with header `dict` (padded as NumPy pads it) and `data` after it.
std::string with_header(const std::string& dict, const std::string& data, int major = 1) {
  std::string h = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

std::string f32_header(const std::string& shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
}

}  // namespace

// What `np.save(f, np.arange(3, dtype=np.float32))` writes, byte for byte.
TEST(Npy, WritesWhatNumPyWrites) {
  Tensor t(ScalarKind::F32, {3});
  for (int i = 0; i < 3; ++i) t.set(i, i);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  header += std::string(128 - 10 - header.size() - 1, ' ') + "\n";
  std::string want = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header +
                     std::string(reinterpret_cast<const char*>(t.data.data()), 12);
  EXPECT_EQ(npy_bytes(t), want);
  Tensor m(ScalarKind::I1, {2, 3});
  EXPECT_THAT(npy_bytes(m), HasSubstr("{'descr': '|b1', 'fortran_order': False, 'shape': (2, 3), }"));
}

TEST(Npy, EveryDtypeRoundTripsBitExact) {
  std::mt19937_64 rng(7);
  for (ScalarKind dt : all_scalar_kinds()) {
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{5}, {3, 7}, {2, 1, 4}, {0, 3}}) {
      Tensor t(dt, shape);
      for (auto& b : t.data) b = static_cast<uint8_t>(rng());
      if (dt == ScalarKind::I1)
        for (auto& b : t.data) b &= 1;
      NpyArray a = parse_npy(npy_bytes(t), "t.npy");
      EXPECT_EQ(a.descr, npy_descr(dt));
      ASSERT_TRUE(npy_descr_fits(a.descr, dt)) << scalar_name(dt);
      Tensor back = npy_to_tensor(std::move(a), dt, "t.npy");
      EXPECT_EQ(back.shape, shape);
      EXPECT_EQ(back.data, t.data) << scalar_name(dt);
    }
  }
}

TEST(Npy, ReadsVersions2And3AndTheVoidTypesOfBf16AndF8) {
  std::string data(8, '\x01');
  NpyArray a = parse_npy(with_header(f32_header("(2,)"), data, 2), "t.npy");
  EXPECT_EQ(a.shape, std::vector<int64_t>{2});
  EXPECT_EQ(parse_npy(with_header(f32_header("(1, 2)"), data, 3), "t.npy").shape, (std::vector<int64_t>{1, 2}));
  // Double quotes, no trailing comma, any key order, as a hand-written header may have.
  EXPECT_EQ(parse_npy(with_header("{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<f4\"}", data), "t.npy").descr,
            "<f4");
  EXPECT_TRUE(npy_descr_fits("|V2", ScalarKind::BF16));
  EXPECT_TRUE(npy_descr_fits("|V1", ScalarKind::F8E4M3));
  EXPECT_TRUE(npy_descr_fits("<u1", ScalarKind::U8));
  EXPECT_FALSE(npy_descr_fits("<f4", ScalarKind::BF16));
  EXPECT_FALSE(npy_descr_fits("<u2", ScalarKind::I16));
  EXPECT_FALSE(npy_descr_fits("<f2", ScalarKind::BF16));
}

TEST(Npy, HostileFilesAreLocatedErrors) {
  const std::string ok_data(12, '\0');
  struct Case {
    std::string bytes, error;
  };
  const std::vector<Case> cases = {
      {"", "t.npy:1:1: error: not a .npy file"},
      {"PK\x03\x04 a zip", "t.npy:1:1: error: not a .npy file"},
      {std::string("\x93NUMPY\x04\x00\x10\x00", 10), "t.npy:1:7: error: unsupported .npy version 4.0"},
      {std::string("\x93NUMPY\x01\x00", 8), "t.npy:1:9: error: truncated .npy file: the header length is cut off"},
      {std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 17), "t.npy:1:11: error: truncated .npy file: the header is 255 bytes"},
      {std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12), "t.npy:1:9: error: header length 4294967295 is larger than the limit"},
      {with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", ok_data),
       "error: fortran_order=True is not supported"},
      {with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", ok_data), "error: dtype '>f4' is big-endian"},
      {with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", ok_data),
       "t.npy:1:21: error: dtype '<c8' is not one Tessera holds"},
      {with_header("{'descr': '<O', 'fortran_order': False, 'shape': (3,), }", ok_data), "dtype '<O' is not one"},
      {with_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", ok_data),
       "structured dtypes are not supported"},
      {with_header("{'descr': '<f4', 'shape': (3,), }", ok_data), "the header lacks the key 'fortran_order'"},
      {with_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", ok_data),
       "key 'descr' appears twice"},
      {with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", ok_data), "unknown key 'x'"},
      {with_header(f32_header("(3)"), ok_data), "a one-dim shape is written (N,)"},
      {with_header(f32_header("(-3,)"), ok_data), "t.npy:1:62: error: expected a non-negative integer in the shape"},
      {with_header(f32_header("(99999999999999999999,)"), ok_data), "shape dim is too large"},
      {with_header(f32_header("(4294967296, 4294967296)"), ok_data), "the shape's size is larger than the limit"},
      {with_header(f32_header("(4,)"), ok_data), "truncated .npy file: the shape needs 16 data bytes, the file has 12"},
      {with_header(f32_header("(2,)"), ok_data), "4 bytes after the data the shape describes"},
      {with_header("{'descr': '<f4\xc3\xa9', 'fortran_order': False, 'shape': (3,), }", ok_data), "not printable ASCII"},
      {with_header("{'descr': '<f4", ok_data), "the header ends inside its dict"},
      {with_header("{'descr': '<\\f4', 'fortran_order': False, 'shape': (3,), }", ok_data), "escapes are not supported"},
      {with_header(f32_header("(3,)") + " junk", ok_data), "unexpected text after the header dict"},
      {with_header("{'descr': '<f4' 'fortran_order': False}", ok_data), "expected ',' or '}'"},
  };
  for (const Case& c : cases) EXPECT_THAT(npy_error(c.bytes), HasSubstr(c.error)) << c.bytes;
  // A bool array holds 0 or 1 only: the byte is located.
  NpyArray b = parse_npy(with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\1\2\0", 3)), "t.npy");
  try {
    npy_to_tensor(b, ScalarKind::I1, "t.npy");
    ADD_FAILURE() << "a bool of 2 was accepted";
  } catch (const TesseraError& e) {
    EXPECT_THAT(e.what(), HasSubstr("t.npy:1:130: error: element 1 of a bool array is 2, not 0 or 1"));
  }
}

// Every truncation and random byte edits of a valid file: a TesseraError or a parse, never a
// crash, a hang or a read past the end (under the sanitizers of the fuzz build too).
TEST(Npy, MutatedFilesNeverCrash) {
  Tensor t(ScalarKind::F16, {3, 5});
  const std::string good = npy_bytes(t);
  for (size_t n = 0; n < good.size(); ++n) EXPECT_NE(npy_error(good.substr(0, n)), "") << n;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 3000; ++i) {
    std::string b = good;
    for (int e = 0; e < 1 + static_cast<int>(rng() % 4); ++e) b[rng() % 128] = static_cast<char>(rng());
    try {
      NpyArray a = parse_npy(b, "t.npy");
      EXPECT_EQ(a.data.size(), b.size() - a.data_offset);
    } catch (const TesseraError&) {
    }
  }
}
