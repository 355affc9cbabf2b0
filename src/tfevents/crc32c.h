// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the
// TFRecord framing that TensorBoard event files use. Pure, thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace stoker::tfevents {

// The CRC-32C of `data`; Crc32c("123456789") == 0xE3069283. `crc` continues
// an earlier call over the bytes before `data` (0 to start).
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

// TFRecord's masked form of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8,
// in 32 bits. Stored after the length and after the data of each record.
uint32_t MaskCrc(uint32_t crc);

}  // namespace stoker::tfevents
