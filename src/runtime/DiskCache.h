// A content-addressed on-disk cache of compiled artifacts, shared by the backends.
//
// Used by the cpu backend (shared objects) and the cuda backend (cubins): an entry is <key><ext> plus
// <key>.meta holding "<magic> 2 <size> <hash> <key>", the hash taken over the key and the
// artifact, so an entry proves which key it is for; both are written under temporary names,
// fsynced and renamed, the artifact first, so a reader that finds a .meta can trust its artifact
// was complete when the .meta was written. Only regular files are read (no symlink is followed,
// a FIFO or device is never opened blocking, nothing beyond the size the .meta names). An
// entry that does not verify (truncated, overwritten, another key's, not a regular file) is
// removed and reported as a miss so that it is rebuilt.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// 128-bit content hash as 32 hex digits (not cryptographic; for cache keys and checksums).
std::string content_hash(std::string_view data);

// Write `data` to `path` (created or truncated), fsync'ed when `sync`; a partial file is removed
// and a TesseraError names the path and the reason.
void write_whole_file(const std::string& path, std::string_view data, bool sync);

// $TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else ~/.cache/tessera, else
// /tmp/tessera-cache; `override_dir` wins when non-empty.
std::string default_cache_dir(const std::string& override_dir = {});

class DiskCache {
 public:
  // `magic` names the artifact kind in the sidecar ("tessera-cuda-cache"), `ext` its file
  // extension (".cubin"). Creates `dir`; throws TesseraError naming it when it is not writable.
  DiskCache(std::string dir, std::string magic, std::string ext);

  // The verified bytes of an entry, or nullopt (a broken entry is removed).
  std::optional<std::string> lookup(const std::string& key) const;
  // Remove an entry (one that verified but could not be used, e.g. a shared object that no
  // longer loads), so that it is rebuilt.
  void remove(const std::string& key) const;
  // Store atomically; a concurrent writer of the same key wins or loses as a whole.
  void store(const std::string& key, std::string_view bytes) const;

  const std::string& dir() const { return dir_; }
  std::string artifact_path(const std::string& key) const { return dir_ + "/" + key + ext_; }
  std::string meta_path(const std::string& key) const { return dir_ + "/" + key + ".meta"; }

 private:
  std::string dir_, magic_, ext_;
};

}  // namespace tessera
