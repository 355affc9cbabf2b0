// Internal to the scheduling policy (policy.h is its only public header):
// hashing and interning for one Schedule() call. Header-only on purpose: these
// run several times for each of 10,000 queued jobs and must inline into the
// loops of every policy_*.cc that uses them.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace stoker::scheduler::internal {

// One step of a multiplicative hash (FxHash's): a rotate, an xor and a
// multiply per 8-byte word. Weak on its own, but enough for HashIndex, which
// spreads it over the slots with Fibonacci hashing and compares keys on a
// hash match. This runs several times for each of 10,000 queued jobs.
inline uint64_t Mix(uint64_t h, uint64_t v) {
  return (std::rotl(h, 5) ^ v) * 0x517cc1b727220a95ull;
}

// Every byte of `s`; no allocation, no library call. Short strings (user
// names, GPU types) take two overlapping loads.
[[gnu::always_inline]] inline uint64_t StringHash(std::string_view s,
                                                  uint64_t h = 0x9e3779b97f4a7c15ull) {
  const char* p = s.data();
  const size_t n = s.size();
  auto load8 = [](const char* q) {
    uint64_t w;
    std::memcpy(&w, q, 8);
    return w;
  };
  h = Mix(h, n);
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) h = Mix(h, load8(p + i));
    return Mix(h, load8(p + n - 8));  // the last 8 bytes, overlapping
  }
  uint64_t w = 0;
  if (n >= 4) {
    uint32_t a, b;  // overlapping
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    w = (static_cast<uint64_t>(a) << 32) | b;
  } else if (n > 0) {
    auto byte = [&](size_t i) { return static_cast<uint64_t>(static_cast<unsigned char>(p[i])); };
    w = (byte(0) << 16) | (byte(n / 2) << 8) | byte(n - 1);
  }
  return Mix(h, w);
}

// a == b, without a library call for the short strings that user names and
// GPU types are (overlapping loads, as in StringHash): one or two compares
// per queued job add up over 10,000 jobs.
inline bool SameText(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  if (n >= 8 && n <= 16) {
    uint64_t a0, a1, b0, b1;
    std::memcpy(&a0, a.data(), 8);
    std::memcpy(&a1, a.data() + n - 8, 8);
    std::memcpy(&b0, b.data(), 8);
    std::memcpy(&b1, b.data() + n - 8, 8);
    return a0 == b0 && a1 == b1;
  }
  if (n >= 4 && n < 8) {
    uint32_t a0, a1, b0, b1;
    std::memcpy(&a0, a.data(), 4);
    std::memcpy(&a1, a.data() + n - 4, 4);
    std::memcpy(&b0, b.data(), 4);
    std::memcpy(&b1, b.data() + n - 4, 4);
    return a0 == b0 && a1 == b1;
  }
  return a == b;
}

// An open-addressing index from 64-bit hashes to dense ids 0, 1, 2, ... The
// caller owns the keys and settles hash collisions through `same(id)`. Lives
// for one call, so it only grows. Cheaper than std::unordered_map here: no
// node allocation, no modulo by a prime.
class HashIndex {
 public:
  // The id of the key hashing to `h` for which same(id) holds; if there is
  // none, registers the key as id size() and sets *added.
  template <typename Same>
  [[gnu::always_inline]] uint32_t FindOrAdd(uint64_t h, Same&& same, bool* added) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = Home(h);; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (slot.id == kEmpty) {
        slot = {h, size_};
        *added = true;
        return size_++;
      }
      if (slot.hash == h && same(slot.id)) {
        *added = false;
        return slot.id;
      }
    }
  }
  uint32_t size() const { return size_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t hash = 0;
    uint32_t id = kEmpty;
  };
  // Fibonacci hashing: the top bits of h x golden ratio, so that hashes that
  // differ only in high bits still spread.
  size_t Home(uint64_t h) const { return (h * 0x9e3779b97f4a7c15ull) >> shift_; }
  // Rare (the table doubles), so kept out of line: FindOrAdd inlines into
  // per-job loops and should stay small there.
  [[gnu::noinline]] void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(64, old.size() * 2), Slot());
    shift_ = 64 - std::countr_zero(slots_.size());
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.id == kEmpty) continue;
      size_t i = Home(s.hash);
      while (slots_[i].id != kEmpty) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;  // a power of two long
  int shift_ = 64;
  uint32_t size_ = 0;
};

}  // namespace stoker::scheduler::internal
