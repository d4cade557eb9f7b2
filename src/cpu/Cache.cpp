// The on-disk compile cache: atomic entries with a checksum sidecar, and file helpers.
//
// An entry is <key>.so plus <key>.meta ("tessera-cpu-cache 1 <size> <hash>"). Both are written
// to temporary names in the same directory, fsynced and renamed, the .so first: a reader that
// finds a .meta can trust that its .so was complete when the .meta was written, and a .so whose
// size or hash disagrees with its .meta (truncated, overwritten) is removed and rebuilt.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cpu/CpuInternal.h"

namespace tessera::cpu {

namespace fs = std::filesystem;

std::string hash_hex(std::string_view data) {
  // Two independent 64-bit FNV-1a streams with a final avalanche.
  uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  for (unsigned char c : data) {
    a = (a ^ c) * 0x100000001b3ull;
    b = (b ^ (c + 0x9e)) * 0x100000001b3ull;
    b ^= b >> 29;
  }
  auto mix = [](uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
  };
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(mix(a)),
                static_cast<unsigned long long>(mix(b ^ a)));
  return buf;
}

namespace {

std::string read_file(const std::string& path, bool& ok) {
  std::ifstream in(path, std::ios::binary);
  ok = static_cast<bool>(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::string unique_suffix() {
  static std::atomic<uint64_t> n{0};
  return std::to_string(::getpid()) + "-" + std::to_string(n++);
}

}  // namespace

void write_file(const std::string& path, std::string_view data, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw TesseraError("cpu backend: cannot write '" + path + "': " + std::strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = ::write(fd, data.data() + off, data.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(path.c_str());
      throw TesseraError("cpu backend: cannot write '" + path + "': " + std::strerror(e));
    }
    off += static_cast<size_t>(w);
  }
  if (sync) ::fsync(fd);
  ::close(fd);
}

void ensure_writable_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir) || ::access(dir.c_str(), W_OK | X_OK) != 0)
    throw TesseraError("cpu backend: the compile cache directory '" + dir + "' is not writable" +
                       (ec ? " (" + ec.message() + ")" : std::string()) +
                       "; set TESSERA_CACHE_DIR (or CpuOptions::cache_dir) to a writable directory, "
                       "or turn the disk cache off (CpuOptions::disk_cache = false)");
}

std::string make_work_dir(const std::string& parent) {
  std::string tmpl = parent + "/.tmp-build-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    throw TesseraError("cpu backend: cannot create a build directory in '" + parent + "': " + std::strerror(errno));
  return buf.data();
}

void remove_tree(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

std::string disk_lookup(const std::string& dir, const std::string& key) {
  std::string so = dir + "/" + key + ".so", meta = dir + "/" + key + ".meta";
  bool ok_meta = false, ok_so = false;
  std::string m = read_file(meta, ok_meta);
  if (!ok_meta) return "";
  std::string bytes = read_file(so, ok_so);
  std::istringstream in(m);
  std::string magic, hash;
  int version = 0;
  uint64_t size = 0;
  in >> magic >> version >> size >> hash;
  if (ok_so && magic == "tessera-cpu-cache" && version == 1 && bytes.size() == size && hash_hex(bytes) == hash)
    return so;
  // Broken entry: drop it so that it is rebuilt.
  ::unlink(meta.c_str());
  ::unlink(so.c_str());
  return "";
}

std::string disk_store(const std::string& dir, const std::string& key, const std::string& built_so) {
  std::string so = dir + "/" + key + ".so", meta = dir + "/" + key + ".meta";
  bool ok = false;
  std::string bytes = read_file(built_so, ok);
  if (!ok || bytes.empty()) throw TesseraError("cpu backend: the compiler produced no shared object at '" + built_so + "'");
  fsync_path(built_so);
  if (::rename(built_so.c_str(), so.c_str()) != 0)
    throw TesseraError("cpu backend: cannot move '" + built_so + "' into the cache: " + std::strerror(errno));
  std::string tmp_meta = dir + "/.tmp-" + key + "-" + unique_suffix() + ".meta";
  std::ostringstream m;
  m << "tessera-cpu-cache 1 " << bytes.size() << " " << hash_hex(bytes) << "\n";
  try {
    write_file(tmp_meta, m.str(), true);
  } catch (...) {
    ::unlink(so.c_str());
    throw;
  }
  if (::rename(tmp_meta.c_str(), meta.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp_meta.c_str());
    ::unlink(so.c_str());
    throw TesseraError("cpu backend: cannot write '" + meta + "': " + std::strerror(e));
  }
  fsync_path(dir);
  return so;
}

}  // namespace tessera::cpu
