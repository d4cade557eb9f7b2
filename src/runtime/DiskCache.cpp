// The on-disk compile cache for in-memory artifacts (see DiskCache.h for the policy).
#include "runtime/DiskCache.h"

#include <fcntl.h>
#include <sys/stat.h>
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

// The bytes of a regular file of at most `max_bytes`, opened without following a symlink and
// without blocking (a FIFO or a device planted in the cache is never read); false otherwise.
bool read_regular(const std::string& path, uint64_t max_bytes, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) <= max_bytes;
  out.clear();
  char buf[65536];
  while (ok) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
    ok = out.size() <= max_bytes;
  }
  ::close(fd);
  return ok;
}

// The sidecar's checksum binds the artifact to its key: another key's entry copied under this
// key's names does not verify.
std::string entry_hash(const std::string& key, std::string_view bytes) {
  std::string in = key + "\n";
  in += bytes;
  return content_hash(in);
}

constexpr uint64_t kMaxMetaBytes = 4096;

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
  struct stat st {};
  if (::lstat(meta_path(key).c_str(), &st) != 0) return std::nullopt;  // no entry
  std::string magic, hash, stored_key;
  int version = 0;
  uint64_t size = 0;
  if (read_regular(meta_path(key), kMaxMetaBytes, meta)) {
    std::istringstream in(meta);
    in >> magic >> version >> size >> hash >> stored_key;
  }
  if (magic == magic_ && version == 2 && stored_key == key && read_regular(artifact_path(key), size, bytes) &&
      bytes.size() == size && entry_hash(key, bytes) == hash)
    return bytes;
  remove(key);  // broken, foreign or not a regular file: rebuilt by the caller
  return std::nullopt;
}

void DiskCache::remove(const std::string& key) const {
  ::unlink(meta_path(key).c_str());
  ::unlink(artifact_path(key).c_str());
}

void DiskCache::store(const std::string& key, std::string_view bytes) const {
  std::string tmp = dir_ + "/.tmp-" + key + "-" + unique_suffix();
  write_atomic(artifact_path(key), tmp + ext_, bytes);
  std::ostringstream m;
  m << magic_ << " 2 " << bytes.size() << " " << entry_hash(key, bytes) << " " << key << "\n";
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
