// What ptxas gave a kernel, read from its cubin (CudaBackend.h, cubin_resources): no device and
// no toolkit binary needed, so the tuner prunes on it where it compiles.
#include <cstring>
#include <string_view>

#include "cuda/CubinInfo.h"

namespace tessera {

namespace {

template <class T>
bool read_at(const std::vector<char>& b, uint64_t off, T& out) {
  if (off > b.size() || b.size() - off < sizeof(T)) return false;
  std::memcpy(&out, b.data() + off, sizeof(T));
  return true;
}

}  // namespace

CubinResources cubin_resources(const std::vector<char>& cubin, const std::string& symbol) {
  CubinResources r;
  // ELF64, little-endian: e_shoff at 0x28, e_shentsize at 0x3a, e_shnum at 0x3c, e_shstrndx at 0x3e.
  if (cubin.size() < 64 || std::memcmp(cubin.data(), "\x7f" "ELF", 4) != 0 || cubin[4] != 2 || cubin[5] != 1) return r;
  uint64_t shoff = 0;
  uint16_t shentsize = 0, shnum = 0, shstrndx = 0;
  if (!read_at(cubin, 0x28, shoff) || !read_at(cubin, 0x3a, shentsize) || !read_at(cubin, 0x3c, shnum) ||
      !read_at(cubin, 0x3e, shstrndx) || shentsize < 64 || shstrndx >= shnum)
    return r;
  // A section header: sh_name at 0, sh_type at 4, sh_offset at 0x18, sh_size at 0x20, sh_link at 0x28.
  struct Section {
    std::string name;
    uint32_t type = 0, link = 0;
    uint64_t offset = 0, size = 0;
  };
  auto field = [&](uint16_t i, uint64_t at, auto& out) { return read_at(cubin, shoff + uint64_t{i} * shentsize + at, out); };
  uint64_t strtab = 0, strsize = 0;
  if (!field(shstrndx, 0x18, strtab) || !field(shstrndx, 0x20, strsize) || strtab > cubin.size() ||
      cubin.size() - strtab < strsize)
    return r;
  std::vector<Section> sec(shnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    uint32_t name = 0;
    if (!field(i, 0, name) || !field(i, 4, sec[i].type) || !field(i, 0x18, sec[i].offset) || !field(i, 0x20, sec[i].size) ||
        !field(i, 0x28, sec[i].link))
      return r;
    if (name < strsize) sec[i].name.assign(cubin.data() + strtab + name, strnlen(cubin.data() + strtab + name, strsize - name));
    if (sec[i].type != 8 /* NOBITS */ && (sec[i].offset > cubin.size() || cubin.size() - sec[i].offset < sec[i].size))
      return r;
  }
  // The symbol's index in .symtab (entries of 24 bytes: st_name first), whose names are in the
  // section its sh_link names.
  int64_t sym = -1;
  for (const Section& s : sec) {
    if (s.type != 2 /* SYMTAB */ || s.link >= shnum) continue;
    const Section& names = sec[s.link];
    for (uint64_t e = 0; e + 24 <= s.size && sym < 0; e += 24) {
      uint32_t nm = 0;
      read_at(cubin, s.offset + e, nm);
      if (nm < names.size && std::string_view(cubin.data() + names.offset + nm, strnlen(cubin.data() + names.offset + nm, names.size - nm)) == symbol)
        sym = static_cast<int64_t>(e / 24);
    }
  }
  for (const Section& s : sec) {
    if (s.name == ".nv.shared." + symbol) r.static_smem = static_cast<int64_t>(s.size);
    if (s.name != ".nv.info" || sym < 0) continue;
    // Attributes: a format byte, an attribute byte, then for format 4 (a value of its own size) a
    // 16-bit size and that many bytes; other formats are 4 bytes in all. REGCOUNT (0x2f) and
    // FRAME_SIZE (0x11) hold a symbol index and a 32-bit value.
    for (uint64_t at = 0; at + 4 <= s.size;) {
      const uint8_t fmt = static_cast<uint8_t>(cubin[s.offset + at]), attr = static_cast<uint8_t>(cubin[s.offset + at + 1]);
      uint16_t size = 0;
      read_at(cubin, s.offset + at + 2, size);
      if (fmt == 4 && size >= 8 && at + 4 + size <= s.size) {
        uint32_t index = 0, value = 0;
        read_at(cubin, s.offset + at + 4, index);
        read_at(cubin, s.offset + at + 8, value);
        if (index == sym && attr == 0x2f) r.registers = static_cast<int>(value);
        if (index == sym && attr == 0x11) r.frame_bytes = value;
      }
      at += 4 + (fmt == 4 ? size : 0);
    }
  }
  if (r.registers >= 0 && r.static_smem < 0) r.static_smem = 0;  // no .nv.shared section: none
  if (r.registers >= 0 && r.frame_bytes < 0) r.frame_bytes = 0;
  return r;
}

}  // namespace tessera
