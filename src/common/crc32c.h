// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum of
// Cloud Storage objects (their `crc32c` field) and of TFRecord framing.
// Pure, thread-safe. Uses the CPU's crc32 instruction (SSE 4.2) when it has
// one, else slicing-by-8 tables; both give the same values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace stoker {

// The CRC-32C of `data`; Crc32c("123456789") == 0xE3069283. `crc` continues
// an earlier call over the bytes before `data` (0 to start).
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

// The form Cloud Storage's JSON API gives: the 4 bytes big-endian, base64
// ("AAAAAA==" for the empty object).
std::string Crc32cBase64(uint32_t crc);

}  // namespace stoker
