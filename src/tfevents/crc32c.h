// The TFRecord framing's checksum: CRC-32C (common/crc32c.h) and its masked
// form. Pure, thread-safe.
#pragma once

#include <cstdint>

#include "common/crc32c.h"

namespace stoker::tfevents {

using ::stoker::Crc32c;

// TFRecord's masked form of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8,
// in 32 bits. Stored after the length and after the data of each record.
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace stoker::tfevents
