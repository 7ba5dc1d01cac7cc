#include "runtime/trun/step/ElfCheck.h"

#include "runtime/trun/io/ReadOnlyFile.h"

#include "absl/strings/str_cat.h"

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace tcc::trun {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#else
#error "ElfCheck: add this machine's EM_* value"
#endif

absl::Status Bad(const std::string &path, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat(path, " is truncated or not a step library: ", what));
}

// "[begin, end)" of `count` entries of `entry_bytes` at `offset`; false when
// the end overflows uint64.
bool TableEnd(uint64_t offset, uint64_t count, uint64_t entry_bytes,
              uint64_t &end) {
  uint64_t bytes;
  return !__builtin_mul_overflow(count, entry_bytes, &bytes) &&
         !__builtin_add_overflow(offset, bytes, &end);
}

absl::Status CheckHeaders(const ReadOnlyFile &file) {
  const std::string &path = file.path();
  const uint64_t size = file.size();
  Elf64_Ehdr header;
  if (size < sizeof(header))
    return Bad(path, absl::StrCat(size, " bytes, shorter than the ",
                                  sizeof(header), "-byte ELF header"));
  if (!file.ReadAt(0, sizeof(header), &header).ok())
    return Bad(path, "cannot read the ELF header");
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
    return Bad(path, "no ELF magic at the start of the file");
  if (header.e_ident[EI_CLASS] != ELFCLASS64)
    return Bad(path, "not a 64-bit ELF file");
  if (header.e_ident[EI_DATA] != ELFDATA2LSB)
    return Bad(path, "not a little-endian ELF file");
  if (header.e_type != ET_DYN)
    return Bad(path, absl::StrCat("ELF type ", header.e_type,
                                  ", not a shared library (ET_DYN = ", ET_DYN,
                                  ")"));
  if (header.e_machine != kHostMachine)
    return Bad(path, absl::StrCat("built for ELF machine ", header.e_machine,
                                  ", this trun runs on machine ",
                                  kHostMachine));

  if (header.e_phnum == 0 || header.e_phentsize != sizeof(Elf64_Phdr))
    return Bad(path, absl::StrCat("program header table of ", header.e_phnum,
                                  " entries of ", header.e_phentsize,
                                  " bytes (expected entries of ",
                                  sizeof(Elf64_Phdr), " bytes)"));
  uint64_t table_end;
  if (!TableEnd(header.e_phoff, header.e_phnum, sizeof(Elf64_Phdr),
                table_end) ||
      table_end > size)
    return Bad(path, absl::StrCat("the program header table at byte ",
                                  header.e_phoff, " (", header.e_phnum,
                                  " entries) ends past the end of the file (",
                                  size, " bytes)"));
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  if (!file.ReadAt(header.e_phoff, segments.size() * sizeof(Elf64_Phdr),
                   segments.data())
           .ok())
    return Bad(path, "cannot read the program header table");
  for (size_t i = 0; i < segments.size(); ++i) {
    const Elf64_Phdr &segment = segments[i];
    // Every segment with file bytes, loadable or not: the loader also reads
    // notes and the dynamic section, and all lie inside a PT_LOAD anyway.
    if (segment.p_filesz == 0)
      continue;
    uint64_t end;
    if (__builtin_add_overflow(segment.p_offset, segment.p_filesz, &end) ||
        end > size)
      return Bad(path,
                 absl::StrCat(segment.p_type == PT_LOAD ? "loadable " : "",
                              "segment ", i, " (file bytes ", segment.p_offset,
                              " to ", segment.p_offset + segment.p_filesz,
                              ") ends past the end of the file (", size,
                              " bytes)"));
  }

  // The loader does not need section headers, but they come last in a
  // linked library: a file cut anywhere loses them, so they show truncation
  // even where every segment survived.
  if (header.e_shoff != 0) {
    // With 0xff00 sections or more e_shnum is 0 and the count lives in the
    // first entry: that entry must be there at least.
    uint64_t count = header.e_shnum == 0 ? 1 : header.e_shnum;
    if (header.e_shentsize != sizeof(Elf64_Shdr))
      return Bad(path, absl::StrCat("section header entries of ",
                                    header.e_shentsize, " bytes (expected ",
                                    sizeof(Elf64_Shdr), ")"));
    if (!TableEnd(header.e_shoff, count, sizeof(Elf64_Shdr), table_end) ||
        table_end > size)
      return Bad(path, absl::StrCat("the section header table at byte ",
                                    header.e_shoff, " (", count,
                                    " entries) ends past the end of the file (",
                                    size, " bytes)"));
  }
  return absl::OkStatus();
}

} // namespace

absl::Status CheckStepLibraryFile(const std::string &path) {
  absl::StatusOr<ReadOnlyFile> file = ReadOnlyFile::Open(path);
  if (!file.ok())
    return file.status();
  return CheckHeaders(*file);
}

} // namespace tcc::trun
