// CRC-32C for RocksDB's write-ahead log, with the CPU's crc32 instruction.
//
// RocksDB checksums every log record (and its MANIFEST records) with CRC-32C through the exported
// function `rocksdb::crc32c::Extend`, which every caller inside librocksdb reaches through the
// PLT. Debian builds librocksdb portable, without SSE4.2 (`objdump -d` of librocksdb.so.7.8.3
// finds no crc32 instruction), so it computes the checksum from tables. That took about 7% of
// the commit thread's CPU under durable writes (about 1.1 us per PUT, checksumming the batch's
// 40 KB or so of log record), on the one thread every write waits for.
//
// store/crc32c.cc defines `rocksdb::crc32c::Extend`, so that in every program linking it (the
// dynamic linker binds librocksdb's PLT calls to the executable's definition first; CMake makes
// every program linking gw_store take it, with `--undefined` of the symbol) RocksDB's
// checksums are computed with SSE4.2, on a CPU that has it, and by librocksdb's own function
// otherwise. The checksum is the same either way (tests/store/crc32c_test.cc compares the two):
// logs written before and after read back alike. Table files are not affected: their blocks use
// XXH3 (RocksDB's default `checksum`).
#pragma once

#include <cstddef>
#include <cstdint>

namespace rocksdb::crc32c {
// The CRC-32C of `data` continued from `crc` (0 to start), as librocksdb defines it.
uint32_t Extend(uint32_t crc, const char* data, size_t n);
}  // namespace rocksdb::crc32c

namespace gw {

// The mangled name of rocksdb::crc32c::Extend, for dlsym (CMakeLists.txt spells it out too).
inline constexpr char kCrc32cExtendSymbol[] = "_ZN7rocksdb6crc32c6ExtendEjPKcm";

// Which function computes RocksDB's CRC-32C in this process: "sse4.2" (this file's, with the CPU's
// instruction), "rocksdb" (librocksdb's own, the CPU lacks SSE4.2), or "rocksdb (not replaced)" if
// the dynamic linker did not bind `rocksdb::crc32c::Extend` to this program's definition. Store
// writes it into the info log (`LOG`) when it opens a database.
const char* crc32c_implementation();

// librocksdb's own `rocksdb::crc32c::Extend`, found past this program's (dlsym RTLD_NEXT);
// nullptr if not found. For the fallback and the tests.
using Crc32cExtend = uint32_t (*)(uint32_t, const char*, size_t);
Crc32cExtend rocksdb_crc32c_extend();

}  // namespace gw
