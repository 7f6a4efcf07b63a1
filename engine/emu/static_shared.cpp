#include "engine/emu/static_shared.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace glass::emu::detail {
namespace {

constexpr unsigned char kPoison = 0xFF;

// Where the section lies in the executable: its link-time address, and that of the PT_TLS
// segment it is part of (a thread's copy of the segment starts at dlpi_tls_data).
struct SectionLayout {
  bool found = false;
  uint64_t section_address = 0;
  uint64_t section_bytes = 0;
  std::vector<StaticSharedVariable> variables;
};

std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !d) return name;
  std::string out(d);
  std::free(d);
  return out;
}

// Reads the section header and the symbols in the section from the executable file. Only the
// main executable is searched: glass links its kernels statically.
SectionLayout read_layout() {
  SectionLayout layout;
  const int fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return layout;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    return layout;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return layout;
  const auto* file = static_cast<const unsigned char*>(map);
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(file);
  const bool elf64 =
      std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
      eh->e_shoff + eh->e_shnum * sizeof(Elf64_Shdr) <= size && eh->e_shstrndx < eh->e_shnum;
  if (elf64) {
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(file + eh->e_shoff);
    const char* names = reinterpret_cast<const char*>(file + sh[eh->e_shstrndx].sh_offset);
    size_t index = 0;
    for (size_t i = 0; i < eh->e_shnum; ++i)
      if (std::strcmp(names + sh[i].sh_name, GLASS_EMU_STATIC_SHARED_SECTION) == 0) index = i;
    if (index != 0) {
      layout.found = true;
      layout.section_address = sh[index].sh_addr;
      layout.section_bytes = sh[index].sh_size;
      for (size_t i = 0; i < eh->e_shnum; ++i) {
        if (sh[i].sh_type != SHT_SYMTAB) continue;
        const auto* sym = reinterpret_cast<const Elf64_Sym*>(file + sh[i].sh_offset);
        const char* strings = reinterpret_cast<const char*>(file + sh[sh[i].sh_link].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k) {
          if (sym[k].st_shndx != index || sym[k].st_size == 0) continue;
          if (ELF64_ST_TYPE(sym[k].st_info) != STT_TLS) continue;
          // A TLS symbol's value is its offset in the PT_TLS segment; the section's own offset
          // in that segment is subtracted when the segment is found (read_base).
          layout.variables.push_back({static_cast<size_t>(sym[k].st_value),
                                      static_cast<size_t>(sym[k].st_size),
                                      demangle(strings + sym[k].st_name)});
        }
      }
    }
  }
  ::munmap(map, size);
  return layout;
}

struct Program {
  SectionLayout layout;
  uint64_t tls_segment_address = 0;  // p_vaddr of the executable's PT_TLS
  bool tls_found = false;
};

int find_tls_segment(struct dl_phdr_info* info, size_t, void* data) {
  auto* p = static_cast<Program*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_TLS) {
      p->tls_segment_address = info->dlpi_phdr[i].p_vaddr;
      p->tls_found = true;
    }
  return 1;  // the first module is the executable
}

const Program& program() {
  // Never destroyed: emulated-GPU stream workers may still run while static destructors do.
  static const Program& p = *new Program([] {
    Program q;
    q.layout = read_layout();
    dl_iterate_phdr(find_tls_segment, &q);
    if (!q.layout.found || !q.tls_found) {
      q.layout.variables.clear();
      return q;
    }
    // st_value of a TLS symbol in an executable is its offset from the start of the segment.
    const uint64_t section_offset = q.layout.section_address - q.tls_segment_address;
    for (StaticSharedVariable& v : q.layout.variables) v.offset -= section_offset;
    std::erase_if(q.layout.variables, [&](const StaticSharedVariable& v) {
      return v.offset + v.bytes > q.layout.section_bytes;
    });
    std::sort(q.layout.variables.begin(), q.layout.variables.end(),
              [](const auto& a, const auto& b) { return a.offset < b.offset; });
    return q;
  }());
  return p;
}

struct ThreadBase {
  std::byte* base = nullptr;
};

int find_thread_copy(struct dl_phdr_info* info, size_t, void* data) {
  auto* t = static_cast<ThreadBase*>(data);
  const Program& p = program();
  if (info->dlpi_tls_data)
    t->base = static_cast<std::byte*>(info->dlpi_tls_data) +
              (p.layout.section_address - p.tls_segment_address);
  return 1;
}

bool all_poison(const std::byte* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w != ~uint64_t{0}) return false;
  }
  for (; i < n; ++i)
    if (static_cast<unsigned char>(p[i]) != kPoison) return false;
  return true;
}

}  // namespace

const std::vector<StaticSharedVariable>& static_shared_variables() {
  return program().layout.variables;
}

StaticSharedMemory::StaticSharedMemory() {
  if (static_shared_variables().empty()) return;
  ThreadBase t;
  dl_iterate_phdr(find_thread_copy, &t);
  base_ = t.base;
}

void StaticSharedMemory::poison_all() {
  if (base_) std::memset(base_, kPoison, program().layout.section_bytes);
  fresh_ = false;
}

bool StaticSharedMemory::contains(const void* p, size_t bytes) const {
  const auto* b = static_cast<const std::byte*>(p);
  return base_ && b >= base_ && b + bytes <= base_ + program().layout.section_bytes;
}

void StaticSharedMemory::end_block(std::vector<size_t>& written, const std::vector<size_t>* only) {
  if (!base_) return;
  if (fresh_) return poison_all();  // no block ran here yet: nothing was written
  const std::vector<StaticSharedVariable>& vars = static_shared_variables();
  const size_t n = only ? only->size() : vars.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = only ? (*only)[k] : k;
    std::byte* p = base_ + vars[i].offset;
    if (all_poison(p, vars[i].bytes)) continue;
    std::memset(p, kPoison, vars[i].bytes);
    auto at = std::lower_bound(written.begin(), written.end(), i);
    if (at == written.end() || *at != i) written.insert(at, i);
  }
}

size_t static_shared_bytes(const std::vector<size_t>& indices) {
  size_t total = 0;
  for (size_t i : indices) total += static_shared_variables()[i].bytes;
  return total;
}

std::string describe_static_shared(const std::vector<size_t>& indices) {
  std::string out;
  for (size_t i : indices) {
    const StaticSharedVariable& v = static_shared_variables()[i];
    if (!out.empty()) out += ", ";
    out += v.name + " (" + std::to_string(v.bytes) + " bytes)";
  }
  return out;
}

}  // namespace glass::emu::detail
