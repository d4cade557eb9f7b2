#include "runtime/Npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "support/Diagnostic.h"

namespace tessera {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// The dict of a file NumPy writes is under 200 bytes; this only bounds what a hostile length
// field can make us read before the data.
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 20;

// Where the data starts and what the header says about it.
struct NpyHeader {
  std::string descr;
  uint64_t descr_at = 0;  // the offset of the descr's value in the file
  std::vector<int64_t> shape;
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
};

[[noreturn]] void fail(const std::string& name, uint64_t offset, const std::string& msg) {
  // Column = byte offset + 1: the header is one line of text after the binary prefix.
  throw TesseraError(Loc::in_file(name, 1, static_cast<int>(std::min<uint64_t>(offset + 1, INT32_MAX))), msg);
}

// The prefix: magic, version, header length. Returns the total prefix size and sets `hlen`.
uint64_t parse_prefix(std::string_view b, const std::string& name, uint64_t& hlen, int& major) {
  if (b.size() < 8 || b.substr(0, 6) != kMagic)
    fail(name, 0, "not a .npy file (it does not start with the magic \"\\x93NUMPY\")");
  major = static_cast<uint8_t>(b[6]);
  int minor = static_cast<uint8_t>(b[7]);
  if (major < 1 || major > 3 || minor != 0)
    fail(name, 6, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                      " (supported: 1.0, 2.0, 3.0)");
  const uint64_t len_bytes = major == 1 ? 2 : 4;
  if (b.size() < 8 + len_bytes) fail(name, 8, "truncated .npy file: the header length is cut off");
  hlen = 0;
  for (uint64_t i = 0; i < len_bytes; ++i) hlen |= uint64_t{static_cast<uint8_t>(b[8 + i])} << (8 * i);
  if (hlen > kMaxHeaderBytes)
    fail(name, 8, "header length " + std::to_string(hlen) + " is larger than the limit of " +
                      std::to_string(kMaxHeaderBytes) + " bytes");
  return 8 + len_bytes;
}

// A strict reader of the header dict: exactly the Python literals NumPy writes (strings,
// True/False, tuples of non-negative integers), nothing evaluated.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, uint64_t base, const std::string& name)
      : t_(text), base_(base), name_(name) {}

  NpyHeader parse() {
    for (size_t i = 0; i < t_.size(); ++i)
      if (static_cast<uint8_t>(t_[i]) >= 0x80 || t_[i] == '\0')
        err(i, "the header holds a byte that is not printable ASCII");
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    ws();
    expect('{');
    ws();
    while (peek() != '}') {
      size_t key_at = pos_;
      std::string key = string_lit();
      ws();
      expect(':');
      ws();
      auto dup = [&](bool& seen) {
        if (seen) err(key_at, "key '" + key + "' appears twice in the header");
        seen = true;
      };
      if (key == "descr") {
        dup(have_descr);
        if (peek() == '[') err(pos_, "structured dtypes are not supported (descr is a list)");
        h.descr_at = base_ + pos_;
        h.descr = string_lit();
      } else if (key == "fortran_order") {
        dup(have_order);
        size_t at = pos_;
        if (word("True")) err(at, "fortran_order=True is not supported: save a C-order array (np.ascontiguousarray)");
        if (!word("False")) err(at, "fortran_order must be True or False");
      } else if (key == "shape") {
        dup(have_shape);
        h.shape = shape_tuple();
      } else {
        err(key_at, "unknown key '" + key + "' in the header (expected descr, fortran_order, shape)");
      }
      ws();
      if (peek() == ',') {
        ++pos_;
        ws();
      } else if (peek() != '}') {
        err(pos_, "expected ',' or '}' in the header dict");
      }
    }
    ++pos_;
    ws();
    if (pos_ != t_.size()) err(pos_, "unexpected text after the header dict");
    if (!have_descr || !have_order || !have_shape)
      err(0, std::string("the header lacks the key '") + (!have_descr ? "descr" : !have_order ? "fortran_order" : "shape") + "'");
    return h;
  }

 private:
  [[noreturn]] void err(size_t at, const std::string& msg) { fail(name_, base_ + at, msg); }
  char peek() {
    if (pos_ >= t_.size()) err(pos_, "the header ends inside its dict");
    return t_[pos_];
  }
  void ws() {
    while (pos_ < t_.size() && (t_[pos_] == ' ' || t_[pos_] == '\n' || t_[pos_] == '\t' || t_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) err(pos_, std::string("expected '") + c + "' in the header");
    ++pos_;
  }
  bool word(std::string_view w) {
    if (t_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  std::string string_lit() {
    char q = peek();
    if (q != '\'' && q != '"') err(pos_, "expected a quoted string in the header");
    size_t start = ++pos_;
    while (peek() != q)
      if (t_[pos_++] == '\\') err(pos_ - 1, "escapes are not supported in header strings");
    return std::string(t_.substr(start, pos_++ - start));
  }
  std::vector<int64_t> shape_tuple() {
    std::vector<int64_t> shape;
    expect('(');
    ws();
    bool trailing_comma = false;
    while (peek() != ')') {
      size_t at = pos_;
      if (peek() < '0' || peek() > '9') err(at, "expected a non-negative integer in the shape");
      int64_t v = 0;
      while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) err(at, "shape dim is too large");
        v = v * 10 + (t_[pos_++] - '0');
      }
      shape.push_back(v);
      ws();
      trailing_comma = false;
      if (peek() == ',') {
        ++pos_;
        ws();
        trailing_comma = true;
      } else if (peek() != ')') {
        err(pos_, "expected ',' or ')' in the shape");
      }
    }
    // (3) is the integer 3 in Python, not a shape.
    if (shape.size() == 1 && !trailing_comma) err(pos_, "a one-dim shape is written (N,), with a comma");
    ++pos_;
    return shape;
  }

  std::string_view t_;
  uint64_t base_;
  const std::string& name_;
  size_t pos_ = 0;
};

// The element size of a descr Tessera can hold, or 0.
uint64_t item_bytes(const std::string& d) {
  if (d.size() != 3) return 0;
  std::string_view body = std::string_view(d).substr(1);
  for (const char* one : {"b1", "i1", "u1", "V1"})
    if (body == one) return 1;
  for (const char* two : {"i2", "u2", "f2", "V2"})
    if (body == two) return 2;
  for (const char* four : {"i4", "u4", "f4"})
    if (body == four) return 4;
  for (const char* eight : {"i8", "u8", "f8"})
    if (body == eight) return 8;
  return 0;
}

NpyHeader parse_header(std::string_view b, const std::string& name, uint64_t file_size) {
  uint64_t hlen = 0;
  int major = 0;
  uint64_t prefix = parse_prefix(b, name, hlen, major);
  if (b.size() < prefix + hlen)
    fail(name, prefix, "truncated .npy file: the header is " + std::to_string(hlen) + " bytes, the file has " +
                           std::to_string(b.size() - prefix) + " after the prefix");
  NpyHeader h = HeaderParser(b.substr(prefix, hlen), prefix, name).parse();
  h.data_offset = prefix + hlen;
  const uint64_t descr_at = h.descr_at;
  const char order = h.descr.empty() ? '?' : h.descr[0];
  const uint64_t item = item_bytes(h.descr);
  if (item == 0)
    fail(name, descr_at, "dtype '" + h.descr + "' is not one Tessera holds (b1, i1/2/4/8, u1/2/4/8, f2/4/8, V1/V2 for raw bf16/f8 bits)");
  if (order == '>' && item > 1)
    fail(name, descr_at, "dtype '" + h.descr + "' is big-endian: save little-endian data (a.astype('<" + h.descr.substr(1) + "'))");
  if (order != '<' && order != '|' && !(item == 1 && order == '>'))
    fail(name, descr_at, "dtype '" + h.descr + "' has no byte order Tessera reads ('<' or '|')");
  uint64_t n = item;
  for (int64_t d : h.shape) {
    if (d != 0 && n > kMaxNpyBytes / static_cast<uint64_t>(d))
      fail(name, prefix, "the shape's size is larger than the limit of " + std::to_string(kMaxNpyBytes >> 30) + " GiB");
    n *= static_cast<uint64_t>(d);
  }
  h.data_bytes = n;
  const uint64_t have = file_size - h.data_offset;
  if (have < n)
    fail(name, file_size, "truncated .npy file: the shape needs " + std::to_string(n) + " data bytes, the file has " +
                              std::to_string(have));
  if (have > n)
    fail(name, h.data_offset + n, std::to_string(have - n) + " bytes after the data the shape describes");
  return h;
}

}  // namespace

NpyArray parse_npy(std::string_view bytes, const std::string& name) {
  NpyHeader h = parse_header(bytes, name, bytes.size());
  NpyArray a{h.descr, h.shape, {}, h.data_offset};
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + h.data_offset;
  a.data.assign(p, p + h.data_bytes);
  return a;
}

NpyArray read_npy(const std::string& path) {
  // Regular files only: a FIFO or a device never ends. O_NONBLOCK so that opening a FIFO does
  // not wait for a writer before fstat says what it is.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw TesseraError("cannot open '" + path + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw TesseraError("cannot open '" + path + "': " + (S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file"));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > kMaxNpyBytes + kMaxHeaderBytes + 12)
    throw TesseraError("cannot read '" + path + "': larger than the limit of " + std::to_string(kMaxNpyBytes >> 30) + " GiB");
  auto read_at = [&](uint64_t off, uint8_t* dst, uint64_t n) {
    uint64_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd, dst + done, n - done, static_cast<off_t>(off + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw TesseraError("cannot read '" + path + "': " + std::strerror(errno));
      if (r == 0) fail(path, off + done, "truncated .npy file: it changed while being read");
      done += static_cast<uint64_t>(r);
    }
  };
  // The header first (at most the prefix plus kMaxHeaderBytes), then the data straight into
  // the array: a large file is held once.
  std::string head(std::min<uint64_t>(size, 12 + kMaxHeaderBytes), '\0');
  read_at(0, reinterpret_cast<uint8_t*>(head.data()), head.size());
  uint64_t hlen = 0;
  int major = 0;
  uint64_t prefix = parse_prefix(head, path, hlen, major);
  head.resize(std::min<uint64_t>(head.size(), prefix + hlen));
  NpyHeader h = parse_header(head, path, size);
  NpyArray a{h.descr, h.shape, {}, h.data_offset};
  a.data.resize(h.data_bytes);
  read_at(h.data_offset, a.data.data(), h.data_bytes);
  return a;
}

std::string npy_descr(ScalarKind dtype) {
  switch (dtype) {
    case ScalarKind::I1: return "|b1";
    case ScalarKind::I8: return "|i1";
    case ScalarKind::I16: return "<i2";
    case ScalarKind::I32: return "<i4";
    case ScalarKind::I64: return "<i8";
    case ScalarKind::U8: return "|u1";
    case ScalarKind::U16: return "<u2";
    case ScalarKind::U32: return "<u4";
    case ScalarKind::U64: return "<u8";
    case ScalarKind::F8E4M3:
    case ScalarKind::F8E5M2: return "|u1";  // raw bits: NumPy has no f8
    case ScalarKind::F16: return "<f2";
    case ScalarKind::BF16: return "<u2";  // raw bits: NumPy has no bf16
    case ScalarKind::F32: return "<f4";
    case ScalarKind::F64: return "<f8";
  }
  return "";
}

bool npy_descr_fits(const std::string& descr, ScalarKind dtype) {
  if (descr.size() != 3 || item_bytes(descr) == 0) return false;
  const std::string body = descr.substr(1), want = npy_descr(dtype).substr(1);
  if (body == want) return true;
  // The void types ml_dtypes' bf16 and f8 arrays are saved as.
  return (dtype == ScalarKind::BF16 && body == "V2") ||
         ((dtype == ScalarKind::F8E4M3 || dtype == ScalarKind::F8E5M2) && body == "V1");
}

Tensor npy_to_tensor(NpyArray a, ScalarKind dtype, const std::string& name) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(a.shape);
  t.data = std::move(a.data);
  if (dtype == ScalarKind::I1)
    for (size_t i = 0; i < t.data.size(); ++i)
      if (t.data[i] > 1)
        fail(name, a.data_offset + i, "element " + std::to_string(i) + " of a bool array is " +
                                          std::to_string(t.data[i]) + ", not 0 or 1");
  return t;
}

std::string npy_bytes(const Tensor& t) {
  std::string dict = "{'descr': '" + npy_descr(t.dtype) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(t.shape[i]);
  dict += t.shape.size() == 1 ? ",), }" : "), }";
  // NumPy pads the header with spaces and a newline so that the data starts 64-byte aligned.
  auto padded = [&](uint64_t prefix) {
    std::string h = dict;
    while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
    return h + "\n";
  };
  std::string h = padded(10);
  const bool v2 = h.size() > 65535;
  if (v2) h = padded(12);
  std::string out(kMagic);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  for (int i = 0; i < (v2 ? 4 : 2); ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  out += h;
  out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return out;
}

void write_npy(const std::string& path, const Tensor& t) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw TesseraError("cannot write '" + path + "': " + std::strerror(errno));
  std::string bytes = npy_bytes(t);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw TesseraError("cannot write '" + path + "': " + std::strerror(errno));
}

}  // namespace tessera
