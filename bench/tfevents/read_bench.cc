// How long a trainingMetrics request spends in the TensorBoard reader
// (src/tfevents): a log directory with one event file of N scalar events
// (4 tags per event, as a trainer logging loss, accuracy, lr and grad norm
// every step), read cold, read again unchanged, and read after 100 more
// events were appended (the incremental path). Also CRC-32C throughput.
//
//   tfevents-read-bench [EVENTS] [ROUNDS]     (default 250000, 5)
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tfevents/crc32c.h"
#include "tfevents/event_dir.h"

namespace fs = std::filesystem;
using namespace stoker::tfevents;

namespace {

std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  return s + static_cast<char>(v);
}
std::string Le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>(v >> (8 * i));
  return s;
}
std::string Len(int field, const std::string& b) {
  return Varint(static_cast<uint64_t>(field) << 3 | 2) + Varint(b.size()) + b;
}
std::string Record(const std::string& d) {
  std::string n = Le(d.size(), 8);
  return n + Le(MaskCrc(Crc32c(n)), 4) + d + Le(MaskCrc(Crc32c(d)), 4);
}
std::string Events(int64_t from, int64_t count) {
  std::string out;
  const char* tags[] = {"loss", "accuracy", "lr", "grad_norm"};
  for (int64_t step = from; step < from + count; ++step) {
    std::string values;
    for (const char* tag : tags) {
      float v = 1.0f / static_cast<float>(step + 1);
      values += Len(1, Len(1, tag) + Varint(2 << 3 | 5) + Le(std::bit_cast<uint32_t>(v), 4));
    }
    out += Record(Varint(1 << 3 | 1) + Le(std::bit_cast<uint64_t>(1764139200.0 + step), 8) +
                  Varint(2 << 3) + Varint(step) + Len(5, values));
  }
  return out;
}

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t events = argc > 1 ? std::atoll(argv[1]) : 250000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  fs::path dir = fs::temp_directory_path() / ("tfevents_bench_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "events.out.tfevents.1.bench").string();
  const std::string body = Events(0, events);

  std::vector<double> crc_ms, cold_ms, same_ms, append_ms;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    volatile uint32_t c = Crc32c(body);
    (void)c;
    crc_ms.push_back(Ms(std::chrono::steady_clock::now() - t0));

    std::ofstream(file, std::ios::binary | std::ios::trunc) << body;
    EventDirReader reader;
    t0 = std::chrono::steady_clock::now();
    DirScalars d = reader.Read(dir);
    cold_ms.push_back(Ms(std::chrono::steady_clock::now() - t0));
    if (d.series.size() != 4 || !d.skipped.empty()) {
      std::fprintf(stderr, "unexpected: %zu series, %zu skipped\n", d.series.size(),
                   d.skipped.size());
      return 1;
    }
    t0 = std::chrono::steady_clock::now();
    reader.Read(dir);
    same_ms.push_back(Ms(std::chrono::steady_clock::now() - t0));
    std::ofstream(file, std::ios::binary | std::ios::app) << Events(events, 100);
    t0 = std::chrono::steady_clock::now();
    d = reader.Read(dir);
    append_ms.push_back(Ms(std::chrono::steady_clock::now() - t0));
    if (d.series[0].points.back().step != events + 99) return 1;
  }
  fs::remove_all(dir);
  const double mb = body.size() / 1e6;
  std::printf("file: %lld events x 4 scalar tags, %.1f MB; median of %d rounds\n",
              static_cast<long long>(events), mb, rounds);
  std::printf("crc32c:              %8.2f ms  %7.0f MB/s\n", Median(crc_ms),
              mb / Median(crc_ms) * 1e3);
  std::printf("cold read:           %8.2f ms  %7.0f MB/s\n", Median(cold_ms),
              mb / Median(cold_ms) * 1e3);
  std::printf("unchanged re-read:   %8.3f ms  (cold/unchanged %.0fx)\n", Median(same_ms),
              Median(cold_ms) / Median(same_ms));
  std::printf("after +100 events:   %8.3f ms  (cold/incremental %.0fx)\n", Median(append_ms),
              Median(cold_ms) / Median(append_ms));
  return 0;
}
