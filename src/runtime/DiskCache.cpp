// The on-disk compile cache for in-memory artifacts (see DiskCache.h for the policy).
#include "runtime/DiskCache.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/Diagnostic.h"

namespace tessera {

namespace fs = std::filesystem;

std::string content_hash(std::string_view data) {
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

void write_whole_file(const std::string& path, std::string_view data, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw TesseraError("cannot write '" + path + "': " + std::strerror(errno));
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = ::write(fd, data.data() + off, data.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(path.c_str());
      throw TesseraError("cannot write '" + path + "': " + std::strerror(e));
    }
    off += static_cast<size_t>(w);
  }
  if (sync) ::fsync(fd);
  ::close(fd);
}

std::string default_cache_dir(const std::string& override_dir) {
  if (!override_dir.empty()) return override_dir;
  if (const char* d = std::getenv("TESSERA_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/tessera";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/tessera";
  return "/tmp/tessera-cache";
}

namespace {

bool read_all(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

// Write, fsync and rename into place; the temporary is removed on failure.
void write_atomic(const std::string& final_path, const std::string& tmp_path, std::string_view data) {
  write_whole_file(tmp_path, data, /*sync=*/true);
  if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp_path.c_str());
    throw TesseraError("cannot write the cache file '" + final_path + "': " + std::strerror(e));
  }
}

std::string unique_suffix() {
  static std::atomic<uint64_t> n{0};
  return std::to_string(::getpid()) + "-" + std::to_string(n++);
}

}  // namespace

DiskCache::DiskCache(std::string dir, std::string magic, std::string ext)
    : dir_(std::move(dir)), magic_(std::move(magic)), ext_(std::move(ext)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_) || ::access(dir_.c_str(), W_OK | X_OK) != 0)
    throw TesseraError("the compile cache directory '" + dir_ + "' is not writable" +
                       (ec ? " (" + ec.message() + ")" : std::string()) +
                       "; set TESSERA_CACHE_DIR to a writable directory or turn the disk cache off");
}

std::optional<std::string> DiskCache::lookup(const std::string& key) const {
  std::string meta, bytes;
  if (!read_all(meta_path(key), meta)) return std::nullopt;
  bool have = read_all(artifact_path(key), bytes);
  std::istringstream in(meta);
  std::string magic, hash;
  int version = 0;
  uint64_t size = 0;
  in >> magic >> version >> size >> hash;
  if (have && magic == magic_ && version == 1 && bytes.size() == size && content_hash(bytes) == hash) return bytes;
  ::unlink(meta_path(key).c_str());
  ::unlink(artifact_path(key).c_str());
  return std::nullopt;
}

void DiskCache::store(const std::string& key, std::string_view bytes) const {
  std::string tmp = dir_ + "/.tmp-" + key + "-" + unique_suffix();
  write_atomic(artifact_path(key), tmp + ext_, bytes);
  std::ostringstream m;
  m << magic_ << " 1 " << bytes.size() << " " << content_hash(bytes) << "\n";
  try {
    write_atomic(meta_path(key), tmp + ".meta", m.str());
  } catch (...) {
    ::unlink(artifact_path(key).c_str());
    throw;
  }
  int fd = ::open(dir_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace tessera
