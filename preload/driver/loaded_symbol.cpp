#include "preload/driver/loaded_symbol.h"

#include <elf.h>
#include <link.h>
#include <string.h>

#include <cstdint>

namespace nvshare::preload {

namespace {

struct Search {
    const char* name;
    const char* version;
    uint32_t gnu_hash;
    void* found;
};

uint32_t gnu_hash_of(const char* name)
{
    uint32_t h = 5381;
    for (const unsigned char* p = reinterpret_cast<const unsigned char*>(name); *p != 0; ++p)
        h = h * 33 + *p;
    return h;
}

// The dynamic linker relocates the address entries of a writable .dynamic in
// place; a read-only one (the vDSO's) keeps link-time offsets.
template <typename T>
const T* at(const dl_phdr_info* info, ElfW(Addr) d)
{
    return reinterpret_cast<const T*>(d < info->dlpi_addr ? d + info->dlpi_addr : d);
}

struct Tables {
    const ElfW(Sym) * symtab = nullptr;
    const char* strtab = nullptr;
    const ElfW(Half) * versym = nullptr;
    const ElfW(Verdef) * verdef = nullptr;
    const uint32_t* gnu_hash = nullptr;
    const uint32_t* sysv_hash = nullptr;
};

bool version_matches(const Tables& t, uint32_t index, const char* version)
{
    if (t.versym == nullptr || t.verdef == nullptr)
        return false;
    const ElfW(Half) ndx = t.versym[index] & 0x7fff;
    for (const ElfW(Verdef)* d = t.verdef;;
         d = reinterpret_cast<const ElfW(Verdef)*>(reinterpret_cast<const char*>(d) + d->vd_next)) {
        if (d->vd_ndx == ndx) {
            const auto* aux = reinterpret_cast<const ElfW(Verdaux)*>(
                reinterpret_cast<const char*>(d) + d->vd_aux);
            return strcmp(t.strtab + aux->vda_name, version) == 0;
        }
        if (d->vd_next == 0)
            return false;
    }
}

bool matches(const Tables& t, uint32_t index, const Search& s)
{
    const ElfW(Sym)& sym = t.symtab[index];
    const unsigned type = ELF64_ST_TYPE(sym.st_info);
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0 || type == STT_GNU_IFUNC)
        return false;
    if (type != STT_FUNC && type != STT_OBJECT)
        return false;
    return strcmp(t.strtab + sym.st_name, s.name) == 0 && version_matches(t, index, s.version);
}

// The GNU hash table: buckets give each hash's first symbol, chains hold the
// hashes (low bit set on a chain's last entry).
int find_gnu(const Tables& t, const Search& s)
{
    const uint32_t nbuckets = t.gnu_hash[0];
    const uint32_t symoffset = t.gnu_hash[1];
    const uint32_t bloom_size = t.gnu_hash[2];
    if (nbuckets == 0)
        return -1;
    const auto* buckets = reinterpret_cast<const uint32_t*>(
        reinterpret_cast<const ElfW(Addr)*>(t.gnu_hash + 4) + bloom_size);
    const uint32_t* chain = buckets + nbuckets;
    uint32_t i = buckets[s.gnu_hash % nbuckets];
    if (i < symoffset)
        return -1;
    for (;; ++i) {
        const uint32_t h = chain[i - symoffset];
        if ((h | 1) == (s.gnu_hash | 1) && matches(t, i, s))
            return static_cast<int>(i);
        if ((h & 1) != 0)
            return -1;
    }
}

// The SysV hash table's chain count is the number of symbols.
int find_sysv(const Tables& t, const Search& s)
{
    const uint32_t count = t.sysv_hash[1];
    for (uint32_t i = 1; i < count; ++i)
        if (matches(t, i, s))
            return static_cast<int>(i);
    return -1;
}

int visit(dl_phdr_info* info, size_t, void* data)
{
    auto* s = static_cast<Search*>(data);
    const ElfW(Dyn)* dyn = nullptr;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (dyn == nullptr)
        return 0;
    Tables t;
    for (; dyn->d_tag != DT_NULL; ++dyn) {
        switch (dyn->d_tag) {
            case DT_SYMTAB:
                t.symtab = at<ElfW(Sym)>(info, dyn->d_un.d_ptr);
                break;
            case DT_STRTAB:
                t.strtab = at<char>(info, dyn->d_un.d_ptr);
                break;
            case DT_VERSYM:
                t.versym = at<ElfW(Half)>(info, dyn->d_un.d_ptr);
                break;
            case DT_VERDEF:
                t.verdef = at<ElfW(Verdef)>(info, dyn->d_un.d_ptr);
                break;
            case DT_GNU_HASH:
                t.gnu_hash = at<uint32_t>(info, dyn->d_un.d_ptr);
                break;
            case DT_HASH:
                t.sysv_hash = at<uint32_t>(info, dyn->d_un.d_ptr);
                break;
            default:
                break;
        }
    }
    if (t.symtab == nullptr || t.strtab == nullptr)
        return 0;
    const int i = t.gnu_hash != nullptr    ? find_gnu(t, *s)
                  : t.sysv_hash != nullptr ? find_sysv(t, *s)
                                           : -1;
    if (i < 0)
        return 0;
    s->found = reinterpret_cast<void*>(info->dlpi_addr + t.symtab[i].st_value);
    return 1;
}

}  // namespace

void* loaded_symbol(const char* name, const char* version)
{
    Search s{name, version, gnu_hash_of(name), nullptr};
    dl_iterate_phdr(visit, &s);
    return s.found;
}

}  // namespace nvshare::preload
